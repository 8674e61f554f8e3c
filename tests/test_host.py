"""The Host tree directly: layout, side files, editors' saves, refusals (the rules WebDAV and FUSE share)."""
from __future__ import annotations

from typing import Any

import pytest

from store import admin, errors, scratch
from store.access import Door
from store.changefeed import SIDE_FILE, ChangeFeed
from store.db import Database
from store.host import HostTree


@pytest.fixture
def tree(db: Database, boot: dict[str, Any]) -> HostTree:
    principal = Door(db).basic(boot["email"], boot["password"])
    return HostTree(db, principal)


def test_layout_and_note_roundtrip(tree: HostTree, boot: dict[str, Any]) -> None:
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    assert [n.name for n in tree.list("")] == ["org"]
    assert [n.name for n in tree.list("org")] == [str(org)]
    assert [n.name for n in tree.list(f"org/{org}")] == ["agents", "collections", "guilds"]
    assert [n.name for n in tree.list(f"org/{org}/agents/{agent}")] == [
        "history-archive", "scripts", "memory.md", "task.md"]
    node = tree.write(f"org/{org}/guilds/{guild}/plan.md", "# Plan\n".encode())
    assert (node.kind, node.version, node.size) == ("note", 1, 7)
    assert tree.read(f"org/{org}/guilds/{guild}/plan.md") == b"# Plan\n"
    again = tree.write(f"org/{org}/guilds/{guild}/plan.md", b"two")
    assert again.version == 2 and again.etag != node.etag
    with pytest.raises(errors.NotFound):
        tree.stat("org/999/x.md")


def test_a_note_moved_onto_the_task_that_embeds_it_is_refused(tree: HostTree, boot: dict[str, Any]) -> None:
    """The spec's rule on moving an embedded note holds when the destination is the embedding
    task itself: the note is not soft-deleted by replacing the task's text with its own."""
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    note, task = f"org/{org}/guilds/{guild}/playbook.md", f"org/{org}/agents/{agent}/task.md"
    tree.write(note, b"# Playbook\n")
    tree.write(task, f"Follow ![[{note}]]".encode())
    with pytest.raises(errors.Embedded, match="embeds it"):
        tree.move(note, task)
    assert tree.read(note) == b"# Playbook\n"
    assert tree.read(task).decode().startswith(f"Follow ![[{note}]]")
    # A note no task embeds may still replace the task (the operator's explicit replace).
    tree.write(f"org/{org}/guilds/{guild}/next.md", b"Next task")
    tree.move(f"org/{org}/guilds/{guild}/next.md", task)
    assert tree.read(task).decode().startswith("Next task")
    with pytest.raises(errors.NotFound):
        tree.stat(f"org/{org}/guilds/{guild}/next.md")


def test_tree_rules_shared_by_both_front_ends(tree: HostTree, boot: dict[str, Any], db: Database) -> None:
    g = f"org/{boot['org_id']}/guilds/{boot['guild_id']}"
    with pytest.raises(errors.NotANote, match="notes are flat"):
        tree.mkdir(f"{g}/drafts")
    with pytest.raises(errors.NotANote, match="does not end in .md"):
        tree.check_write(f"{g}/a.txt")
    note = tree.write(f"{g}/a.md", b"one")
    with pytest.raises(errors.NotANote):
        tree.list(f"{g}/a.md")
    with pytest.raises(errors.PreconditionFailed):
        tree.write(f"{g}/a.md", b"two", if_match='"a0-v9"')
    # vim's rename-away: a copy goes to scratch and the note is gone for this user until the
    # editor writes it again, which is its next version (same identity).
    side = tree.move(f"{g}/a.md", f"{g}/a.md~")
    assert side.kind == "side" and tree.read(f"{g}/a.md~") == b"one"
    with pytest.raises(errors.NotFound):
        tree.read(f"{g}/a.md")
    assert [n.name for n in tree.list(g)] == ["a.md~"]
    again = tree.write(f"{g}/a.md", b"one again", if_none_match=True)
    assert again.version == 2 and again.etag.split("-")[0] == note.etag.split("-")[0]
    tree.delete(f"{g}/a.md~")
    # A side file moved over the note: one new version, same identity.
    tree.write(f"{g}/.a.md.swp", b"three")
    after = tree.move(f"{g}/.a.md.swp", f"{g}/a.md")
    assert after.version == 3 and after.etag.split("-")[0] == note.etag.split("-")[0]
    with pytest.raises(errors.ReadOnly):
        tree.write(f"org/{boot['org_id']}/agents/{boot['agent_id']}/history-archive/x.md", b"x")
    with pytest.raises(errors.Forbidden):
        tree.delete(f"org/{boot['org_id']}/agents/{boot['agent_id']}/task.md")


def test_a_read_after_writing_through_the_same_tree_is_never_stale(tree: HostTree, boot: dict[str, Any]) -> None:
    """stat() keeps the content briefly so a GET is one query; a write, move or delete through the
    same tree must not let read() answer the old bytes (a mount keeps its tree for hours)."""
    path = f"org/{boot['org_id']}/guilds/{boot['guild_id']}/cache.md"
    tree.write(path, b"old")
    assert tree.stat(path).size == 3
    tree.write(path, b"new body")
    assert tree.read(path) == b"new body"
    tree.stat(path)
    tree.move(path, path.replace("cache.md", "moved.md"))
    with pytest.raises(errors.NotFound):
        tree.read(path)


def test_the_history_archive_is_what_store_memory_lists_and_reads(tree: HostTree, boot: dict[str, Any],
                                                                    db: Database) -> None:
    """One memory history: the tree's history-archive/ shows memory.list_history's names and
    memory.read_history's bytes, and a version answers under that one name only."""
    from store import memory
    org, agent = boot["org_id"], boot["agent_id"]
    folder = f"org/{org}/agents/{agent}/history-archive"
    for text in (b"one", b"two", b"three"):
        tree.write(f"org/{org}/agents/{agent}/memory.md", text)
    with db.connection() as conn:
        listed = memory.list_history(conn, org, agent)
    nodes = tree.list(folder)
    assert sorted(n.name for n in nodes) == sorted(h["name"] for h in listed) and len(nodes) == 2
    assert [tree.read(f"{folder}/{h['name']}") for h in listed] == [b"two", b"one"]  # newest first
    assert {n.size for n in nodes} == {3} and all(n.kind == "history" and not n.writable for n in nodes)
    # The same version without its microseconds is another spelling of it, not a second file.
    short = listed[0]["name"][:15] + "Z" + listed[0]["name"][22:]
    with pytest.raises(errors.NotFound):
        tree.stat(f"{folder}/{short}")
    with pytest.raises(errors.ReadOnly):
        tree.delete(f"{folder}/{listed[0]['name']}")


def test_each_kind_of_file_says_what_it_is(tree: HostTree, boot: dict[str, Any]) -> None:
    """Content type, writable and deletable come from the file's family, the same in a listing
    and in a stat."""
    org, agent = boot["org_id"], boot["agent_id"]
    a = f"org/{org}/agents/{agent}"
    tree.write(f"{a}/n.md", b"n")
    tree.write(f"{a}/scripts/s.py", b"print(1)")
    listed = {n.name: n for n in tree.list(a) + tree.list(f"{a}/scripts")}
    want = {"n.md": ("note", "text/markdown; charset=utf-8", True, True),
            "task.md": ("task", "text/markdown; charset=utf-8", True, False),
            "memory.md": ("memory", "text/markdown; charset=utf-8", True, False),
            "s.py": ("script", "text/x-python; charset=utf-8", True, True)}
    for name, (kind, ctype, writable, deletable) in want.items():
        node = listed[name]
        assert (node.kind, node.content_type, node.writable, node.deletable) == (kind, ctype, writable, deletable)
        assert tree.stat(node.path) == node


def test_an_overwrite_is_two_statements_with_its_provenance(db_url: str, boot: dict[str, Any]) -> None:
    """Overwriting a file through the tree reads the current version (for If-Match and the
    rename-away save) and then writes it with its provenance row and event: two statements, not a
    folder check and a re-read around them. A tree that honours WebDAV leases itself (the mount's,
    the web app's; WebDAV's requests are checked against their tokens by WsgiDAV) asks for them
    first: one more."""
    import psycopg

    from tests.conftest import observed_database

    seen: list[str] = []

    class Counting(psycopg.Connection):
        def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
            seen.append(str(query))
            return super().execute(query, *args, **kwargs)

    database = observed_database(db_url, Counting, max_size=2)
    try:
        principal = Door(database).basic(boot["email"], boot["password"])
        a = f"org/{boot['org_id']}/agents/{boot['agent_id']}"
        for honour_leases, statements in ((False, 2), (True, 3)):
            tree = HostTree(database, principal, honour_leases=honour_leases)  # type: ignore[arg-type]
            for path in (f"{a}/n.md", f"{a}/scripts/s.py", f"{a}/memory.md"):
                first = tree.write(path, b"one")
                seen.clear()
                node = tree.write(path, b"two!", if_match=first.etag)
                assert len(seen) == statements, (path, seen)
                assert ("path_leases" in seen[0]) is honour_leases
                assert (node.version, node.size) == (first.version + 1, 4) and tree.stat(path) == node
                with database.connection() as conn:
                    last = conn.execute("SELECT operation, version FROM file_changes WHERE display_path = %s"
                                        " ORDER BY id DESC LIMIT 1", (path,)).fetchone()
                assert (last["operation"], last["version"]) == ("update", node.version)
    finally:
        database.close()


def test_a_side_files_changes_are_announced_to_its_user_alone(tree: HostTree, db: Database, db_url: str,
                                                              boot: dict[str, Any]) -> None:
    """Side files stay out of provenance and of the files channel, but a follower that keeps its
    user's listings (the FUSE mount) hears of each change to them, and hears of no one else's."""
    org = boot["org_id"]
    admin.create_user(db, email="other@example.com", password="another password 1")
    admin.add_member(db, org_id=org, email="other@example.com")
    other = HostTree(db, Door(db).basic("other@example.com", "another password 1"))
    mine = ChangeFeed(db_url, [org], int(tree.principal.user_id or 0))
    theirs = ChangeFeed(db_url, [org], int(other.principal.user_id or 0))
    files_only = ChangeFeed(db_url, [org])
    feeds = (mine, theirs, files_only)
    for feed in feeds:
        feed.connect()
    try:
        def heard(feed: ChangeFeed) -> list[tuple[str, list[str]]]:
            """Everything the feed has, until nothing more comes for a while (a busy machine may
            deliver a burst in pieces)."""
            changes = []
            while got := feed.wait(0.5):
                changes += [(c.operation, c.paths) for c in got]
            return changes

        tree.write(f"org/{org}/._plan.md", b"finder's")
        assert heard(mine) == [(SIDE_FILE, [f"org/{org}/._plan.md"])]
        assert heard(theirs) == [] and heard(files_only) == []

        tree.write(f"org/{org}/plan.md", b"one\n")
        tree.move(f"org/{org}/plan.md", f"org/{org}/plan.md~")      # a rename-away save: the note hides
        tree.write(f"org/{org}/plan.md", b"two\n")                   # its end: the note's own event
        assert heard(mine) == [("create", [f"org/{org}/plan.md"]),
                               (SIDE_FILE, [f"org/{org}/plan.md~"]),
                               (SIDE_FILE, [f"org/{org}/plan.md~", f"org/{org}/plan.md"]),
                               ("update", [f"org/{org}/plan.md"]),
                               (SIDE_FILE, [f"org/{org}/plan.md~"])]
        assert heard(files_only) == [("create", [f"org/{org}/plan.md"]),
                                                   ("update", [f"org/{org}/plan.md"])]
        assert heard(theirs) == [("create", [f"org/{org}/plan.md"]), ("update", [f"org/{org}/plan.md"])]

        other.write(f"org/{org}/.DS_Store", b"theirs")
        tree.delete(f"org/{org}/._plan.md")
        assert heard(mine) == [(SIDE_FILE, [f"org/{org}/._plan.md"])]
        assert heard(theirs) == [(SIDE_FILE, [f"org/{org}/.DS_Store"])]

        # One backup name reused for another note: the first note shows again, and both are named.
        tree.write(f"org/{org}/a.md", b"a\n")
        tree.write(f"org/{org}/b.md", b"b\n")
        tree.move(f"org/{org}/a.md", f"org/{org}/backup~")
        heard(mine)
        tree.move(f"org/{org}/b.md", f"org/{org}/backup~")
        assert heard(mine)[-1] == (SIDE_FILE, [f"org/{org}/backup~", f"org/{org}/b.md", f"org/{org}/a.md"])
        assert [n.name for n in tree.list(f"org/{org}") if n.name.endswith(("~", ".md"))] == [
            "a.md", "backup~", "plan.md", "plan.md~"]
        # A purge of side files past their day changes no listing: it says nothing.
        with db.connection() as conn:
            conn.execute("UPDATE scratch_files SET expires_at = now() - interval '1 second'")
        heard(mine), heard(theirs)
        with db.connection() as conn:
            assert scratch.purge(conn) == 3   # plan.md~ and backup~, and their .DS_Store
        assert heard(mine) == [] and heard(theirs) == []
    finally:
        for feed in feeds:
            feed.close()


def test_a_listing_says_how_long_it_holds_by_itself(tree: HostTree, boot: dict[str, Any]) -> None:
    """What changes a listing with no event (a side file's expiry, the end of a rename-away's
    hiding) bounds how long a follower may keep it."""
    g = f"org/{boot['org_id']}/guilds/{boot['guild_id']}"
    tree.write(f"{g}/a.md", b"a\n")
    assert tree.listing(g)[1] is None
    tree.write(f"{g}/.a.md.swp", b"vim")
    assert 86_000 < tree.listing(g)[1] <= 86_400  # type: ignore[operator]
    tree.move(f"{g}/a.md", f"{g}/a.md~")
    nodes, lasts = tree.listing(g)
    assert [n.name for n in nodes] == [".a.md.swp", "a.md~"]
    assert lasts is not None and 110 < lasts <= scratch.SAVE_WINDOW_SECONDS
    # Moved away to a backup name in another folder: hidden from its own folder's listing (as
    # from stat and read), which holds as long as the hiding.
    tree.write(f"{g}/a.md", b"a again\n")   # (a.md~ hides nothing now)
    assert tree.listing(g)[1] > 86_000  # type: ignore[operator]
    tree.write(f"{g}/b.md", b"b\n")
    tree.move(f"{g}/b.md", f"org/{boot['org_id']}/b.md~")
    nodes, lasts = tree.listing(g)
    assert "b.md" not in [n.name for n in nodes]
    with pytest.raises(errors.NotFound):
        tree.stat(f"{g}/b.md")
    assert lasts is not None and 110 < lasts <= scratch.SAVE_WINDOW_SECONDS
    assert [n.name for n in tree.list(f"org/{boot['org_id']}") if n.name.endswith("~")] == ["b.md~"]


def test_a_side_file_name_is_at_most_255_bytes(tree: HostTree, boot: dict[str, Any]) -> None:
    """As on the clients' own file systems; a longer one is refused with a sentence, writing
    nothing (its announcement would not fit PostgreSQL's NOTIFY payload either)."""
    g = f"org/{boot['org_id']}/guilds/{boot['guild_id']}"
    longest = "._" + "é" * 126 + "x"             # 255 bytes in UTF-8
    tree.write(f"{g}/{longest}", b"ok")
    with pytest.raises(errors.NotANote, match="at most 255 bytes"):
        tree.write(f"{g}/{longest}x", b"too long")
    assert [n.name for n in tree.list(g)] == [longest]


def test_a_file_stays_in_its_organisation_even_over_an_existing_name(db: Database, boot: dict[str, Any]) -> None:
    """A move across organisations is refused whether or not the destination exists: over an
    existing name it was the source's delete and the destination's next version, which carried
    the text into the other organisation all the same. A copy there is the user's to make."""
    other = admin.create_org(db, name="Other")["id"]
    admin.add_member(db, org_id=other, email=boot["email"])
    tree = HostTree(db, Door(db).basic(boot["email"], boot["password"]))
    here, there = f"org/{boot['org_id']}/plan.md", f"org/{other}/plan.md"
    tree.write(here, b"ours")
    for existing in (False, True):
        if existing:
            tree.write(there, b"theirs")
        for overwrite in (False, True):
            with pytest.raises(errors.Invalid, match="stays in its organisation; copy it there"):
                tree.move(here, there, overwrite=overwrite)
    assert tree.read(here) == b"ours" and tree.read(there) == b"theirs"
    tree.copy(here, there)
    assert tree.read(there) == b"ours" and tree.read(here) == b"ours"


def test_a_name_moved_aside_by_a_save_is_not_free_for_another_file(tree: HostTree, boot: dict[str, Any],
                                                                   db: Database) -> None:
    """vim's rename-away hides plan.md from this user until the editor brings its new file back.
    Renaming another note onto it with Overwrite off was taken for that return, and replaced the
    text everyone else still reads at plan.md. The editor's own return still works."""
    g = f"org/{boot['org_id']}/guilds/{boot['guild_id']}"
    tree.write(f"{g}/plan.md", b"IMPORTANT PLAN")
    tree.write(f"{g}/other.md", b"other text")
    tree.move(f"{g}/plan.md", f"{g}/plan.md~")
    with pytest.raises(errors.AlreadyExists, match="still there for everyone else"):
        tree.move(f"{g}/other.md", f"{g}/plan.md", overwrite=False)
    assert admin_read(db, f"{g}/plan.md") == "IMPORTANT PLAN"
    assert tree.read(f"{g}/other.md") == b"other text"
    # Asked for, the replace is made (the destination's next version).
    tree.move(f"{g}/other.md", f"{g}/plan.md", overwrite=True)
    assert admin_read(db, f"{g}/plan.md") == "other text"
    # An editor's temp file brought back onto a moved-aside name is still its save.
    tree.move(f"{g}/plan.md", f"{g}/plan.md~")
    tree.write(f"{g}/.plan.md.swp", b"saved by vim")
    tree.move(f"{g}/.plan.md.swp", f"{g}/plan.md", overwrite=False)
    assert admin_read(db, f"{g}/plan.md") == "saved by vim"


def admin_read(db: Database, path: str) -> str:
    """The live note at ``path`` as every other reader sees it (no user's scratch view)."""
    with db.connection() as conn:
        return conn.execute("SELECT content FROM artifacts WHERE display_path = %s AND deleted_at IS NULL",
                            (path,)).fetchone()["content"]

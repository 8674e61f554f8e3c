"""The Host tree's content cache (`serve --read-cache`, and every FUSE mount): repeated reads cost no
query; in its own process a reader never sees an older version than it could without the cache,
and another process's write arrives through its change event."""
from __future__ import annotations

import subprocess
import sys
import time
from typing import Any

import pytest

from store import tools
from store.access import Door
from store.filecache import FileCache
from tests.conftest import REPO, running_gateway


@pytest.fixture
def server(db):
    """The gateway as `serve --read-cache` runs it."""
    with running_gateway(db, read_cache=True) as running:
        yield running


def note_url(server, boot: dict[str, Any], key: str) -> str:
    return f"{server.url}/dav/org/{boot['org_id']}/guilds/{boot['guild_id']}/{key}"


def test_a_write_through_any_front_end_is_read_back_at_once(server, boot, operator, db) -> None:
    assert server.gateway.cache.wait_live()
    url = note_url(server, boot, "plan.md")
    assert operator.put(url, data=b"v1").status_code == 201
    assert operator.get(url).text == "v1"
    assert operator.get(url).text == "v1"  # now cached
    # An agent's tool call in this process: the next GET sees it, with no wait.
    service = Door(db).bearer(boot["service_token"])
    tools.call(db, service, boot["agent_id"], "note_write", {"level": "guild", "key": "plan.md", "content": "v2"})
    r = operator.get(url)
    assert r.text == "v2" and r.headers["ETag"].endswith('-v2"')
    # The operator's own save over WebDAV.
    assert operator.put(url, data=b"v3").status_code == 204
    assert operator.get(url).text == "v3"


def test_a_write_by_another_process_reaches_the_cache_through_its_event(server, boot, operator, db) -> None:
    assert server.gateway.cache.wait_live()
    url = note_url(server, boot, "shared.md")
    operator.put(url, data=b"before")
    assert operator.get(url).text == "before"
    assert operator.get(url).text == "before"
    script = (
        "import sys; from store.db import Database; from store import notes; from store.access import Actor\n"
        "db = Database(sys.argv[1]).open()\n"
        "with db.transaction() as conn:\n"
        f"    notes.write_note(conn, {boot['org_id']}, 'guild', {boot['guild_id']}, 'shared.md', 'after',"
        " Actor('system', None, 'other process'))\n")
    subprocess.run([sys.executable, "-c", script, db.conninfo], cwd=REPO, check=True, timeout=60)
    deadline = time.monotonic() + 1.0
    while operator.get(url).text != "after":
        assert time.monotonic() < deadline, "the other process's write was not seen within a second"
        time.sleep(0.01)


def test_a_read_that_raced_an_invalidation_is_not_kept(db) -> None:
    cache = FileCache(db.conninfo).start()
    try:
        assert cache.wait_live()
        generation = cache.generation
        cache.invalidate("org/1/a.md")  # a write committed while the read was under way
        cache.put("org/1/a.md", "node", b"old", generation)
        assert cache.get("org/1/a.md") is None
        cache.put("org/1/a.md", "node", b"new", cache.generation)
        assert cache.get("org/1/a.md") == ("node", b"new")
    finally:
        cache.stop()
    assert cache.get("org/1/a.md") is None, "a stopped cache answers nothing"


def test_the_cache_is_off_until_it_follows_the_events(db) -> None:
    cache = FileCache("postgresql://nobody@127.0.0.1:1/none")  # never reachable: never live
    cache.start()
    try:
        assert not cache.wait_live(timeout=0.3)
        cache.put("org/1/a.md", "node", b"x", cache.generation)
        assert cache.get("org/1/a.md") is None
    finally:
        cache.stop()


def test_listing_a_folder_brings_its_notes_into_the_cache(db, boot) -> None:
    from store.host import HostTree
    cache = FileCache(db.conninfo).start()
    try:
        assert cache.wait_live()
        principal = Door(db).basic(boot["email"], boot["password"])
        tree = HostTree(db, principal, cache=cache)
        folder = f"org/{boot['org_id']}/guilds/{boot['guild_id']}"
        for i in range(3):
            tree.write(f"{folder}/n{i}.md", f"note {i}".encode())
        tree.list(folder)
        assert cache.get(f"{folder}/n1.md")[1] == b"note 1"
        # A later write drops the prefetched bytes; the next read is the new version.
        tree.write(f"{folder}/n1.md", b"changed")
        assert cache.get(f"{folder}/n1.md") is None
        assert HostTree(db, principal, cache=cache).read(f"{folder}/n1.md") == b"changed"
    finally:
        cache.stop()


def test_the_notify_copy_of_this_process_own_write_does_not_evict_what_was_read_since(db, boot) -> None:
    """A write in this process is applied at once in-process; its NOTIFY copy, arriving later, must
    not evict what a listing fetched in between (the next read would be a query for nothing)."""
    import json

    import psycopg

    from store.events import CHANNEL
    from store.host import HostTree
    cache = FileCache(db.conninfo).start()
    try:
        assert cache.wait_live()
        principal = Door(db).basic(boot["email"], boot["password"])
        tree = HostTree(db, principal, cache=cache)
        folder = f"org/{boot['org_id']}/guilds/{boot['guild_id']}"
        tree.write(f"{folder}/kept.md", b"kept")
        tree.list(folder)
        assert cache.get(f"{folder}/kept.md")[1] == b"kept"
        # A sentinel notified after the write's commit: once the follower has dropped it, it has
        # also handled the write's own NOTIFY copy, which PostgreSQL delivered before it.
        sentinel = f"{folder}/sentinel.md"
        cache.put(sentinel, None, b"x", cache.generation)
        with psycopg.connect(db.conninfo, autocommit=True) as conn:
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, json.dumps({"display_path": sentinel})))
        deadline = time.monotonic() + 10
        while cache.get(sentinel) is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert cache.get(sentinel) is None, "the follower never handled the sentinel"
        assert cache.get(f"{folder}/kept.md")[1] == b"kept"
    finally:
        cache.stop()


def test_a_deleted_guild_takes_its_notes_out_of_the_cache(server, boot, operator, db) -> None:
    """The platform deletes a guild in the database (its notes go by cascade, without events of
    their own): the folder's delete event (sql/070) drops every note kept below it, so a note of
    the gone guild is 404 within a second, not served from memory until it ages out."""
    from store import admin
    assert server.gateway.cache.wait_live()
    guild = admin.create_guild(db, org_id=boot["org_id"], name="short-lived")["id"]
    url = f"{server.url}/dav/org/{boot['org_id']}/guilds/{guild}/kept.md"
    assert operator.put(url, data=b"kept").status_code == 201
    assert operator.get(url).text == "kept"
    assert server.gateway.cache.get(f"org/{boot['org_id']}/guilds/{guild}/kept.md") is not None
    with db.transaction() as conn:
        conn.execute("DELETE FROM guilds WHERE id = %s", (guild,))
    deadline = time.monotonic() + 1.0
    while server.gateway.cache.get(f"org/{boot['org_id']}/guilds/{guild}/kept.md") is not None:
        assert time.monotonic() < deadline, "the deleted guild's note stayed in the cache"
        time.sleep(0.02)
    assert operator.get(url).status_code == 404


def test_a_cache_fed_by_its_owners_feed_is_on_only_while_that_feed_is_up(db, boot) -> None:
    """The FUSE mount hands its cache the events of its own change feed (start(listen=False)):
    the cache answers nothing until the feed is up and nothing once it is lost, applies a deleted
    guild's event to everything under the guild's folder, and skips the NOTIFY copy of a write
    this process made (already applied when it committed)."""
    from store.host import HostTree
    cache = FileCache(db.conninfo).start(listen=False)
    try:
        folder = f"org/{boot['org_id']}/guilds/{boot['guild_id']}"
        cache.put(f"{folder}/a.md", "node", b"a", cache.generation)
        assert cache.get(f"{folder}/a.md") is None, "no feed yet: off"

        cache.following(True)
        cache.put(f"{folder}/a.md", "node", b"a", cache.generation)
        cache.put(f"{folder}/sub/b.md", "node", b"b", cache.generation)
        assert cache.get(f"{folder}/a.md") == ("node", b"a")
        cache.apply({"org_id": boot["org_id"], "display_path": folder, "operation": "delete"})
        assert cache.get(f"{folder}/a.md") is None and cache.get(f"{folder}/sub/b.md") is None

        principal = Door(db).basic(boot["email"], boot["password"])
        tree = HostTree(db, principal, cache=cache)
        tree.write(f"{folder}/own.md", b"own")
        changes = _changes_of(db, f"{folder}/own.md")
        tree.list(folder)                      # brings own.md into the cache
        assert cache.get(f"{folder}/own.md")[1] == b"own"
        cache.apply(changes[-1])               # its NOTIFY copy, arriving after the listing
        assert cache.get(f"{folder}/own.md")[1] == b"own"

        cache.following(False)
        assert cache.get(f"{folder}/own.md") is None, "feed lost: off, and empty when it is back"
        cache.following(True)
        assert cache.get(f"{folder}/own.md") is None
    finally:
        cache.stop()


def _changes_of(db, path: str) -> list[dict]:
    """The change events of ``path`` as its NOTIFY carried them (change_id, operation, version)."""
    with db.connection() as conn:
        rows = conn.execute("SELECT id, org_id, display_path, operation, version FROM file_changes"
                            " WHERE display_path = %s ORDER BY id", (path,)).fetchall()
    return [{"change_id": r["id"], "org_id": r["org_id"], "display_path": r["display_path"],
             "operation": r["operation"], "version": r["version"]} for r in rows]

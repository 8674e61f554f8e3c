"""Provenance routes: history newest first, run expansion, latest per path with the live-row fallback."""
from __future__ import annotations

import json

import psycopg

from store import admin, notes
from store.access import SYSTEM
from store.provenance import CHANNEL


def test_history_and_latest_over_http(server, db, db_url, boot, operator, service) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    run = admin.create_run(db, agent_id=agent, kind="schedule", routine="nightly digest")
    tools = f"{server.url}/api/agents/{agent}/tools"
    assert service.post(f"{tools}/note_write", json={"level": "guild", "key": "digest.md", "content": "1"}).ok
    r = service.post(f"{tools}/note_write", json={"level": "guild", "key": "digest.md", "content": "2"},
                     headers={"X-Run-Id": str(run["id"]), "X-Tool-Call-Id": "toolu_9"})
    path = r.json()["display_path"]
    r = operator.get(f"{server.url}/api/file-changes", params={"display_path": path})
    assert r.status_code == 200
    newest, oldest = r.json()["changes"]
    assert {k: newest[k] for k in ("display_path", "operation", "version", "actor_type", "actor_id", "actor_name",
                                   "run_id", "tool_call_id", "tool_name")} == {
        "display_path": path, "operation": "update", "version": 2, "actor_type": "run", "actor_id": agent,
        "actor_name": "Scout", "run_id": run["id"], "tool_call_id": "toolu_9", "tool_name": "note_write"}
    assert newest["run"] == {"agent_id": agent, "guild_id": boot["guild_id"], "kind": "schedule",
                             "status": "running", "routine": "nightly digest"}
    assert oldest["operation"] == "create" and "run" not in oldest and oldest["actor_type"] == "agent"
    assert newest["created_at"] >= oldest["created_at"]

    # a live row with no recorded change falls back to its last-saved facts
    with db.transaction() as conn:
        conn.execute("""INSERT INTO artifacts (org_id, kind, level, key, display_path, content, version, updated_by)
                        VALUES (%s, 'note', 'org', 'seeded.md', %s, 'x', 4, 'importer')""", (org, f"org/{org}/seeded.md"))
    other = admin.bootstrap(db, org_name="Other")
    asked = [path, f"org/{org}/seeded.md", f"org/{org}/never.md", f"org/{other['org_id']}/x.md"]
    got = operator.get(f"{server.url}/api/file-changes/latest", params={"display_paths": ",".join(asked)}).json()
    posted = operator.post(f"{server.url}/api/file-changes/latest", json={"display_paths": asked}).json()
    assert got == posted
    latest = got["latest"]
    assert latest[path]["recorded"] is True and latest[path]["version"] == 2 and latest[path]["run"]["kind"] == "schedule"
    seeded = latest[f"org/{org}/seeded.md"]
    assert (seeded["recorded"], seeded["actor_name"], seeded["version"]) == (False, "importer", 4)
    assert seeded["created_at"]
    # The same fields either way (no change id for a change never recorded), so a client reads one shape.
    assert set(seeded) == set(latest[path]) - {"run"} and seeded["id"] is None
    assert latest[f"org/{org}/never.md"] is None and latest[f"org/{other['org_id']}/x.md"] is None
    # A live collection with no recorded change (seeded, migrated) falls back too: when it was saved.
    with db.transaction() as conn:
        conn.execute("INSERT INTO artifact_collections (org_id, name, purpose) VALUES (%s, 'imported', 'seeded')",
                     (org,))
    table = operator.get(f"{server.url}/api/file-changes/latest",
                         params={"display_paths": f"org/{org}/collections/imported"}).json()["latest"]
    table = table[f"org/{org}/collections/imported"]
    assert (table["recorded"], table["actor_name"], table["version"]) == (False, None, None) and table["created_at"]

    # another organisation's path is unknown; the service token does not reach these routes; bad queries are 422
    r = operator.get(f"{server.url}/api/file-changes", params={"display_path": f"org/{other['org_id']}/x.md"})
    assert r.status_code == 404
    assert service.get(f"{server.url}/api/file-changes", params={"display_path": path}).status_code == 404
    r = operator.get(f"{server.url}/api/file-changes", params={"limit": "x"})
    assert r.status_code == 422 and len(r.json()["problems"]) == 2
    assert operator.post(f"{server.url}/api/file-changes/latest", json={"display_paths": "a"}).status_code == 422
    # A field the route does not take is refused, as the document says (additionalProperties: false),
    # with the paths' own problem in the same answer.
    r = operator.post(f"{server.url}/api/file-changes/latest", json={"display_paths": [path], "paths": [path]})
    assert r.status_code == 422 and r.json()["problems"] == ["paths: unknown field; this route takes display_paths"]
    r = operator.post(f"{server.url}/api/file-changes/latest", json={"paths": [path]})
    assert r.status_code == 422 and len(r.json()["problems"]) == 2


def test_every_write_notifies_on_commit_only(db, db_url, boot) -> None:
    org = boot["org_id"]
    with psycopg.connect(db_url, autocommit=True) as listener:
        listener.execute(f'LISTEN "{CHANNEL}"')
        try:
            with db.transaction() as conn:
                notes.write_note(conn, org, "org", None, "rolled.md", "x", SYSTEM)
                raise RuntimeError("roll back")
        except RuntimeError:
            pass
        with db.transaction() as conn:
            notes.write_note(conn, org, "org", None, "kept.md", "x", SYSTEM)
        events = [json.loads(n.payload) for n in listener.notifies(timeout=1.0, stop_after=1)]
    assert [(e["display_path"], e["operation"], e["version"]) for e in events] == [(f"org/{org}/kept.md", "create", 1)]


def test_history_pages_through_every_change_with_before_and_next(server, db, boot, operator) -> None:
    """History is never silently cut: a page says whether more is left and links to the next one,
    and following the links yields every change once, newest first."""
    org = boot["org_id"]
    with db.transaction() as conn:
        for i in range(7):
            notes.write_note(conn, org, "org", None, "long.md", f"v{i}", SYSTEM)
    path = f"org/{org}/long.md"
    url = f"{server.url}/api/file-changes"
    first = operator.get(url, params={"display_path": path, "limit": "3"}).json()
    assert [c["version"] for c in first["changes"]] == [7, 6, 5]
    assert first["has_more"] is True
    assert first["next"] == (f"/api/file-changes?display_path=org/{org}/long.md&limit=3"
                             f"&before={first['changes'][-1]['id']}")
    seen, page = [], first
    while True:
        seen += [(c["id"], c["version"]) for c in page["changes"]]
        if not page["has_more"]:
            assert page["next"] is None
            break
        page = operator.get(server.url + page["next"]).json()
    assert [v for _, v in seen] == [7, 6, 5, 4, 3, 2, 1]
    assert [i for i, _ in seen] == sorted((i for i, _ in seen), reverse=True)
    # the whole history in one page says there is no more
    whole = operator.get(url, params={"display_path": path}).json()
    assert len(whole["changes"]) == 7 and whole["has_more"] is False and whole["next"] is None
    # a page that ends exactly at the oldest change has nothing more
    last = operator.get(url, params={"display_path": path, "limit": "2", "before": str(seen[4][0])}).json()
    assert [c["version"] for c in last["changes"]] == [2, 1] and last["has_more"] is False
    # a bad cursor is a 422 naming it, beside the other problems
    r = operator.get(url, params={"display_path": path, "before": "x", "limit": "0"})
    assert r.status_code == 422
    assert r.json()["problems"] == [
        "limit: a whole number from 1 to 1000 in ASCII digits; got '0'",
        "before: a change id (the id of the last change of the previous page) in ASCII digits; got 'x'"]


def test_a_change_is_timed_when_it_is_written_not_when_its_transaction_began(db, boot) -> None:
    """A write that waited (here: half a second into its transaction, as behind another writer's
    lock) records the time it changed the note, the time the note itself says."""
    with db.transaction() as conn:
        conn.execute("SELECT pg_sleep(0.5)")
        notes.write_note(conn, boot["org_id"], "guild", boot["guild_id"], "waited.md", "x", SYSTEM)
    with db.connection() as conn:
        row = conn.execute("""SELECT a.updated_at - c.created_at AS skew FROM artifacts a
                                JOIN file_changes c ON c.display_path = a.display_path
                               WHERE a.key = 'waited.md' AND a.deleted_at IS NULL""").fetchone()
    assert abs(row["skew"].total_seconds()) < 0.1, row


def test_deleting_a_guild_ends_the_history_of_every_file_it_took(db, boot) -> None:
    """The platform deletes a guild (its agents go with it): each note, memory, script and task
    that went by the cascade gets its 'delete' row, so no history still ends in a 'create'."""
    from store import memory, scripts, tasks

    org = boot["org_id"]
    guild = admin.create_guild(db, org_id=org, name="Short-lived")
    agent = admin.create_agent(db, org_id=org, guild_id=guild["id"], name="Temp")
    with db.transaction() as conn:
        paths = [notes.write_note(conn, org, "guild", guild["id"], "plan.md", "p", SYSTEM)["display_path"],
                 notes.write_note(conn, org, "agent", agent["id"], "mine.md", "m", SYSTEM)["display_path"],
                 memory.write_memory(conn, org, agent["id"], "remember", SYSTEM, source="test")["display_path"],
                 scripts.write_script(conn, org, agent["id"], "go.py", "print(1)", SYSTEM)["display_path"],
                 tasks.write_task(conn, org, agent["id"], "do it", SYSTEM)["display_path"]]
    with db.transaction() as conn:  # an organisation note stays, and its history with it
        org_note = notes.write_note(conn, org, "org", None, "stays.md", "s", SYSTEM)["display_path"]
        conn.execute("DELETE FROM guilds WHERE id = %s", (guild["id"],))
    with db.connection() as conn:
        last = {r["display_path"]: r for r in conn.execute(
            """SELECT DISTINCT ON (display_path) display_path, operation, version, actor_name FROM file_changes
                WHERE display_path = ANY(%s) ORDER BY display_path, id DESC""", (paths + [org_note],)).fetchall()}
    assert {p: (r["operation"], r["version"]) for p, r in last.items()} == {
        **{p: ("delete", 1) for p in paths}, org_note: ("create", 1)}  # at its last version, as a delete
    assert {last[p]["actor_name"] for p in paths} == {f"guild {guild['id']} deleted", f"agent {agent['id']} deleted"}
    # An organisation's deletion takes its guilds, agents and history together, without a row.
    other = admin.bootstrap(db, org_name="Gone")
    with db.transaction() as conn:
        notes.write_note(conn, other["org_id"], "guild", other["guild_id"], "x.md", "x", SYSTEM)
        conn.execute("DELETE FROM organisations WHERE id = %s", (other["org_id"],))
    with db.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM file_changes WHERE org_id = %s",
                            (other["org_id"],)).fetchone()["n"] == 0


def test_latest_reads_a_path_with_a_comma_in_its_name_as_one_path(server, db, boot, operator) -> None:
    org = boot["org_id"]
    with db.transaction() as conn:
        for key in ("a,b.md", "c.md"):
            notes.write_note(conn, org, "org", None, key, "x", SYSTEM)
    asked = f",org/{org}/a,b.md,,org/{org}/c.md, org/{org}/none.md,"  # stray commas are separators
    got = operator.get(f"{server.url}/api/file-changes/latest", params={"display_paths": asked}).json()["latest"]
    assert sorted(got) == [f"org/{org}/a,b.md", f"org/{org}/c.md", f"org/{org}/none.md"]
    assert got[f"org/{org}/a,b.md"]["operation"] == "create" and got[f"org/{org}/none.md"] is None


def test_moved_to_follows_this_notes_moves_and_not_a_reused_names(db, boot) -> None:
    """Where a note renamed away now lives (the web editor's conflict sends a stale save there):
    through a chain of moves and a move over an existing note, and never to another note that
    took a name this one left, nor to a note deleted since it arrived."""
    from store import files
    from store.access import Door
    from store.host import HostTree
    tree = HostTree(db, Door(db).basic(boot["email"], boot["password"]))
    org = boot["org_id"]
    p = {k: f"org/{org}/{k}.md" for k in ("a", "b", "c", "d", "e", "x", "y")}

    def moved_to(path: str) -> str | None:
        with db.connection() as conn:
            return files.moved_to(conn, frozenset({org}), path)

    # A chain of two renames, then a move over an existing note.
    tree.write(p["a"], b"a")
    tree.move(p["a"], p["b"])
    tree.move(p["b"], p["c"])
    assert moved_to(p["a"]) == p["c"] and moved_to(p["b"]) == p["c"] and moved_to(p["c"]) is None
    tree.write(p["d"], b"d")
    tree.move(p["c"], p["d"])          # over d: c's row is deleted, d's gets its next version
    assert moved_to(p["a"]) == p["d"]
    # A name reused: x left for e; a new note took x's name and left for... nowhere (deleted).
    tree.write(p["x"], b"x1")
    tree.move(p["x"], p["e"])
    tree.write(p["x"], b"x2")
    tree.delete(p["x"])
    assert moved_to(p["x"]) is None    # the second x was deleted, not moved to e
    # A note moved away whose new home was deleted, and a new note at that name since.
    tree.write(p["y"], b"y1")
    tree.move(p["y"], p["e"])          # over e (the first x)
    tree.delete(p["e"])
    tree.write(p["e"], b"unrelated")
    assert moved_to(p["y"]) is None and moved_to(p["a"]) == p["d"]
    with db.connection() as conn:  # another organisation's path is unknown
        assert files.moved_to(conn, frozenset({org + 1}), p["a"]) is None

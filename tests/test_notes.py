"""Note tools: every rule through the HTTP tool route and through the Python API (tools.call)."""
from __future__ import annotations

import threading
from typing import Any

import pytest

from api.errors import status_of
from store import admin, notes, storage, tools
from store.access import SYSTEM, Principal
from store.errors import StoreError
from tests.conftest import insert_notes, owner_count_held, wait_for_lock_waiters


@pytest.fixture(params=["python", "http"])
def call(request, db, boot):
    """call(tool, args, agent_id=None, run_id=None, tool_call_id=None) -> (status, body), the same
    through tools.call and through POST /api/agents/<id>/tools/<tool>."""
    principal = Principal("service", None, "service", frozenset({boot["org_id"]}))
    if request.param == "http":
        server = request.getfixturevalue("server")
        http = server.session(bearer=boot["service_token"])

    def run(tool: str, args: Any, agent_id: int | None = None, run_id: int | None = None,
            tool_call_id: str | None = None) -> tuple[int, dict]:
        aid = agent_id or boot["agent_id"]
        if request.param == "python":
            try:
                return 200, tools.call(db, principal, aid, tool, args, run_id=run_id, tool_call_id=tool_call_id)
            except StoreError as exc:
                return status_of(exc), {"error": exc.message, "problems": exc.problems}
        headers = {}
        if run_id:
            headers["X-Run-Id"] = str(run_id)
        if tool_call_id:
            headers["X-Tool-Call-Id"] = tool_call_id
        r = http.post(f"{server.url}/api/agents/{aid}/tools/{tool}", json=args, headers=headers)
        return r.status_code, r.json()
    run.surface = request.param  # type: ignore[attr-defined]
    return run


def changes(db, path: str) -> list[dict]:
    with db.connection() as conn:
        return conn.execute("SELECT operation, version, actor_type, actor_name, run_id, tool_call_id, tool_name"
                            " FROM file_changes WHERE display_path = %s ORDER BY id", (path,)).fetchall()


def test_write_get_update_delete_round_trip(call, db, boot) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    path = f"org/{org}/agents/{agent}/plan.md"
    status, body = call("note_write", {"level": "agent", "key": "plan.md", "content": "# Plan\nfirst"})
    assert status == 200, body
    assert body["display_path"] == path and body["version"] == 1 and body["level"] == "agent"
    assert body["key"] == "plan.md" and body["updated_by"] == "Scout" and "content" not in body
    status, body = call("note_write", {"level": "agent", "key": "plan.md", "content": "# Plan\nsecond"})
    assert (status, body["version"]) == (200, 2)
    status, got = call("note_get", {"path": path})
    assert status == 200
    assert got["content"] == "# Plan\nsecond" and got["version"] == 2
    assert set(got) == {"display_path", "level", "key", "content", "version", "created_at", "updated_at",
                        "updated_by"}
    status, body = call("note_delete", {"path": path})
    assert (status, body) == (200, {"deleted": path})
    status, body = call("note_get", {"path": path})
    assert status == 404 and body["error"].startswith(f"unknown note {path}")
    status, body = call("note_delete", {"path": path})
    assert status == 404
    assert [(c["operation"], c["version"]) for c in changes(db, path)] == [("create", 1), ("update", 2), ("delete", 2)]
    assert {c["actor_type"] for c in changes(db, path)} == {"agent"}


def test_levels_write_to_their_owner(call, boot) -> None:
    org, guild = boot["org_id"], boot["guild_id"]
    status, body = call("note_write", {"level": "guild", "key": "team.md", "content": "t"})
    assert body["display_path"] == f"org/{org}/guilds/{guild}/team.md"
    # org write is off by default
    status, body = call("note_write", {"level": "org", "key": "all.md", "content": "o"})
    assert status == 403
    assert "write_org" in body["error"] and "note_write org all.md refused" in body["error"]


BAD_KEYS = [
    ("notes/plan.md", "contains a '/'"),
    ("plan.txt", "does not end in .md"),
    ("task.md", "reserved at the agent root"),
    ("memory.md", "replace it with memory_write {content} and read it with memory_get"),
    (".hidden.md", "starts with a dot"),
    (".md", "has no name before .md"),
]


def test_a_new_note_is_created_and_updated_at_one_moment(call) -> None:
    """created_at and updated_at of a note never changed since it was made are one moment, so
    a client can tell a note edited since its creation by comparing them."""
    # (Two readings of the clock a microsecond apart are often the same microsecond: many creates.)
    for i in range(100):
        status, body = call("note_write", {"level": "agent", "key": f"fresh{i}.md", "content": "x"})
        assert status == 200 and body["created_at"] == body["updated_at"], body
    status, body = call("note_write", {"level": "agent", "key": "fresh0.md", "content": "y"})
    assert status == 200 and body["created_at"] < body["updated_at"], body


def test_bad_keys_are_refused_and_nothing_is_written(call, db, boot) -> None:
    for key, fragment in BAD_KEYS:
        status, body = call("note_write", {"level": "agent", "key": key, "content": "x"})
        assert status == 422, key
        assert fragment in body["error"], key
    with db.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM artifacts").fetchone()["n"] == 0
        assert conn.execute("SELECT count(*) AS n FROM file_changes").fetchone()["n"] == 0


def test_reserved_keys_are_only_reserved_at_the_agent_root(call) -> None:
    status, body = call("note_write", {"level": "guild", "key": "task.md", "content": "x"})
    assert status == 200 and body["key"] == "task.md"


def test_every_problem_at_once(call) -> None:
    status, body = call("note_write", {"level": "team", "key": "a/b.md", "content": "x"})
    assert status == 422
    assert len(body["problems"]) == 2
    assert 'level "team" is not one of agent, guild, org' in body["problems"][0]
    assert "contains a '/'" in body["problems"][1]
    status, body = call("note_write", {"level": 3, "content": ["x"], "colour": "red"})
    assert status == 422
    assert body["problems"] == ["colour: unknown argument; note_write takes level, key, content",
                                "level: expected string; got number", "key: required (string)",
                                "content: expected string; got array"]
    # A wrong type does not hide the other arguments' bad values: all in one refusal.
    status, body = call("note_write", {"level": "team", "key": "a/b.md", "content": 5})
    assert status == 422
    assert [p.split(":")[0] for p in body["problems"]] == ["level", "key", "content"], body["problems"]


def test_size_cap_counts_utf8_bytes_at_exactly_the_limit(call, boot) -> None:
    exact = "é" * (storage.MAX_CONTENT_BYTES // 2)  # 131 072 characters, 262 144 bytes
    status, body = call("note_write", {"level": "agent", "key": "big.md", "content": exact})
    assert status == 200, body
    status, body = call("note_write", {"level": "agent", "key": "big.md", "content": exact + "x"})
    assert status == 413
    assert body["error"] == ("content is 262,145 bytes; a write holds at most 262,144 bytes (256 KB) of UTF-8: "
                             "split it into several smaller files")
    status, got = call("note_get", {"path": f"org/{boot['org_id']}/agents/{boot['agent_id']}/big.md"})
    assert got["version"] == 1 and got["content"] == exact


def test_text_that_postgres_cannot_hold_is_a_422_not_a_500(call) -> None:
    status, body = call("note_write", {"level": "agent", "key": "nul.md", "content": "a\x00b"})
    assert status == 422 and "NUL" in body["error"]


GRANT_CASES = [
    # (tool, level, flag)
    ("read", "guild", "read_guild"), ("write", "guild", "write_guild"),
    ("read", "org", "read_org"), ("write", "org", "write_org"),
]


def test_grants_in_every_combination(call, db, boot) -> None:
    for need, level, flag in GRANT_CASES:
        for granted in (True, False):
            check_grant(call, db, boot, need, level, flag, granted)


def check_grant(call, db, boot, need, level, flag, granted) -> None:
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    path = f"org/{org}/guilds/{guild}/shared.md" if level == "guild" else f"org/{org}/shared.md"
    with db.transaction() as conn:
        conn.execute("DELETE FROM artifacts")
        notes.write_note(conn, org, level, guild if level == "guild" else None, "shared.md", "alpha words", SYSTEM)
    # every other flag is the opposite, so only this one can explain the answer
    admin.set_agent(db, agent, **{f: (not granted) for f in admin.GRANT_FLAGS if f != flag}, **{flag: granted})
    if need == "read":
        status, body = call("note_get", {"path": path})
        fstatus, found = call("note_find", {"query": "alpha"})
        lstatus, lbody = call("note_find", {"query": "alpha", "level": level})
        if granted:
            assert status == 200 and body["content"] == "alpha words"
            assert [n["display_path"] for n in found["notes"]] == [path]
            assert lstatus == 200
        else:
            assert status == 403 and flag in body["error"]
            assert body["error"].startswith(f"note_get {path} refused: this agent may not read")
            assert fstatus == 200 and found["notes"] == []
            assert lstatus == 403 and flag in lbody["error"]
    else:
        status, body = call("note_write", {"level": level, "key": "shared.md", "content": "beta"})
        dstatus, dbody = call("note_delete", {"path": path})
        if granted:
            assert status == 200 and body["version"] == 2
            assert dstatus == 200
        else:
            assert status == 403 and flag in body["error"] and "which the operator has not given it" in body["error"]
            assert dstatus == 403
            with db.connection() as conn:
                assert notes.get_note(conn, org, level, guild if level == "guild" else None,
                                      "shared.md")["version"] == 1
    # agent level is always allowed, whatever the four flags say
    assert call("note_write", {"level": "agent", "key": "mine.md", "content": "x"})[0] == 200
    assert call("note_get", {"path": f"org/{org}/agents/{agent}/mine.md"})[0] == 200


def test_guild_means_the_agents_own_guild_and_agent_notes_are_private(call, db, boot) -> None:
    org = boot["org_id"]
    other_guild = admin.create_guild(db, org_id=org, name="Sales")
    other_agent = admin.create_agent(db, org_id=org, guild_id=other_guild["id"], name="Closer")
    with db.transaction() as conn:
        notes.write_note(conn, org, "guild", other_guild["id"], "deals.md", "secret", SYSTEM)
        notes.write_note(conn, org, "agent", other_agent["id"], "diary.md", "secret", SYSTEM)
    status, body = call("note_get", {"path": f"org/{org}/guilds/{other_guild['id']}/deals.md"})
    assert status == 403 and f"this agent is in guild {boot['guild_id']}" in body["error"]
    status, body = call("note_get", {"path": f"org/{org}/agents/{other_agent['id']}/diary.md"})
    assert status == 403 and "agent-level notes belong to their agent" in body["error"]
    assert call("note_delete", {"path": f"org/{org}/agents/{other_agent['id']}/diary.md"})[0] == 403
    assert call("note_find", {"query": "secret"})[1]["notes"] == []


def test_another_organisations_paths_are_unknown(call, db, boot) -> None:
    other = admin.bootstrap(db, org_name="Other")
    with db.transaction() as conn:
        notes.write_note(conn, other["org_id"], "org", None, "x.md", "x", SYSTEM)
    status, body = call("note_get", {"path": f"org/{other['org_id']}/x.md"})
    assert status == 404 and body["error"].startswith(f"unknown path org/{other['org_id']}/x.md")


def test_an_agent_or_guild_of_another_organisation_or_none_is_unknown(call, db, boot) -> None:
    """An agent or guild id that is not one of the caller's organisation (another organisation's,
    or no such id) names nothing: 404 with the unknown-path sentence, as WebDAV and the web app
    answer, not 403 "this is agent N's"; nothing of the other organisation is touched. (Another
    agent or guild of the same organisation stays 403: see the test above.)"""
    org = boot["org_id"]
    other = admin.bootstrap(db, org_name="Other")
    with db.transaction() as conn:
        notes.write_note(conn, other["org_id"], "agent", other["agent_id"], "a3.md", "theirs", SYSTEM)
        notes.write_note(conn, other["org_id"], "guild", other["guild_id"], "g.md", "theirs", SYSTEM)
    for path in (f"org/{org}/agents/{other['agent_id']}/a3.md", f"org/{org}/agents/999999/x.md",
                 f"org/{org}/guilds/{other['guild_id']}/g.md", f"org/{org}/guilds/999999/x.md"):
        for tool in ("note_get", "note_delete"):
            status, body = call(tool, {"path": path})
            assert status == 404, (tool, path, status, body)
            assert body["error"].startswith(f"unknown path {path}: no note"), (tool, path, body)
            assert "theirs" not in body["error"] and "refused" not in body["error"]
    with db.connection() as conn:
        assert notes.get_note(conn, other["org_id"], "agent", other["agent_id"], "a3.md")["content"] == "theirs"
        assert notes.get_note(conn, other["org_id"], "guild", other["guild_id"], "g.md")["content"] == "theirs"


def test_crossing_families_names_the_right_tool(call, boot) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    status, body = call("note_get", {"path": f"org/{org}/collections/leads"})
    assert status == 422 and "record_search" in body["error"] and "record_list" in body["error"]
    status, body = call("note_get", {"path": f"org/{org}/collections/leads/7"})
    assert status == 422 and "record_search" in body["error"] and "record_list" in body["error"]
    status, body = call("note_delete", {"path": f"org/{org}/collections/leads/7"})
    assert status == 422 and "record_remove" in body["error"] and "id 7" in body["error"]
    status, body = call("note_delete", {"path": f"org/{org}/collections/leads"})
    assert status == 422 and "collections are managed by the operator" in body["error"]
    status, body = call("note_get", {"path": f"org/{org}/agents/{agent}/memory.md"})
    assert status == 422 and "memory_get" in body["error"]
    status, body = call("note_delete", {"path": f"org/{org}/agents/{agent}/memory.md"})
    assert status == 422 and "memory is never deleted" in body["error"]
    status, body = call("note_delete", {"path": f"org/{org}/agents/{agent}/task.md"})
    assert status == 422 and "belongs to the operator" in body["error"]
    status, body = call("note_get", {"path": f"org/{org}/agents/{agent}/scripts/run.py"})
    assert status == 422 and "script_get" in body["error"]


def test_history_archive_paths_answer_as_unknown(call, db, boot) -> None:
    from store import memory
    org, agent = boot["org_id"], boot["agent_id"]
    with db.transaction() as conn:
        memory.write_memory(conn, org, agent, "one", SYSTEM, source="agent")
        memory.write_memory(conn, org, agent, "two", SYSTEM, source="agent")
        name = memory.list_history(conn, org, agent)[0]["name"]
    for tool in ("note_get", "note_delete"):
        status, body = call(tool, {"path": f"org/{org}/agents/{agent}/history-archive/{name}"})
        assert status == 404, (tool, body)
        assert body["error"].startswith("unknown path")


def test_run_owned_change_records_run_and_tool_call(call, db, boot) -> None:
    run = admin.create_run(db, agent_id=boot["agent_id"], kind="schedule", routine="nightly")
    status, body = call("note_write", {"level": "agent", "key": "r.md", "content": "x"}, run_id=run["id"],
                        tool_call_id="call_1")
    assert status == 200
    assert changes(db, body["display_path"]) == [
        {"operation": "create", "version": 1, "actor_type": "run", "actor_name": "Scout", "run_id": run["id"],
         "tool_call_id": "call_1", "tool_name": "note_write"}]
    other = admin.create_agent(db, org_id=boot["org_id"], guild_id=boot["guild_id"], name="Other")
    other_run = admin.create_run(db, agent_id=other["id"], kind="chat")
    status, body = call("note_write", {"level": "agent", "key": "s.md", "content": "x"}, run_id=other_run["id"])
    assert status == 422 and "is not a run of agent" in body["error"]


def test_owner_cap_at_exactly_the_limit_and_one_past(call, db, boot) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    insert_notes(db, org, "agent", agent, ["x"] * (notes.OWNER_CAP - 1))
    status, body = call("note_write", {"level": "agent", "key": "last.md", "content": "x"})
    assert status == 200, body
    status, body = call("note_write", {"level": "agent", "key": "one-more.md", "content": "x"})
    assert status == 422
    assert body["error"] == (f"cannot create org/{org}/agents/{agent}/one-more.md: org/{org}/agents/{agent}/ already "
                             "holds 10,000 live files, the limit is 10,000 per owner; delete files that are no longer "
                             "needed, or write into an existing one")
    # updating an existing note at the cap is fine, and a delete makes room
    assert call("note_write", {"level": "agent", "key": "last.md", "content": "y"})[0] == 200
    assert call("note_delete", {"path": f"org/{org}/agents/{agent}/n1.md"})[0] == 200
    assert call("note_write", {"level": "agent", "key": "one-more.md", "content": "x"})[0] == 200


def test_two_concurrent_writers_to_one_note_both_recorded(db, boot) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    with db.transaction() as conn:
        row = notes.write_note(conn, org, "agent", agent, "race.md", "v1", SYSTEM)
    principal = Principal("service", None, "service", frozenset({org}))
    results: list[Any] = []
    gate = threading.Barrier(3)

    def writer(text: str) -> None:
        gate.wait()
        results.append(tools.call(db, principal, agent, "note_write",
                                  {"level": "agent", "key": "race.md", "content": text}))

    # Hold the row so that both writers are inside their transactions, waiting, at the same time.
    with db.transaction() as holder:
        holder.execute("SELECT 1 FROM artifacts WHERE id = %s FOR UPDATE", (row["id"],))
        threads = [threading.Thread(target=writer, args=(t,)) for t in ("from A", "from B")]
        for t in threads:
            t.start()
        gate.wait()
        wait_for_lock_waiters(db.conninfo, 2)  # both writers queue on the held row
    for t in threads:
        t.join(10)
    assert sorted(r["version"] for r in results) == [2, 3]
    path = row["display_path"]
    assert [(c["operation"], c["version"]) for c in changes(db, path)] == [("create", 1), ("update", 2), ("update", 3)]
    with db.connection() as conn:
        final = notes.get_note(conn, org, "agent", agent, "race.md")
    last = max(results, key=lambda r: r["version"])
    assert final["version"] == 3 and final["content"] in ("from A", "from B")
    assert final["updated_at"].isoformat() == last["updated_at"]


def test_two_concurrent_creators_of_one_note_get_versions_one_and_two(db, boot) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    with db.transaction() as conn:  # the agent's counter row exists, so creates queue on it
        notes.write_note(conn, org, "agent", agent, "other.md", "x", SYSTEM)
    principal = Principal("service", None, "service", frozenset({org}))
    results: list[Any] = []
    gate = threading.Barrier(3)

    def writer(text: str) -> None:
        gate.wait()
        results.append(tools.call(db, principal, agent, "note_write",
                                  {"level": "agent", "key": "new.md", "content": text}))
    threads = [threading.Thread(target=writer, args=(t,)) for t in ("A", "B")]
    # Hold the counter row so that both creators have found no note and queue to create it: the
    # one that loses the create must become the note's update, not an error or a second note.
    with owner_count_held(db, org, "agent", agent):
        for t in threads:
            t.start()
        gate.wait()
        wait_for_lock_waiters(db.conninfo, 2)
    for t in threads:
        t.join(10)
    assert sorted(r["version"] for r in results) == [1, 2]
    assert [c["operation"] for c in changes(db, f"org/{org}/agents/{agent}/new.md")] == ["create", "update"]


def test_unknown_tool_is_404_listing_the_tools(call) -> None:
    status, body = call("note_rename", {})
    assert status == 404 and "note_find" in body["error"] and "memory_write" in body["error"]

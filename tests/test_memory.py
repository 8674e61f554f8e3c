"""Memory: the tools, revisions, the history archive, and that it is never deleted."""
from __future__ import annotations

from store import memory, paths, tools
from store.access import SYSTEM, Principal


def test_memory_tools_keep_every_previous_version_in_the_archive(db, boot, server, service) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    url = f"{server.url}/api/agents/{agent}/tools"
    r = service.post(f"{url}/memory_get", json={})
    assert r.json() == {"display_path": f"org/{org}/agents/{agent}/memory.md", "content": "", "version": 0,
                        "updated_at": None, "updated_by": None}
    assert service.post(f"{url}/memory_write", json={"content": "first"}).json()["version"] == 1
    principal = Principal("service", None, "service", frozenset({org}))
    assert tools.call(db, principal, agent, "memory_write", {"content": "second"})["version"] == 2
    with db.transaction() as conn:
        memory.write_memory(conn, org, agent, "third", SYSTEM, source="operator")
    got = service.post(f"{url}/memory_get", json={}).json()
    assert got["content"] == "third" and got["version"] == 3
    assert tools.call(db, principal, agent, "memory_get", {})["content"] == "third"
    with db.connection() as conn:
        history = memory.list_history(conn, org, agent)
        assert [(h["version"], h["source"]) for h in history] == [(2, "agent"), (1, "agent")]
        for h in history:
            assert paths.HISTORY_NAME.match(h["name"]) and h["display_path"].endswith("/history-archive/" + h["name"])
        assert memory.read_history(conn, org, agent, history[1]["name"])["content"] == "first"
        ops = conn.execute("SELECT operation, version FROM file_changes ORDER BY id").fetchall()
    assert [(o["operation"], o["version"]) for o in ops] == [("create", 1), ("update", 2), ("update", 3)]
    # the operator's version is archived as operator on the next write
    with db.transaction() as conn:
        memory.write_memory(conn, org, agent, "fourth", SYSTEM, source="agent")
        assert memory.list_history(conn, org, agent)[0]["name"].endswith("-operator.md")
    # memory is never deleted, and is not a note
    r = service.post(f"{url}/note_delete", json={"path": f"org/{org}/agents/{agent}/memory.md"})
    assert r.status_code == 422 and "memory is never deleted" in r.json()["error"]


def test_memory_size_cap_and_argument_shape(server, boot, service) -> None:
    url = f"{server.url}/api/agents/{boot['agent_id']}/tools/memory_write"
    assert service.post(url, json={"content": "m" * 262_144}).status_code == 200
    r = service.post(url, json={"content": "m" * 262_145})
    assert r.status_code == 413 and r.json()["error"].startswith("memory is 262,145 bytes")
    r = service.post(url, json={"text": "x"})
    assert r.status_code == 422
    assert r.json()["problems"] == ["text: unknown argument; memory_write takes content", "content: required (string)"]


def test_unknown_history_names_are_not_found(db, boot) -> None:
    import pytest
    from store.errors import NotFound
    with db.connection() as conn, pytest.raises(NotFound):
        memory.read_history(conn, boot["org_id"], boot["agent_id"], "20990101T000000000000Z-agent.md")


def test_history_names_are_utc_whatever_the_session_time_zone(db, boot) -> None:
    """A history file's stamp ends in Z: it is UTC even on a connection set to another zone, so the
    same version has the same name in every process (the tree and the web app list these names)."""
    org, agent = boot["org_id"], boot["agent_id"]
    with db.transaction() as conn:
        memory.write_memory(conn, org, agent, "first", SYSTEM, source="agent")
        memory.write_memory(conn, org, agent, "second", SYSTEM, source="agent")
    with db.connection() as conn:
        utc = conn.execute("SELECT to_char(saved_at AT TIME ZONE 'UTC', 'YYYYMMDD\"T\"HH24MISSUS\"Z\"') AS s"
                           " FROM memory_revisions WHERE agent_id = %s", (agent,)).fetchone()["s"]
        conn.execute("SET TIME ZONE 'Pacific/Auckland'")
        try:
            [only] = memory.list_history(conn, org, agent)
            assert only["name"] == f"{utc}-agent.md"
            assert memory.read_history(conn, org, agent, only["name"])["content"] == "first"
        finally:
            conn.execute("RESET TIME ZONE")


def test_note_write_of_memory_md_tells_the_agent_the_memory_tools_only(db, boot, server, service) -> None:
    """note_write with key memory.md told the agent "... or as memory.md in the agent's folder", a
    file an agent (a tool caller) cannot reach. It names the memory tools, which then work; the
    people who see the shared sentence (the web app's note forms) keep the folder's route."""
    import pytest
    from store.errors import Invalid

    org, agent = boot["org_id"], boot["agent_id"]
    url = f"{server.url}/api/agents/{agent}/tools"
    sentence = ("the key 'memory.md' is reserved at the agent root (memory.md and task.md) for this agent's "
                "memory, which is not a note: replace it with memory_write {content} and read it with memory_get; "
                "for a note, choose another key")
    r = service.post(f"{url}/note_write", json={"level": "agent", "key": "memory.md", "content": "remember"})
    assert r.status_code == 422 and r.json()["problems"] == [sentence], r.text
    assert r.json()["error"] == f"note_write agent/memory.md refused\n- {sentence}"
    principal = Principal("service", None, "service", frozenset({org}))
    with pytest.raises(Invalid) as refused:
        tools.call(db, principal, agent, "note_write", {"level": "agent", "key": "memory.md", "content": "x"})
    assert refused.value.problems == [sentence]
    r = service.post(f"{url}/note_write", json={"level": "agent", "key": "task.md", "content": "x"})
    assert r.status_code == 422 and "folder" not in r.text and "the operator sets" in r.text, r.text
    with db.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM artifacts").fetchone()["n"] == 0
    # What the sentence says works.
    assert service.post(f"{url}/memory_write", json={"content": "remember"}).json()["version"] == 1
    assert service.post(f"{url}/memory_get", json={}).json()["content"] == "remember"
    # (Elsewhere the key is at a guild, an organisation: a note like any other.)
    assert service.post(f"{url}/note_write", json={"level": "guild", "key": "memory.md", "content": "g"}).status_code == 200
    with pytest.raises(Invalid) as shared:
        paths.check_note_key("memory.md", "agent")
    assert "as memory.md in the agent's folder" in shared.value.message

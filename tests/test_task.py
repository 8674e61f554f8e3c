"""The standing task: the operator's routes, revisions, caps, and no agent tool that writes it."""
from __future__ import annotations

import html

import pytest

from store import admin, tools
from store.errors import TooLarge


def test_put_and_get_task_as_json_and_markdown_with_revisions(server, boot, operator, db) -> None:
    base = f"{server.url}/api/agents/{boot['agent_id']}/task"
    r = operator.get(base)
    assert r.status_code == 200 and r.json()["task"] == "" and r.json()["version"] == 0
    r = operator.put(base, json={"task": "# Goal\nfind leads"})
    assert r.status_code == 200, r.text
    assert r.json()["version"] == 1 and r.json()["updated_by"] == "ada@example.com"
    r = operator.put(base, data="# Goal\nfind *more* leads".encode(), headers={"Content-Type": "text/markdown"})
    assert r.status_code == 200 and r.json()["version"] == 2
    got = operator.get(base).json()
    assert got["task"] == "# Goal\nfind *more* leads"
    assert got["display_path"] == f"org/{boot['org_id']}/agents/{boot['agent_id']}/task.md"
    revs = operator.get(base + "/revisions").json()["revisions"]
    assert [(r["version"], r["task"]) for r in revs] == [(1, "# Goal\nfind leads")]
    # a stale save is refused and changes nothing
    r = operator.put(base, json={"task": "stale"}, headers={"If-Match": '"1"'})
    assert r.status_code == 412 and "is at version 2, not 1" in r.json()["error"]
    assert operator.get(base).json()["version"] == 2
    with db.connection() as conn:
        ops = conn.execute("SELECT operation, version, actor_type FROM file_changes ORDER BY id").fetchall()
    assert ops == [{"operation": "create", "version": 1, "actor_type": "user"},
                   {"operation": "update", "version": 2, "actor_type": "user"}]


def test_at_most_50_revisions_are_kept(server, boot, operator) -> None:
    base = f"{server.url}/api/agents/{boot['agent_id']}/task"
    for i in range(1, 53):
        assert operator.put(base, json={"task": f"v{i}"}).status_code == 200
    revs = operator.get(base + "/revisions").json()["revisions"]
    assert len(revs) == 50
    assert revs[0]["task"] == "v51" and revs[-1]["task"] == "v2"


def test_saving_the_text_the_task_holds_keeps_no_revision_of_it(server, boot, operator) -> None:
    """An editor or a sync client saving task.md unchanged (over WebDAV, the mount, the API) kept
    the unchanged text as a revision each time: 50 such saves pushed every real earlier save out
    of the revisions kept. Such a save is still a version (with its provenance row and event, as
    a note's is), but the revisions keep only texts that differ from the one after them."""
    base = f"{server.url}/api/agents/{boot['agent_id']}/task"
    dav = f"{server.url}/dav/org/{boot['org_id']}/agents/{boot['agent_id']}/task.md"
    assert operator.put(base, json={"task": "first"}).json()["version"] == 1
    assert operator.put(base, json={"task": "second"}).json()["version"] == 2
    for _ in range(30):
        assert operator.put(base, json={"task": "second"}).status_code == 200
        assert operator.put(dav, data=b"second").status_code == 204
    assert operator.get(base).json()["version"] == 62
    revs = operator.get(base + "/revisions").json()["revisions"]
    assert [(r["version"], r["task"]) for r in revs] == [(1, "first")]
    assert operator.put(base, json={"task": "third"}).json()["version"] == 63
    revs = operator.get(base + "/revisions").json()["revisions"]
    assert [(r["version"], r["task"]) for r in revs] == [(62, "second"), (1, "first")]


def test_bad_bodies_caps_and_strangers(server, db, boot, operator, service) -> None:
    base = f"{server.url}/api/agents/{boot['agent_id']}/task"
    r = operator.put(base, json={"text": "x"})
    assert r.status_code == 422 and 'send the task as JSON {"task": "..."}' in r.json()["error"]
    assert [p.split(":")[0] for p in r.json()["problems"]] == ["task", "text"], r.json()
    # A task of the wrong type is told so (not that it is missing), beside a field it does not take.
    r = operator.put(base, json={"task": 5, "x": 1})
    assert r.status_code == 422 and r.json()["problems"] == [
        "task: expected a string of Markdown; got 5", 'x: unknown field; the body is {"task": "..."}']
    r = operator.put(base, json={"task": "x" * 262_145})
    assert r.status_code == 413 and "262,145 bytes" in r.json()["error"]
    assert operator.put(base, json={"task": "x" * 262_144}).status_code == 200
    # Markdown bytes that are not UTF-8: 400, as WebDAV answers the same bytes sent to task.md.
    r = operator.put(base, data=b"ab\xff\xfecd", headers={"Content-Type": "text/markdown"})
    assert r.status_code == 400 and "byte 2 is not valid UTF-8" in r.json()["error"], r.text
    dav = operator.put(f"{server.url}/dav/org/{boot['org_id']}/agents/{boot['agent_id']}/task.md", data=b"ab\xff\xfecd")
    assert dav.status_code == 400 and "byte 2 is not valid UTF-8" in dav.text
    # the service token does not reach the operator's task routes; another organisation's agent is unknown
    assert service.get(base).status_code == 404
    assert service.put(base, json={"task": "x"}).status_code == 404
    other = admin.bootstrap(db, org_name="Other")
    r = operator.get(f"{server.url}/api/agents/{other['agent_id']}/task")
    assert r.status_code == 404 and r.json()["error"] == f"unknown agent {other['agent_id']}"
    assert operator.put(f"{server.url}/api/agents/{other['agent_id']}/task", json={"task": "x"}).status_code == 404
    assert operator.get(f"{server.url}/api/agents/{other['agent_id']}/task/revisions").status_code == 404


def test_no_agent_tool_writes_the_task(server, boot, service) -> None:
    assert not [name for name in tools.registry() if "task" in name]
    r = service.post(f"{server.url}/api/agents/{boot['agent_id']}/tools/note_write",
                     json={"level": "agent", "key": "task.md", "content": "take over"})
    assert r.status_code == 422 and "reserved at the agent root" in r.json()["error"]


def test_an_embed_of_a_memory_is_refused_at_save_saying_what_can_be_embedded(server, db, boot, operator) -> None:
    """Memory is private: a task that embeds any agent's memory (or an earlier version of it) would
    show it in State, so the save is refused with every such embed named, and nothing is written."""
    org, agent = boot["org_id"], boot["agent_id"]
    other = admin.create_agent(db, org_id=org, guild_id=boot["guild_id"], name="Other")
    base = f"{server.url}/api/agents/{agent}/task"
    assert operator.put(base, json={"task": "v1"}).status_code == 200
    theirs, mine = f"org/{org}/agents/{other['id']}/memory.md", f"org/{org}/agents/{agent}/memory.md"
    archive = f"org/{org}/agents/{other['id']}/history-archive/20240501T000000Z-run.md"
    r = operator.put(base, json={"task": f"Read ![[{theirs}]] and ![[{mine}]], ![[{archive}]], "
                                         f"![[org/{org}/plan.md]] and `![[{theirs}]]` in code"})
    assert r.status_code == 422, r.text
    what = (f"a task embeds notes (org/{org}/<note>.md, org/{org}/guilds/<guild_id>/<note>.md, "
            f"org/{org}/agents/<agent_id>/<note>.md) and collections (org/{org}/collections/<name>)")
    assert r.json()["problems"] == [
        f"![[{theirs}]]: an agent's memory is private and cannot be embedded; {what}",
        f"![[{mine}]]: an agent's memory is private and cannot be embedded; {what}",
        f"![[{archive}]]: an earlier version of an agent's memory is private and cannot be embedded; {what}"]
    assert r.json()["error"].startswith("task rejected\n- ")
    # The same save through WebDAV's task.md: the same sentence, each problem on one line, once.
    dav = operator.put(f"{server.url}/dav/org/{org}/agents/{agent}/task.md",
                       data=f"Read ![[{theirs}]] and ![[{mine}]]".encode())
    assert dav.status_code == 400, dav.text
    body = html.unescape(dav.text)
    assert "task rejected" in body and body.count(f"- ![[{theirs}]]: an agent's memory is private") == 1, body
    got = operator.get(base).json()
    assert (got["task"], got["version"]) == ("v1", 1)


def test_a_task_given_when_the_agent_is_created_is_its_first_recorded_save(server, db, boot, operator) -> None:
    """`hostfinder admin agent create --task` writes version 1 of the task: the provenance strip and
    the file-changes route must name who saved it, as for every later save."""
    org = boot["org_id"]
    agent = admin.create_agent(db, org_id=org, guild_id=boot["guild_id"], name="Closer", task="Close deals.")
    path = f"org/{org}/agents/{agent['id']}/task.md"
    assert agent["task"] == "Close deals."
    latest = operator.get(f"{server.url}/api/file-changes/latest", params={"display_paths": path}).json()["latest"][path]
    assert (latest["recorded"], latest["version"], latest["operation"], latest["actor_name"]) == \
        (True, 1, "create", "system"), latest
    r = operator.put(f"{server.url}/api/agents/{agent['id']}/task", json={"task": "Close more deals."})
    assert r.status_code == 200 and r.json()["version"] == 2
    revs = operator.get(f"{server.url}/api/agents/{agent['id']}/task/revisions").json()["revisions"]
    assert [(r["version"], r["task"], r["saved_by"]) for r in revs] == [(1, "Close deals.", "system")]
    # A first task past the cap is refused, and no agent is created without it.
    with pytest.raises(TooLarge, match="262,145 bytes"):
        admin.create_agent(db, org_id=org, guild_id=boot["guild_id"], name="Too long", task="x" * 262_145)
    with db.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM agents WHERE name = 'Too long'").fetchone()["n"] == 0

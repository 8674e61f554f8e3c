"""State: the read-only projection for members and the service token."""
from __future__ import annotations

from store import admin, memory, notes, tasks
from store.access import SYSTEM


def test_state_projects_task_memory_grants_and_collections(server, db, boot, operator, service) -> None:
    org, agent, guild = boot["org_id"], boot["agent_id"], boot["guild_id"]
    with db.transaction() as conn:
        notes.write_note(conn, org, "guild", guild, "brief.md", "Call every lead.", SYSTEM)
        tasks.write_task(conn, org, agent, f"Task: ![[org/{org}/guilds/{guild}/brief.md]] using "
                                           f"![[org/{org}/collections/leads]]", SYSTEM)
        memory.write_memory(conn, org, agent, "remember Bob", SYSTEM, source="agent")
        cid = conn.execute("INSERT INTO artifact_collections (org_id, name, purpose, columns) VALUES"
                           " (%s, 'leads', 'sales leads', '[]') RETURNING id", (org,)).fetchone()["id"]
        conn.execute("INSERT INTO collection_access (collection_id, guild_id, mode) VALUES (%s, %s, 'read')",
                     (cid, guild))
    admin.set_agent(db, agent, write_org=True)
    url = f"{server.url}/api/agents/{agent}/state"
    body = service.get(url).json()
    assert operator.get(url).json() == body
    assert body["task"]["text"] == "Task: Call every lead. using leads"
    assert body["task"]["raw"].startswith("Task: ![[") and body["task"]["version"] == 1
    assert body["memory"]["content"] == "remember Bob" and body["memory"]["version"] == 1
    assert body["note_grants"] == {"read_guild": True, "write_guild": True, "read_org": True, "write_org": True}
    assert body["collections"] == [{"name": "leads", "purpose": "sales leads", "access": "read", "scope": "org",
                                    "display_path": f"org/{org}/collections/leads", "columns": []}]
    other = admin.bootstrap(db, org_name="Other")
    r = service.get(f"{server.url}/api/agents/{other['agent_id']}/state")
    assert r.status_code == 404 and r.json()["error"] == f"unknown agent {other['agent_id']}"
    assert operator.get(f"{server.url}/api/agents/{other['agent_id']}/state").status_code == 404

"""Collection access: guild base, agent overrides up and down, none, a guild's own table, moves, and
what the operator's GET routes and the agent's own lookups then show."""
from __future__ import annotations

from typing import Any

import pytest

from store import admin
from store.agents import load_agent
from store.errors import Forbidden, NotFound
from store.grants import collection_for_agent, granted_collections, state_collections
from test_collections_support import col, create, live_records, seed


@pytest.fixture
def world(server, operator, boot, db) -> dict[str, Any]:
    """Two guilds: Research (the bootstrap agent and a second member) and Sales (one agent)."""
    mate = admin.create_agent(db, org_id=boot["org_id"], guild_id=boot["guild_id"], name="mate")
    sales = admin.create_guild(db, org_id=boot["org_id"], name="Sales")
    seller = admin.create_agent(db, org_id=boot["org_id"], guild_id=sales["id"], name="seller")
    return {"url": server.url, "org": boot["org_id"], "research": boot["guild_id"], "agent": boot["agent_id"],
            "mate": mate["id"], "sales": sales["id"], "seller": seller["id"]}


def can(db, org_id: int, agent_id: int, name: str) -> str | None:
    """What the agent can do with the collection, as the record tools decide it."""
    with db.connection() as conn:
        agent = load_agent(conn, agent_id, {org_id})
        try:
            collection_for_agent(conn, agent, name, "write")
            return "write"
        except Forbidden as exc:
            assert str(exc).startswith(f"collection {name} is read-only for this agent")
            return "read"
        except NotFound as exc:
            assert str(exc) == f"unknown collection {name}"
            return None


def grant_guild(operator, w, guild: int, cid: int, mode: str | None):
    return operator.put(f"{w['url']}/api/guilds/{guild}/collection-access", json={"collection_id": cid, "mode": mode})


def grant_agent(operator, w, agent: int, cid: int, mode: str | None):
    return operator.put(f"{w['url']}/api/agents/{agent}/collection-access", json={"collection_id": cid, "mode": mode})


def agent_view(operator, w, agent: int, name: str) -> dict[str, Any] | None:
    entries = operator.get(f"{w['url']}/api/agents/{agent}/collection-access").json()["collections"]
    return next((e for e in entries if e["name"] == name), None)


def test_an_org_table_with_no_grant_is_unknown_to_agents(world, operator, db) -> None:
    t = create(operator, world["url"], "ledger")
    assert can(db, world["org"], world["agent"], "ledger") is None
    assert can(db, world["org"], world["agent"], "no-such-table") is None
    view = agent_view(operator, world, world["agent"], "ledger")
    assert view == {"collection_id": t["id"], "name": "ledger", "purpose": "ledger table", "scope": "org",
                    "guild_mode": None, "agent_mode": None, "effective": None}


def test_guild_base_and_agent_overrides_up_down_and_none(world, operator, db) -> None:
    w, t = world, create(operator, world["url"], "ledger")
    r = grant_guild(operator, w, w["research"], t["id"], "read")
    assert r.status_code == 200
    assert r.json() == {"guild_id": w["research"], "collection_id": t["id"], "name": "ledger", "mode": "read"}
    assert [can(db, w["org"], a, "ledger") for a in (w["agent"], w["mate"], w["seller"])] == ["read", "read", None]
    # Override up: the guild reads, one member writes.
    r = grant_agent(operator, w, w["mate"], t["id"], "write")
    assert r.status_code == 200
    assert r.json() == {"agent_id": w["mate"], "collection_id": t["id"], "name": "ledger", "purpose": "ledger table",
                        "scope": "org", "guild_mode": "read", "agent_mode": "write", "effective": "write"}
    assert can(db, w["org"], w["mate"], "ledger") == "write"
    # Override down: the guild writes, one member reads; none keeps another out.
    assert grant_guild(operator, w, w["research"], t["id"], "write").status_code == 200
    assert grant_agent(operator, w, w["mate"], t["id"], "read").json()["effective"] == "read"
    assert grant_agent(operator, w, w["agent"], t["id"], "none").json()["effective"] is None
    assert [can(db, w["org"], a, "ledger") for a in (w["agent"], w["mate"])] == [None, "read"]
    assert agent_view(operator, w, w["agent"], "ledger")["agent_mode"] == "none"
    # An agent row alone, without a guild grant, reaches the table too.
    assert grant_agent(operator, w, w["seller"], t["id"], "read").json()["effective"] == "read"
    assert can(db, w["org"], w["seller"], "ledger") == "read"
    # null removes a row: back to the guild base, then to nothing.
    assert grant_agent(operator, w, w["agent"], t["id"], None).json()["effective"] == "write"
    assert can(db, w["org"], w["agent"], "ledger") == "write"
    assert grant_guild(operator, w, w["research"], t["id"], None).json()["mode"] is None
    assert [can(db, w["org"], a, "ledger") for a in (w["agent"], w["mate"])] == [None, "read"]
    guild_view = operator.get(f"{w['url']}/api/guilds/{w['research']}/collection-access").json()
    assert guild_view == {"guild_id": w["research"], "collections": [
        {"collection_id": t["id"], "name": "ledger", "purpose": "ledger table", "scope": "org", "mode": None}]}
    detail = operator.get(f"{w['url']}/api/collections/{t['id']}").json()["access_list"]
    assert detail["guilds"] == []
    assert [(a["agent_id"], a["mode"]) for a in detail["agents"]] == [(w["mate"], "read"), (w["seller"], "read")]


def test_a_guild_grant_covers_agents_added_later(world, operator, db) -> None:
    t = create(operator, world["url"], "ledger")
    grant_guild(operator, world, world["sales"], t["id"], "write")
    late = admin.create_agent(db, org_id=world["org"], guild_id=world["sales"], name="late")
    assert can(db, world["org"], late["id"], "ledger") == "write"


def test_a_guilds_own_table(world, operator, db) -> None:
    w = world
    t = create(operator, w["url"], "queue", guild_id=w["research"])
    assert [can(db, w["org"], a, "queue") for a in (w["agent"], w["mate"], w["seller"])] == ["write", "write", None]
    # No guild row on it, neither its own guild's nor another's.
    for guild in (w["research"], w["sales"]):
        r = grant_guild(operator, w, guild, t["id"], "read")
        assert r.status_code == 422
    assert grant_guild(operator, w, w["research"], t["id"], "read").json()["error"] == (
        "collection queue is this guild's own table: a guild's own table takes no guild grant (its guild "
        "writes it and no other guild reaches it); move it to the organisation first to share it")
    # An agent row only for an agent of that guild: it may hold a member back.
    r = grant_agent(operator, w, w["seller"], t["id"], "read")
    assert r.status_code == 422
    assert r.json()["error"] == (
        f"collection queue is guild {w['research']}'s own table and agent {w['seller']} belongs to guild "
        f"{w['sales']}: an agent row on a guild's own table is accepted only for an agent of that guild; move "
        "the table to the organisation to share it")
    assert grant_agent(operator, w, w["mate"], t["id"], "read").json()["effective"] == "read"
    assert grant_agent(operator, w, w["agent"], t["id"], "none").json()["effective"] is None
    assert [can(db, w["org"], a, "queue") for a in (w["agent"], w["mate"], w["seller"])] == [None, "read", None]
    # The guild's view shows it as its own, with write; the other guild does not see it at all.
    research = operator.get(f"{w['url']}/api/guilds/{w['research']}/collection-access").json()["collections"]
    assert research == [{"collection_id": t["id"], "name": "queue", "purpose": "queue table", "scope": "guild",
                         "mode": "write"}]
    assert operator.get(f"{w['url']}/api/guilds/{w['sales']}/collection-access").json()["collections"] == []
    assert agent_view(operator, w, w["seller"], "queue") is None
    assert agent_view(operator, w, w["mate"], "queue") == {
        "collection_id": t["id"], "name": "queue", "purpose": "queue table", "scope": "guild",
        "guild_mode": "write", "agent_mode": "read", "effective": "read"}
    nothing = operator.get(f"{w['url']}/api/collections/{t['id']}").json()["access_list"]
    assert nothing["guilds"] == [{"guild_id": w["research"], "name": "Research", "mode": "write", "own": True}]


def test_moving_to_a_guild_drops_every_grant_and_back_keeps_the_guilds_reach(world, operator, db) -> None:
    w = world
    t = create(operator, w["url"], "ledger")
    grant_guild(operator, w, w["sales"], t["id"], "read")
    grant_guild(operator, w, w["research"], t["id"], "read")
    grant_agent(operator, w, w["seller"], t["id"], "write")
    grant_agent(operator, w, w["mate"], t["id"], "none")
    r = operator.patch(f"{w['url']}/api/collections/{t['id']}", json={"guild_id": w["research"]})
    assert r.status_code == 200, r.text
    assert r.json()["scope"] == "guild"
    assert r.json()["access_list"] == {"guilds": [{"guild_id": w["research"], "name": "Research", "mode": "write",
                                                   "own": True}], "agents": []}
    assert [can(db, w["org"], a, "ledger") for a in (w["agent"], w["mate"], w["seller"])] == ["write", "write", None]
    # To another guild directly: still no grants, the new guild writes, the old one is out.
    grant_agent(operator, w, w["mate"], t["id"], "read")
    r = operator.patch(f"{w['url']}/api/collections/{t['id']}", json={"guild_id": w["sales"]})
    assert r.json()["access_list"]["agents"] == []
    assert [can(db, w["org"], a, "ledger") for a in (w["agent"], w["mate"], w["seller"])] == [None, None, "write"]
    # Back to the organisation: Sales keeps its reach as a write grant, nobody else gains any.
    r = operator.patch(f"{w['url']}/api/collections/{t['id']}", json={"guild_id": None})
    assert r.json()["scope"] == "org"
    assert r.json()["access_list"]["guilds"] == [{"guild_id": w["sales"], "name": "Sales", "mode": "write", "own": False}]
    assert [can(db, w["org"], a, "ledger") for a in (w["agent"], w["mate"], w["seller"])] == [None, None, "write"]
    # A bad guild id is refused and changes nothing.
    r = operator.patch(f"{w['url']}/api/collections/{t['id']}", json={"guild_id": 999999})
    assert r.status_code == 422 and r.json()["problems"] == [
        "guild_id 999999 is not a guild of this organisation; give one of its guilds' ids, "
        "or null for an organisation table"]


def test_bad_grant_bodies_list_every_problem(world, operator) -> None:
    w, t = world, create(operator, world["url"], "ledger")
    r = operator.put(f"{w['url']}/api/guilds/{w['research']}/collection-access",
                     json={"collection_id": "ledger", "mode": "none", "why": 1})
    assert r.status_code == 422
    assert r.json()["problems"] == [
        'unknown field "why"; a grant takes collection_id and mode',
        'collection_id must be a collection\'s id; got "ledger"',
        'mode must be read, write, or null to remove the guild\'s grant; got "none"']
    r = operator.put(f"{w['url']}/api/agents/{w['agent']}/collection-access", json={"collection_id": t["id"]})
    assert r.status_code == 422
    assert r.json()["problems"] == ["mode is required: read, write, none, or null to remove the agent's grant"]
    r = operator.put(f"{w['url']}/api/agents/{w['agent']}/collection-access", json={"collection_id": 424242, "mode": "read"})
    assert r.status_code == 404 and r.json()["error"] == "unknown collection 424242"
    for huge in (2**63, 10**30):
        assert operator.get(f"{w['url']}/api/agents/{huge}/collection-access").status_code == 404
        assert operator.get(f"{w['url']}/api/guilds/{huge}/collection-access").status_code == 404
        assert operator.get(f"{w['url']}/api/collections/{huge}").status_code == 404
    r = operator.put(f"{w['url']}/api/agents/{w['agent']}/collection-access", data="[1]",
                     headers={"Content-Type": "application/json"})
    assert r.status_code == 422


def test_deleting_agents_guilds_and_collections_removes_their_grants(world, operator, db) -> None:
    w = world
    org_table = create(operator, w["url"], "ledger")
    own = create(operator, w["url"], "pipeline", [col("deal")], guild_id=w["sales"])
    seed(db, w["org"], own["id"], [{"deal": "a"}, {"deal": "b"}])
    grant_guild(operator, w, w["sales"], org_table["id"], "write")
    grant_agent(operator, w, w["seller"], org_table["id"], "read")
    grant_agent(operator, w, w["agent"], org_table["id"], "write")
    with db.transaction() as conn:
        conn.execute("DELETE FROM agents WHERE id = %s", (w["agent"],))
    assert [a["agent_id"] for a in operator.get(f"{w['url']}/api/collections/{org_table['id']}").json()
            ["access_list"]["agents"]] == [w["seller"]]
    # Deleting a guild soft-deletes its own table with its records and drops its grants.
    with db.transaction() as conn:
        conn.execute("DELETE FROM guilds WHERE id = %s", (w["sales"],))
    assert operator.get(f"{w['url']}/api/collections/{own['id']}").status_code == 404
    assert live_records(db, own["id"]) == {}
    detail = operator.get(f"{w['url']}/api/collections/{org_table['id']}").json()["access_list"]
    assert detail == {"guilds": [], "agents": []}
    with db.connection() as conn:
        ops = conn.execute("SELECT operation, actor_name FROM file_changes WHERE display_path = %s ORDER BY id",
                           (own["display_path"],)).fetchall()
    assert ops[-1] == {"operation": "delete", "actor_name": f"guild {w['sales']} deleted"}
    # The name is free again; deleting the organisation still works with the trigger in place.
    assert create(operator, w["url"], "pipeline")["scope"] == "org"
    with db.transaction() as conn:
        conn.execute("DELETE FROM organisations WHERE id = %s", (w["org"],))


def test_state_lists_granted_collections_capped_at_50(world, operator, service, db) -> None:
    w = world
    with db.transaction() as conn:
        conn.execute("""INSERT INTO artifact_collections (org_id, guild_id, name, purpose, columns)
                        SELECT %s, %s, 'own-' || lpad(g::text, 2, '0'), 'p', '[]' FROM generate_series(1, 51) g""",
                     (w["org"], w["research"]))
    t = create(operator, w["url"], "shared", [col("title")])
    grant_guild(operator, w, w["sales"], t["id"], "read")
    with db.connection() as conn:
        seller = load_agent(conn, w["seller"], {w["org"]})
        agent = load_agent(conn, w["agent"], {w["org"]})
        assert state_collections(conn, seller) == [{
            "name": "shared", "purpose": "shared table", "access": "read", "scope": "org",
            "display_path": f"org/{w['org']}/collections/shared", "columns": t["columns"]}]
        mine = state_collections(conn, agent)
        assert len(granted_collections(conn, agent)) == 51
    assert len(mine) == 51 and mine[-1]["truncated"] is True
    assert all(e["access"] == "write" and e["scope"] == "guild" for e in mine[:50])
    # What the orchestrator reads in the agent's State.
    over_http = service.get(f"{w['url']}/api/agents/{w['agent']}/state").json()["collections"]
    assert [e.get("name") for e in over_http[:3]] == ["own-01", "own-02", "own-03"]
    assert len(over_http) == 51 and over_http[-1]["truncated"] is True

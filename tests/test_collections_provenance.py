"""Record provenance through the operator's bulk changes: clearing a table, deleting it, deleting
its guild and renaming it each leave every record's own history ending where the record ended."""
from __future__ import annotations

from typing import Any

from store import admin
from test_collections_support import col, create, seed


def _latest(operator, url: str, paths: list[str]) -> dict[str, Any]:
    r = operator.post(f"{url}/api/file-changes/latest", json={"display_paths": paths})
    assert r.status_code == 200, r.text
    return r.json()["latest"]


def _record_paths(made: dict[str, Any], ids: list[int]) -> list[str]:
    return [f"{made['display_path']}/{i}" for i in ids]


def _history(db, path: str) -> list[tuple[str, int | None, str]]:
    with db.connection() as conn:
        rows = conn.execute("SELECT operation, version, actor_name FROM file_changes WHERE display_path = %s"
                            " ORDER BY id", (path,)).fetchall()
    return [(r["operation"], r["version"], r["actor_name"]) for r in rows]


def test_clearing_a_collection_writes_a_delete_row_per_record(server, operator, boot, db) -> None:
    made = create(operator, server.url, "inbox")
    ids = seed(db, boot["org_id"], made["id"], [{"title": "one"}, {"title": "two"}])
    r = operator.post(f"{server.url}/api/collections/{made['id']}/records", json={"body": {"title": "three"}})
    ids.append(r.json()["record"]["id"])
    assert operator.delete(f"{server.url}/api/collections/{made['id']}/records").status_code == 200
    latest = _latest(operator, server.url, _record_paths(made, ids))
    assert [(c["operation"], c["version"], c["actor_name"]) for c in latest.values()] == [
        ("delete", 2, boot["email"])] * 3
    assert _history(db, f"{made['display_path']}/{ids[2]}") == [("create", 1, boot["email"]),
                                                                ("delete", 2, boot["email"])]
    # the table's own history still says it was cleared, once
    assert [op for op, _, _ in _history(db, made["display_path"])] == ["create", "clear"]


def test_deleting_a_collection_writes_a_delete_row_per_record(server, operator, boot, db) -> None:
    made = create(operator, server.url, "doomed")
    ids = seed(db, boot["org_id"], made["id"], [{"title": "one"}, {"title": "two"}])
    assert operator.delete(f"{server.url}/api/collections/{made['id']}").status_code == 200
    latest = _latest(operator, server.url, _record_paths(made, ids))
    assert [(c["operation"], c["version"], c["actor_name"]) for c in latest.values()] == [
        ("delete", 2, boot["email"])] * 2
    assert [op for op, _, _ in _history(db, made["display_path"])] == ["create", "delete"]


def test_deleting_a_guild_writes_a_delete_row_per_record_of_its_tables(server, operator, boot, db) -> None:
    guild = admin.create_guild(db, org_id=boot["org_id"], name="Short-lived")
    made = create(operator, server.url, "pipeline", [col("deal")], guild_id=guild["id"])
    ids = seed(db, boot["org_id"], made["id"], [{"deal": "a"}, {"deal": "b"}])
    with db.transaction() as conn:
        conn.execute("DELETE FROM guilds WHERE id = %s", (guild["id"],))
    latest = _latest(operator, server.url, _record_paths(made, ids))
    assert [(c["operation"], c["version"], c["actor_type"], c["actor_name"]) for c in latest.values()] == [
        ("delete", 2, "system", f"guild {guild['id']} deleted")] * 2
    with db.connection() as conn:
        left = conn.execute("SELECT version, updated_by FROM artifacts WHERE collection_id = %s",
                            (made["id"],)).fetchall()
    assert left == [{"version": 2, "updated_by": f"guild {guild['id']} deleted"}] * 2


def test_renaming_a_collection_records_each_records_move(server, operator, boot, db) -> None:
    made = create(operator, server.url, "old-name")
    ids = seed(db, boot["org_id"], made["id"], [{"title": "one"}])
    r = operator.post(f"{server.url}/api/collections/{made['id']}/records", json={"body": {"title": "two"}})
    ids.append(r.json()["record"]["id"])
    assert operator.patch(f"{server.url}/api/collections/{made['id']}", json={"name": "new-name"}).status_code == 200
    old_paths = _record_paths(made, ids)
    new_paths = [p.replace("/old-name/", "/new-name/") for p in old_paths]
    latest = _latest(operator, server.url, old_paths + new_paths)
    assert [(latest[p]["operation"], latest[p]["version"], latest[p]["recorded"]) for p in old_paths] == [
        ("move", 1, True)] * 2
    assert [(latest[p]["operation"], latest[p]["version"], latest[p]["recorded"], latest[p]["actor_name"])
            for p in new_paths] == [("create", 1, True, boot["email"])] * 2
    assert _history(db, old_paths[1]) == [("create", 1, boot["email"]), ("move", 1, boot["email"])]
    # the record itself did not change: same version, same body
    got = operator.get(f"{server.url}/api/collections/{made['id']}/records/{ids[1]}").json()
    assert (got["version"], got["title"], got["display_path"]) == (1, "two", new_paths[1])

"""Collections through HTTP: create, the column dialect's every problem, caps, name rules, delete
and clear, and who may call the routes."""
from __future__ import annotations

from typing import Any

import requests

from store import admin
from test_collections_support import changes, col, create, live_records, seed


def test_create_lists_and_describes_a_collection(server, operator, boot, db) -> None:
    r = operator.post(f"{server.url}/api/collections", json={
        "name": "leads", "purpose": "People who asked for a demo",
        "columns": [col("email", unique=True, required=True), col("status", values=["new", "won"]),
                    col("score", "number"), col("tags", "array"), col("met", "datetime"), col("vip", "boolean")]})
    assert r.status_code == 201, r.text
    made = r.json()
    assert made["name"] == "leads" and made["scope"] == "org" and made["guild_id"] is None
    assert made["display_path"] == f"org/{boot['org_id']}/collections/leads"
    assert made["count"] == 0 and made["next_id"] == 1
    assert [c["name"] for c in made["columns"]] == ["email", "status", "score", "tags", "met", "vip"]
    assert made["columns"][0] == {"name": "email", "type": "text", "description": "the email",
                                  "required": True, "unique": True}
    assert made["columns"][1]["values"] == ["new", "won"]
    assert "values" not in made["columns"][2]

    seed(db, boot["org_id"], made["id"], [{"email": "a@x.io"}, {"email": "b@x.io"}])
    listed = operator.get(f"{server.url}/api/collections").json()["collections"]
    assert [(c["name"], c["count"]) for c in listed] == [("leads", 2)]
    one = operator.get(f"{server.url}/api/collections/{made['id']}").json()
    assert one["count"] == 2 and one["access_list"] == {"guilds": [], "agents": []}
    assert changes(db, made["display_path"]) == ["create"]


def test_every_problem_of_a_definition_at_once_and_nothing_written(server, operator) -> None:
    r = operator.post(f"{server.url}/api/collections", json={
        "name": "Bad Name", "purpose": "", "colour": "red",
        "columns": [
            {"name": "Email", "type": "string"},
            col("id"),
            col("flag", "boolean", unique=True),
            col("n", "number", values=["1"]),
            col("s", values=[]),
            col("t", values=["a", "a", "", "x" * 65]),
            col("d", description="d" * 201),
            col("u1", unique=True), col("u2", "number", unique=True),
            col("r", required="yes"),
            col("s"),
            "email",
        ]})
    assert r.status_code == 422
    body = r.json()
    assert body["error"].startswith("collection rejected:\n- ")
    assert body["problems"] == [
        'unknown field "colour"; a collection takes name, purpose, columns, guild_id',
        'name "Bad Name" is not a collection name: start with a lowercase letter, then lowercase letters, '
        "digits, _ or -, at most 63 characters (^[a-z][a-z0-9_-]{0,62}$)",
        "purpose is required: a sentence, at most 400 characters, saying what the table is for",
        'column 1: name "Email" is not a column name: start with a lowercase letter, then lowercase letters, '
        "digits or _, at most 64 characters (^[a-z][a-z0-9_]{0,63}$)",
        'column 1: type must be one of text, number, boolean, datetime, array; got "string"',
        "column 1: description is required: a sentence, at most 200 characters, that tells agents what the "
        "column holds",
        'column "id": the name "id" is reserved for a field the store keeps on every record (id, collection, '
        "created_at, updated_at, created_by, updated_by, version, display_path); choose another name",
        'column "flag": unique applies to text or number columns only; this column is boolean',
        'column "n": values applies to text or array columns only; this column is number',
        # (two rows are named "s": each is told apart by its place)
        'column 5 ("s"): values must list 1 to 50 distinct strings; got 0 values',
        'column "t": values item 3 must be a non-empty string of at most 64 characters; got ""',
        'column "t": values item 4 must be a non-empty string of at most 64 characters; got "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx..."',
        'column "t": values lists "a" more than once; each value appears once',
        'column "d": description is 201 characters; at most 200 are allowed',
        'column "r": required must be true or false; got "yes"',
        'column 12: expected an object {name, type, description, required?, unique?, values?}; got "email"',
        'column "s": the name is declared more than once (columns 5, 11); column names are unique in a collection',
        'columns "flag", "u1", "u2" are all unique: at most one column per collection can be unique',
    ]
    assert operator.get(f"{server.url}/api/collections").json()["collections"] == []


def test_name_rules_and_409_whatever_the_scope(server, operator, boot, db) -> None:
    url = server.url
    for good in ("a", "q-1_x", "a" + "b" * 62):
        create(operator, url, good)
    r = operator.post(f"{url}/api/collections", json={"name": "a" * 64, "purpose": "p", "columns": []})
    assert r.status_code == 422 and r.json()["problems"][0].startswith('name "aaaa')
    r = operator.post(f"{url}/api/collections", json={"purpose": "p", "columns": []})
    assert r.json()["problems"] == ['name is required, such as "leads"']
    # An organisation table's name cannot be a guild's table name too, nor the other way round.
    r = operator.post(f"{url}/api/collections", json={"name": "a", "purpose": "p", "columns": [],
                                                       "guild_id": boot["guild_id"]})
    assert r.status_code == 409
    assert r.json()["error"] == ("a collection named a already exists in this organisation: names are unique "
                                 "across the organisation whatever the table's scope; choose another name")
    queue = create(operator, url, "queue", guild_id=boot["guild_id"])
    assert queue["scope"] == "guild"
    assert operator.post(f"{url}/api/collections", json={"name": "queue", "purpose": "p", "columns": []}).status_code == 409
    # Renaming onto a taken name is the same 409; a deleted table's name is free again.
    assert operator.patch(f"{url}/api/collections/{queue['id']}", json={"name": "a"}).status_code == 409
    assert operator.delete(f"{url}/api/collections/{queue['id']}").status_code == 200
    assert create(operator, url, "queue")["scope"] == "org"
    # Another organisation may use the same name.
    other = admin.bootstrap(db, org_name="Other", email="bob@example.com", password="another horse battery")
    s = server.session(basic=("bob@example.com", "another horse battery"))
    assert create(s, url, "queue")["display_path"] == f"org/{other['org_id']}/collections/queue"


def test_purpose_is_required_and_at_most_400(server, operator) -> None:
    r = operator.post(f"{server.url}/api/collections", json={"name": "x", "purpose": "p" * 401, "columns": []})
    assert r.status_code == 422
    assert r.json()["problems"] == ["purpose is 401 characters; at most 400 are allowed"]
    r = operator.post(f"{server.url}/api/collections", json={"name": "x", "purpose": "p" * 400, "columns": []})
    assert r.status_code == 201
    r = operator.patch(f"{server.url}/api/collections/{r.json()['id']}", json={"purpose": "   "})
    assert r.status_code == 422
    assert r.json()["problems"] == [
        "purpose is required: a sentence, at most 400 characters, saying what the table is for"]


def test_64_columns_accepted_65_refused_on_create_and_change(server, operator) -> None:
    many = [col(f"c{i}") for i in range(64)]
    made = create(operator, server.url, "wide", many)
    assert len(made["columns"]) == 64
    r = operator.post(f"{server.url}/api/collections", json={"name": "wider", "purpose": "p",
                                                              "columns": many + [col("c64")]})
    assert r.status_code == 422
    assert r.json()["problems"] == ["a collection has at most 64 columns; got 65"]
    r = operator.patch(f"{server.url}/api/collections/{made['id']}", json={"columns": many + [col("c64")]})
    assert r.status_code == 422 and r.json()["problems"] == ["a collection has at most 64 columns; got 65"]
    assert len(operator.get(f"{server.url}/api/collections/{made['id']}").json()["columns"]) == 64


def test_100_collections_accepted_the_101st_refused(server, operator, db, boot) -> None:
    # 99 through SQL (the cap counts live rows, however they came), the 100th and 101st over HTTP.
    with db.transaction() as conn:
        conn.execute("""INSERT INTO artifact_collections (org_id, name, purpose)
                        SELECT %s, 't' || g, 'p' FROM generate_series(1, 99) g""", (boot["org_id"],))
    assert create(operator, server.url, "hundredth")["name"] == "hundredth"
    r = operator.post(f"{server.url}/api/collections", json={"name": "one-more", "purpose": "p", "columns": []})
    assert r.status_code == 422
    assert r.json()["error"] == ("this organisation already has 100 live collections, the most it can hold "
                                 "(100); delete one it no longer needs before creating one-more")
    assert r.json()["problems"] == ["collections: 100 of 100"]
    assert len(operator.get(f"{server.url}/api/collections").json()["collections"]) == 100
    # A deleted table no longer counts.
    assert operator.delete(f"{server.url}/api/collections/{_id(operator, server.url, 't1')}").status_code == 200
    assert create(operator, server.url, "one-more")["name"] == "one-more"


def _id(operator: requests.Session, url: str, name: str) -> int:
    return next(c["id"] for c in operator.get(f"{url}/api/collections").json()["collections"] if c["name"] == name)


def test_delete_soft_deletes_records_drops_grants_and_records_one_change(server, operator, boot, db) -> None:
    made = create(operator, server.url, "leads", [col("email", unique=True)])
    seed(db, boot["org_id"], made["id"], [{"email": f"{i}@x.io"} for i in range(5)])
    assert operator.put(f"{server.url}/api/guilds/{boot['guild_id']}/collection-access",
                        json={"collection_id": made["id"], "mode": "read"}).status_code == 200
    r = operator.delete(f"{server.url}/api/collections/{made['id']}")
    assert r.status_code == 200 and r.json() == {"deleted": made["id"], "name": "leads", "records": 5}
    assert operator.get(f"{server.url}/api/collections/{made['id']}").status_code == 404
    assert operator.delete(f"{server.url}/api/collections/{made['id']}").status_code == 404
    assert live_records(db, made["id"]) == {}
    with db.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM collection_access").fetchone()["n"] == 0
        deleted = conn.execute("SELECT count(*) AS n FROM artifacts WHERE collection_id = %s AND deleted_at IS NOT NULL",
                               (made["id"],)).fetchone()["n"]
    assert deleted == 5
    assert changes(db, made["display_path"]) == ["create", "update", "delete"]


def test_clear_keeps_table_grants_and_next_id(server, operator, boot, db) -> None:
    made = create(operator, server.url, "inbox")
    seed(db, boot["org_id"], made["id"], [{"title": "one"}, {"title": "two"}, {"title": "three"}])
    operator.put(f"{server.url}/api/guilds/{boot['guild_id']}/collection-access",
                 json={"collection_id": made["id"], "mode": "write"})
    r = operator.delete(f"{server.url}/api/collections/{made['id']}/records")
    assert r.status_code == 200 and r.json() == {"cleared": 3, "collection": "inbox"}
    one = operator.get(f"{server.url}/api/collections/{made['id']}").json()
    assert one["count"] == 0 and one["next_id"] == 4
    assert one["access_list"]["guilds"] == [{"guild_id": boot["guild_id"], "name": one["access_list"]["guilds"][0]["name"],
                                             "mode": "write", "own": False}]
    assert changes(db, made["display_path"])[-1] == "clear"
    assert seed(db, boot["org_id"], made["id"], [{"title": "four"}]) == [4]
    # Another organisation's member cannot clear it: the collection does not exist for them.
    other = admin.bootstrap(db, org_name="Other")
    r = server.session(basic=(other["email"], other["password"])).delete(
        f"{server.url}/api/collections/{made['id']}/records")
    assert r.status_code == 404
    assert operator.get(f"{server.url}/api/collections/{made['id']}").json()["count"] == 1


def test_other_organisations_ids_are_404_and_routes_are_for_members(server, operator, service, boot, db) -> None:
    url = server.url
    other = admin.bootstrap(db, org_name="Other", email="bob@example.com", password="another horse battery")
    bob = server.session(basic=("bob@example.com", "another horse battery"))
    theirs = create(bob, url, "theirs")
    mine = create(operator, url, "mine")
    calls: list[tuple[str, str, Any]] = [
        ("GET", f"/api/collections/{theirs['id']}", None),
        ("PATCH", f"/api/collections/{theirs['id']}", {"purpose": "mine now"}),
        ("DELETE", f"/api/collections/{theirs['id']}", None),
        ("GET", f"/api/guilds/{other['guild_id']}/collection-access", None),
        ("PUT", f"/api/guilds/{other['guild_id']}/collection-access", {"collection_id": theirs["id"], "mode": "read"}),
        ("GET", f"/api/agents/{other['agent_id']}/collection-access", None),
        ("PUT", f"/api/agents/{other['agent_id']}/collection-access", {"collection_id": theirs["id"], "mode": "read"}),
        # my guild, their collection: the collection is unknown to me
        ("PUT", f"/api/guilds/{boot['guild_id']}/collection-access", {"collection_id": theirs["id"], "mode": "read"}),
        ("PUT", f"/api/agents/{boot['agent_id']}/collection-access", {"collection_id": theirs["id"], "mode": "read"}),
    ]
    for method, path, body in calls:
        r = operator.request(method, url + path, json=body)
        assert r.status_code == 404, (method, path, r.text)
    r = operator.get(f"{url}/api/collections/{theirs['id']}")
    assert r.json()["error"] == f"unknown collection {theirs['id']}"
    assert r.json() == operator.get(f"{url}/api/collections/987654").json() | {"error": f"unknown collection {theirs['id']}"}
    r = operator.post(f"{url}/api/collections", json={"name": "x", "purpose": "p", "columns": [],
                                                       "guild_id": other["guild_id"]})
    assert r.status_code == 422 and r.json()["problems"] == [
        f"guild_id {other['guild_id']} is not a guild of this organisation; give one of its guilds' ids, "
        "or null for an organisation table"]
    r = operator.get(f"{url}/api/collections", params={"org_id": other["org_id"]})
    assert r.status_code == 404
    assert bob.get(f"{url}/api/collections/{theirs['id']}").json()["purpose"] == "theirs table"
    # The orchestrator's token and strangers do not reach the operator routes.
    assert service.get(f"{url}/api/collections").status_code == 404
    assert service.get(f"{url}/api/collections/{mine['id']}").status_code == 404
    assert requests.get(f"{url}/api/collections").status_code == 401
    assert requests.delete(f"{url}/api/collections/{mine['id']}").status_code == 401
    assert operator.get(f"{url}/api/collections/{mine['id']}").status_code == 200


def test_bad_bodies_are_422_not_500(server, operator) -> None:
    """A body that breaks a rule is a 422 with its problems, one that is not JSON at all a 400
    (RFC 9110 keeps 422 for content that parses); never a 500."""
    made = create(operator, server.url, "x")
    for method, path, data in [("POST", "/api/collections", "not json"), ("POST", "/api/collections", "[1]"),
                               ("PATCH", f"/api/collections/{made['id']}", "[]"),
                               ("PATCH", f"/api/collections/{made['id']}", '{"columns": {"a": 1}}'),
                               ("PATCH", f"/api/collections/{made['id']}", '{"guild_id": "one"}'),
                               ("POST", "/api/collections", '{"name": "y", "purpose": "p", "columns": null}')]:
        r = operator.request(method, server.url + path, data=data, headers={"Content-Type": "application/json"})
        assert r.status_code == (400 if data == "not json" else 422), (method, path, data, r.text)
        assert r.json()["problems"], r.text


def test_column_names_that_are_record_fields_are_reserved(server, operator, boot, db) -> None:
    """A column named like a field every record carries would overwrite it (or lose its own value)
    in every result: collection, version and display_path are refused beside id and the stamps."""
    reserved = ("id, collection, created_at, updated_at, created_by, updated_by, version, display_path")
    r = operator.post(f"{server.url}/api/collections", json={
        "name": "clash", "purpose": "names that clash",
        "columns": [col("collection"), col("version", "number"), col("display_path"), col("title")]})
    assert r.status_code == 422, r.text
    assert r.json()["problems"] == [
        f'column "{name}": the name "{name}" is reserved for a field the store keeps on every record ({reserved}); '
        "choose another name" for name in ("collection", "version", "display_path")]
    made = create(operator, server.url, "fine")
    r = operator.patch(f"{server.url}/api/collections/{made['id']}",
                       json={"columns": [col("version", rename_from="title")]})
    assert r.status_code == 422 and r.json()["problems"] == [
        f'column "version": the name "version" is reserved for a field the store keeps on every record ({reserved}); '
        "choose another name"]


def test_a_table_stored_with_a_now_reserved_column_still_reads_and_renames(server, operator, boot, db) -> None:
    made = create(operator, server.url, "legacy", [col("title")])
    with db.transaction() as conn:
        conn.execute("""UPDATE artifact_collections SET columns = columns || '[{"name": "version", "type": "text",
                        "description": "the old version", "required": false, "unique": false}]'::jsonb WHERE id = %s""",
                     (made["id"],))
    [rid] = seed(db, boot["org_id"], made["id"], [{"title": "t", "version": "v9"}])
    base = f"{server.url}/api/collections/{made['id']}"
    got = operator.get(f"{base}/records/{rid}").json()
    assert (got["title"], got["version"], got["collection"]) == ("t", 1, "legacy")
    r = operator.patch(base, json={"columns": [col("title"), col("release", rename_from="version")]})
    assert r.status_code == 200, r.text
    got = operator.get(f"{base}/records/{rid}").json()
    assert (got["release"], got["version"]) == ("v9", 2)

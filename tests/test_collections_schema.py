"""Schema changes on a live collection: renames, removals, unique checks, search text, table
renames and moves, and two operators changing one table at once."""
from __future__ import annotations

import threading
from datetime import datetime
from typing import Any

from test_collections_support import changes, col, create, live_records, seed


def _patch(operator, url: str, cid: int, **body: Any):
    return operator.patch(f"{url}/api/collections/{cid}", json=body)


def test_rename_and_remove_move_every_record_once_and_rebuild_search_text(server, operator, boot, db) -> None:
    made = create(operator, server.url, "leads", [col("email", unique=True), col("note"), col("score", "number")])
    ids = seed(db, boot["org_id"], made["id"], [
        {"email": "Ada@X.io", "note": "met at the fair", "score": 3},
        {"email": "bob@x.io", "score": 4.5},
        {"email": "cy@x.io", "note": "cold"}])
    before = live_records(db, made["id"])
    r = _patch(operator, server.url, made["id"], columns=[
        col("contact", unique=True, rename_from="email"), col("points", "number", rename_from="score"),
        col("source", values=["web", "fair"])])
    assert r.status_code == 200, r.text
    assert [c["name"] for c in r.json()["columns"]] == ["contact", "points", "source"]
    assert all("rename_from" not in c for c in r.json()["columns"])
    after = live_records(db, made["id"])
    assert {i: after[i]["content_json"] for i in ids} == {
        ids[0]: {"contact": "Ada@X.io", "points": 3},
        ids[1]: {"contact": "bob@x.io", "points": 4.5},
        ids[2]: {"contact": "cy@x.io"}}
    assert {i: after[i]["version"] for i in ids} == {i: before[i]["version"] + 1 for i in ids}
    assert after[ids[0]]["identity"] == "ada@x.io"
    # The removed column's words are gone from the search text; keys never were in it.
    assert after[ids[0]]["search_blob"] == "Ada@X.io\n3"
    with db.connection() as conn:
        hits = conn.execute("""SELECT key FROM artifacts WHERE collection_id = %s AND deleted_at IS NULL
                                AND search @@ websearch_to_tsquery('simple', %s)""", (made["id"], "fair")).fetchall()
    assert hits == []
    assert changes(db, made["display_path"]) == ["create", "update"]
    # Each moved record's history says so, at its new version, by the operator who changed the columns.
    for i in ids:
        history = operator.get(f"{server.url}/api/file-changes",
                               params={"display_path": after[i]["display_path"]}).json()["changes"]
        assert [(c["operation"], c["version"], c["actor_name"]) for c in history] == [
            ("update", after[i]["version"], boot["email"])]


def test_swapping_two_column_names_keeps_each_value_with_its_column(server, operator, boot, db) -> None:
    made = create(operator, server.url, "pairs", [col("left"), col("right")])
    [rid] = seed(db, boot["org_id"], made["id"], [{"left": "L", "right": "R"}])
    r = _patch(operator, server.url, made["id"], columns=[col("right", rename_from="left"),
                                                          col("left", rename_from="right")])
    assert r.status_code == 200, r.text
    assert live_records(db, made["id"])[rid]["content_json"] == {"right": "L", "left": "R"}


def test_a_column_becoming_unique_with_repeats_is_409_naming_value_and_records(server, operator, boot, db) -> None:
    made = create(operator, server.url, "people", [col("email"), col("age", "number")])
    ids = seed(db, boot["org_id"], made["id"], [
        {"email": "ann@x.io", "age": 30}, {"email": " ANN@x.io ", "age": 30.0}, {"email": "bo@x.io", "age": 41},
        {"email": "cy@x.io"}, {"email": "Ann@X.io"}])
    before = live_records(db, made["id"])
    r = _patch(operator, server.url, made["id"], columns=[col("email", unique=True), col("age", "number")])
    assert r.status_code == 409
    assert r.json()["error"] == (
        f'column "email" cannot become unique: 3 live records repeat the value "ann@x.io" (records {ids[0]}, '
        f"{ids[1]}, {ids[4]}); make those values distinct or remove the extra records, then make the column unique")
    # Nothing changed: columns, bodies, identities.
    assert operator.get(f"{server.url}/api/collections/{made['id']}").json()["columns"][0]["unique"] is False
    assert live_records(db, made["id"]) == before
    # A number column: 30 and 30.0 are one value.
    r = _patch(operator, server.url, made["id"], columns=[col("email"), col("age", "number", unique=True)])
    assert r.status_code == 409
    assert r.json()["error"].startswith(f'column "age" cannot become unique: 2 live records repeat the value 30 '
                                        f"(records {ids[0]}, {ids[1]})")
    # Renamed and made unique in one change is checked on the values it carries.
    r = _patch(operator, server.url, made["id"], columns=[col("mail", unique=True, rename_from="email")])
    assert r.status_code == 409 and '"mail" cannot become unique' in r.json()["error"]
    with db.transaction() as conn:
        conn.execute("UPDATE artifacts SET deleted_at = now() WHERE collection_id = %s AND key = ANY(%s)",
                     (made["id"], [str(ids[1]), str(ids[4])]))
    r = _patch(operator, server.url, made["id"], columns=[col("mail", unique=True, rename_from="email"),
                                                          col("age", "number")])
    assert r.status_code == 200, r.text
    after = live_records(db, made["id"])
    assert {i: after[i]["identity"] for i in after} == {ids[0]: "ann@x.io", ids[2]: "bo@x.io", ids[3]: "cy@x.io"}
    # Moving the unique flag to another column rebuilds every identity from it.
    r = _patch(operator, server.url, made["id"], columns=[col("mail"), col("age", "number", unique=True)])
    assert r.status_code == 200, r.text
    after = live_records(db, made["id"])
    assert {i: after[i]["identity"] for i in after} == {ids[0]: "30", ids[2]: "41", ids[3]: None}


def test_unknown_rename_from_and_two_unique_columns_are_one_422(server, operator, boot, db) -> None:
    made = create(operator, server.url, "t", [col("a"), col("b")])
    seed(db, boot["org_id"], made["id"], [{"a": "1", "b": "2"}])
    before = live_records(db, made["id"])
    r = _patch(operator, server.url, made["id"], name="t2", columns=[
        col("x", unique=True, rename_from="nope"), col("y", unique=True, rename_from="a"),
        col("z", rename_from="a"), col("b"), col("w", rename_from="b")])
    assert r.status_code == 422
    assert r.json()["problems"] == [
        'columns "x", "y" are all unique: at most one column per collection can be unique',
        'column "x": rename_from "nope" is not a column of this collection; its columns are a, b',
        'column "z": rename_from "a" is already renamed to "y"; a column can be renamed once per change',
        'column "w": rename_from "b" names a column that the new definition still declares; rename it '
        '(drop "b" from the list) or add a new column',
    ]
    one = operator.get(f"{server.url}/api/collections/{made['id']}").json()
    assert one["name"] == "t" and [c["name"] for c in one["columns"]] == ["a", "b"]
    assert live_records(db, made["id"]) == before
    # A name that is not a string is a problem like any other, never a 500.
    for name in (["x"], {"x": 1}):
        r = _patch(operator, server.url, made["id"], columns=[dict(col("a"), name=name), col("b")])
        assert r.status_code == 422, r.text
        assert r.json()["problems"][0].startswith("column 1: name ") and "is not a column name" in r.json()["problems"][0]
    # rename_from belongs to changes only.
    r = operator.post(f"{server.url}/api/collections", json={"name": "n", "purpose": "p",
                                                              "columns": [col("a", rename_from="b")]})
    assert r.status_code == 422
    assert r.json()["problems"] == [
        'column "a": unknown field "rename_from"; a column has name, type, description, required, unique, '
        "values (rename_from applies only when changing the columns of an existing collection)"]


def test_retyping_or_changing_values_leaves_stored_values(server, operator, boot, db) -> None:
    made = create(operator, server.url, "t", [col("n"), col("s", values=["a", "b"])])
    [rid] = seed(db, boot["org_id"], made["id"], [{"n": "42", "s": "b"}])
    r = _patch(operator, server.url, made["id"], columns=[col("n", "number"), col("s", values=["c"])])
    assert r.status_code == 200, r.text
    rec = live_records(db, made["id"])[rid]
    assert rec["content_json"] == {"n": "42", "s": "b"} and rec["version"] == 1


def test_renaming_the_table_moves_record_paths(server, operator, boot, db) -> None:
    made = create(operator, server.url, "old-name")
    ids = seed(db, boot["org_id"], made["id"], [{"title": "a"}, {"title": "b"}])
    r = _patch(operator, server.url, made["id"], name="new-name")
    assert r.status_code == 200 and r.json()["display_path"].endswith("/collections/new-name")
    paths = {i: rec["display_path"] for i, rec in live_records(db, made["id"]).items()}
    assert paths == {i: f"org/{boot['org_id']}/collections/new-name/{i}" for i in ids}
    assert changes(db, made["display_path"]) == ["create", "move"]
    assert changes(db, f"org/{boot['org_id']}/collections/new-name") == ["create"]
    assert create(operator, server.url, "old-name")["name"] == "old-name"


def test_two_operators_renaming_columns_at_once_serialise(server, operator, boot, db) -> None:
    """Both send a rename of the same column from the schema they loaded. The row lock makes the
    second see the first's result: one wins, the other is a 422 naming the unknown rename_from, and
    every record holds the value once, under the winner's name."""
    cols = [col("title"), col("body")] + [col(f"extra{i}") for i in range(6)]
    made = create(operator, server.url, "race", cols)
    bodies = [{"title": f"t{i}", "body": f"b{i}", "extra0": "x"} for i in range(3000)]
    seed(db, boot["org_id"], made["id"], bodies)
    second = server.session(basic=(boot["email"], boot["password"]))
    results: dict[str, Any] = {}
    barrier = threading.Barrier(2)

    def rename(session, target: str) -> None:
        new = [col(target, rename_from="title")] + cols[1:]
        barrier.wait()
        results[target] = session.patch(f"{server.url}/api/collections/{made['id']}", json={"columns": new})

    threads = [threading.Thread(target=rename, args=(operator, "headline")),
               threading.Thread(target=rename, args=(second, "subject"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    statuses = sorted(r.status_code for r in results.values())
    assert statuses == [200, 422], {k: r.text for k, r in results.items()}
    winner = next(k for k, r in results.items() if r.status_code == 200)
    loser = next(k for k, r in results.items() if r.status_code == 422)
    assert results[loser].json()["problems"] == [
        f'column "{loser}": rename_from "title" is not a column of this collection; its columns are '
        f"{winner}, body, " + ", ".join(f"extra{i}" for i in range(6))]
    schema = operator.get(f"{server.url}/api/collections/{made['id']}").json()["columns"]
    assert [c["name"] for c in schema][:2] == [winner, "body"]
    records = live_records(db, made["id"])
    assert len(records) == 3000
    assert all(set(r["content_json"]) == {winner, "body", "extra0"} for r in records.values())
    assert sorted(r["content_json"][winner] for r in records.values()) == sorted(b["title"] for b in bodies)
    assert {r["version"] for r in records.values()} == {2}


def test_two_operators_renaming_different_columns_each_from_the_latest_schema(server, operator, boot, db) -> None:
    """Two columns editors, each sending the whole list it loaded with If-Match: the one that loses
    the race gets 412 instead of silently undoing the other's rename, reloads and applies its own
    on top. Every record ends with both renames and each value once."""
    made = create(operator, server.url, "race2", [col("a"), col("b")])
    seed(db, boot["org_id"], made["id"], [{"a": str(i), "b": str(-i)} for i in range(500)])
    second = server.session(basic=(boot["email"], boot["password"]))
    barrier = threading.Barrier(2)
    out: list[int] = []

    def rename(session, source: str, target: str) -> None:
        barrier.wait()
        for _ in range(20):  # retry from the current schema, as a columns editor reloading would
            loaded = session.get(f"{server.url}/api/collections/{made['id']}")
            current = loaded.json()["columns"]
            new = [dict(c, name=target, rename_from=source) if c["name"] == source else c for c in current]
            r = session.patch(f"{server.url}/api/collections/{made['id']}", json={"columns": new},
                              headers={"If-Match": loaded.headers["ETag"]})
            if r.status_code == 200:
                out.append(200)
                return
            assert r.status_code == 412, r.text
            assert "changed since you loaded it" in r.json()["error"]

    threads = [threading.Thread(target=rename, args=(operator, "a", "alpha")),
               threading.Thread(target=rename, args=(second, "b", "beta"))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert out == [200, 200]
    schema = operator.get(f"{server.url}/api/collections/{made['id']}").json()["columns"]
    assert sorted(c["name"] for c in schema) == ["alpha", "beta"]
    records = live_records(db, made["id"])
    assert all(r["content_json"] == {"alpha": str(i - 1), "beta": str(-(i - 1))} for i, r in records.items())
    assert {r["version"] for r in records.values()} == {3}


def test_records_a_schema_change_rewrites_show_who_and_when_so_since_finds_them(server, operator, boot, db) -> None:
    made = create(operator, server.url, "feed", [col("title"), col("tag")])
    ids = seed(db, boot["org_id"], made["id"], [{"title": "a", "tag": "x"}, {"title": "b"}, {"tag": "y"}])
    with db.connection() as conn:
        mark = conn.execute("SELECT clock_timestamp() AS t").fetchone()["t"].isoformat()
    r = _patch(operator, server.url, made["id"], columns=[col("headline", rename_from="title"), col("tag")])
    assert r.status_code == 200, r.text
    base = f"{server.url}/api/collections/{made['id']}/records"
    out = operator.get(base, params={"since": mark}).json()
    # the two records whose body moved a key; the third had no title and was not rewritten
    assert [(rec["id"], rec["version"], rec["updated_by"]) for rec in out["records"]] == [
        (ids[0], 2, boot["email"]), (ids[1], 2, boot["email"])]
    assert all(datetime.fromisoformat(rec["updated_at"]) >= datetime.fromisoformat(mark) for rec in out["records"])
    untouched = operator.get(f"{base}/{ids[2]}").json()
    assert (untouched["version"], untouched["updated_by"]) == (1, "seed")


def _spaced(label: str, position: int, item: str, trimmed: str) -> str:
    return (f'{label}: values item {position} "{item}" starts or ends with a space, which a list of the choices '
            f'does not show, so every record would have to repeat it unseen; remove the spaces: "{trimmed}"')


def _blank(label: str, position: int, shown: str) -> str:
    return (f'{label}: values item {position} is blank ({shown}): a listed value is a choice that records hold '
            'as it is written, so it needs visible characters, such as "new"; type one or remove the item')


def test_a_values_item_of_spaces_only_or_with_spaces_around_it_is_refused_with_every_other_problem(
        server, operator, service, boot, db) -> None:
    """A values item " " was accepted while a blank description was refused, and " won" was kept
    with its space: a record then had to send the space, which the listed choices ("expected one of
    new,  won") do not show. Both are refused, named by column and item, beside the definition's
    other problems, over POST and PATCH alike, and nothing changes. A table stored with such a
    value before still reads: the record routes and the agents' record tools keep working on it."""
    url = server.url
    r = operator.post(f"{url}/api/collections", json={"name": "stages", "purpose": "deal stages", "columns": [
        col("status", values=["new", " "]), col("stage", "array", values=[" won", "lost\u00a0"]),
        {"name": "note", "type": "text", "description": "  "}]})
    assert r.status_code == 422, r.text
    assert r.json()["problems"] == [
        _blank('column "status"', 2, '" "'),
        _spaced('column "stage"', 1, " won", "won"),
        _spaced('column "stage"', 2, "lost\u00a0", "lost"),
        'column "note": description is required: a sentence, at most 200 characters, that tells agents what '
        "the column holds"]
    assert "stages" not in [c["name"] for c in operator.get(f"{url}/api/collections").json()["collections"]]

    made = create(operator, url, "deals", [col("status", values=["new", "won"])], guild_id=boot["guild_id"])
    r = operator.patch(f"{url}/api/collections/{made['id']}", json={"columns": [col("status", values=["new", "\t "])]})
    assert r.status_code == 422, r.text
    assert r.json()["problems"] == [_blank('column "status"', 2, '"\\t "')]
    assert operator.get(f"{url}/api/collections/{made['id']}").json()["columns"][0]["values"] == ["new", "won"]

    # Stored before the rule: it still reads, takes records, and keeps its values through a change of
    # its columns that sends them back (the web editor sends every column); a new one is refused.
    with db.transaction() as conn:
        conn.execute("UPDATE artifact_collections SET columns = jsonb_set(columns, '{0,values}', %s::jsonb)"
                     " WHERE id = %s", ('["new", " won", " "]', made["id"]))
    r = operator.post(f"{url}/api/collections/{made['id']}/records", json={"body": {"status": " won"}})
    assert r.status_code == 201, r.text
    r = service.post(f"{url}/api/agents/{boot['agent_id']}/tools/record_add",
                     json={"collection": "deals", "body": {"status": "new"}})
    assert r.status_code == 200, r.text
    r = service.post(f"{url}/api/agents/{boot['agent_id']}/tools/record_list", json={"collection": "deals"})
    assert r.status_code == 200 and r.json()["total"] == 2, r.text
    assert operator.patch(f"{url}/api/collections/{made['id']}", json={"purpose": "open deals"}).status_code == 200
    r = operator.patch(f"{url}/api/collections/{made['id']}",
                       json={"columns": [col("status", description="pipeline state", values=["new", " won", " "])]})
    assert r.status_code == 200, r.text
    r = operator.patch(f"{url}/api/collections/{made['id']}",
                       json={"columns": [col("status", values=["new", " won", " ", "lost "])]})
    assert r.status_code == 422, r.text
    assert r.json()["problems"] == [_spaced('column "status"', 4, "lost ", "lost")]
    # Kept in the column that listed it (or the one renamed from it), not given to another.
    r = operator.patch(f"{url}/api/collections/{made['id']}",
                       json={"columns": [col("stage", values=["new", " won", " "], rename_from="status"),
                                         col("other", values=["x", " won"])]})
    assert r.status_code == 422, r.text
    assert r.json()["problems"] == [_spaced('column "other"', 2, " won", "won")]

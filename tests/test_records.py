"""record_add, record_update and record_remove through the agent tool route and the operator's HTTP
routes: the exact problem lines, ids, the unique identity merge, warnings, caps, provenance and
events, access, and 32 simultaneous adds of one unique value."""
from __future__ import annotations

import json
import threading
from typing import Any

import psycopg
import pytest

from store import admin, records
from store.grants import collection_for_agent
from store.agents import AgentCall, load_agent
from test_records_support import LEADS, PEOPLE, bulk_records, call_tool, grant, make_collection, ok


@pytest.fixture
def leads(db, boot) -> dict[str, Any]:
    """The specification's example table, owned by the bootstrap guild, so its agent has write."""
    return make_collection(db, boot["org_id"], "leads", LEADS, guild_id=boot["guild_id"])


@pytest.fixture
def people(db, boot) -> dict[str, Any]:
    return make_collection(db, boot["org_id"], "people", PEOPLE, guild_id=boot["guild_id"])


def add(server, service, boot, body: dict[str, Any], collection: str = "leads"):
    return call_tool(server, service, boot["agent_id"], "record_add", collection=collection, body=body)


def live_count(db, coll) -> int:
    with db.connection() as conn:
        return conn.execute("SELECT count(*) AS n FROM artifacts WHERE collection_id = %s AND deleted_at IS NULL",
                            (coll["id"],)).fetchone()["n"]


def changes(db, path: str) -> list[dict[str, Any]]:
    with db.connection() as conn:
        return conn.execute("SELECT operation, version, actor_type, actor_name, tool_name FROM file_changes"
                            " WHERE display_path = %s ORDER BY id", (path,)).fetchall()


# --- record_add ----------------------------------------------------------------------------------

def test_record_add_returns_the_record_with_its_id_and_meta(server, db, boot, service, leads) -> None:
    out = ok(add(server, service, boot, {"email": "ada@example.com", "status": "new", "score": 7.5}))
    record = out["record"]
    assert "note" not in out
    assert record["id"] == 1 and record["collection"] == "leads"
    assert record["email"] == "ada@example.com" and record["status"] == "new" and record["score"] == 7.5
    assert record["signed_up_at"] is None  # every declared column is there, null when empty
    assert record["version"] == 1 and record["updated_by"] == "Scout"
    assert record["created_at"].endswith("Z") and record["updated_at"].endswith("Z")
    assert record["created_at"] == record["updated_at"]  # a new record was not changed after its creation
    assert "display_path" not in record  # the API adds it; tools do not
    assert ok(add(server, service, boot, {"email": "bob@example.com"}))["record"]["id"] == 2
    with db.connection() as conn:
        row = conn.execute("SELECT key, level, display_path, content_json, identity, search_blob FROM artifacts"
                           " WHERE collection_id = %s AND key = '1'", (leads["id"],)).fetchone()
    assert row["display_path"] == f"org/{boot['org_id']}/collections/leads/1"
    assert row["content_json"] == {"email": "ada@example.com", "status": "new", "score": 7.5}
    assert row["identity"] == "ada@example.com"
    assert "email" not in row["search_blob"].split() and "ada@example.com" in row["search_blob"]
    # the record's history starts on its own path (record_add's event is the collection's)
    history = changes(db, f"org/{boot['org_id']}/collections/leads/1")
    assert [(c["operation"], c["version"], c["actor_type"], c["tool_name"]) for c in history] == [
        ("create", 1, "agent", "record_add")]


def test_record_add_reports_every_problem_in_the_specifications_words(server, db, boot, service, leads) -> None:
    r = add(server, service, boot, {"email": "ada@example.com", "status": "pending", "score": "42", "notes": "hi"})
    assert r.status_code == 422
    assert r.json()["error"] == (
        'record rejected\n'
        '- column "status": expected one of new, contacted, won, lost; got "pending"\n'
        '- column "score": expected number; got "42"\n'
        '- column "notes": unknown column; declared columns are email, status, score, signed_up_at')
    assert r.json()["problems"] == [
        'column "status": expected one of new, contacted, won, lost; got "pending"',
        'column "score": expected number; got "42"',
        'column "notes": unknown column; declared columns are email, status, score, signed_up_at']
    assert live_count(db, leads) == 0
    with db.connection() as conn:
        assert conn.execute("SELECT next_id FROM artifact_collections WHERE id = %s",
                            (leads["id"],)).fetchone()["next_id"] == 1
        assert conn.execute("SELECT count(*) AS n FROM file_changes").fetchone()["n"] == 0


def test_every_type_rule_is_a_problem_line_and_there_is_no_coercion(server, db, boot, service, people) -> None:
    r = add(server, service, boot, {
        "city": 12, "stage": "old", "age": "42", "met_at": "2024-05-01T09:30:00", "vip": "true",
        "tags": ["a", "a", "b" * 201, ""], "langs": ["en", "es"]}, collection="people")
    assert r.status_code == 422
    assert r.json()["problems"] == [
        'column "city": expected text; got 12',
        'column "stage": expected one of new, active, done; got "old"',
        'column "age": expected number; got "42"',
        'column "met_at": datetime without a timezone; got "2024-05-01T09:30:00"; add Z or an offset, such as'
        ' 2024-05-01T09:30:00+02:00',
        'column "vip": expected true or false; got "true"',
        'column "tags": expected distinct items; "a" appears twice; item 3 is 201 characters long; at most 200'
        ' are allowed; expected a list of distinct non-empty strings; item 4 is ""',
        'column "langs": expected items from en, fr, de; got "es"',
        'column "name": missing required column']
    r = add(server, service, boot, {"name": "x", "met_at": "next tuesday", "tags": "a", "age": True},
            collection="people")
    assert r.json()["problems"] == [
        'column "met_at": unparsable datetime; got "next tuesday"; send ISO 8601 with a timezone, such as'
        ' 2024-05-01T09:30:00Z',
        'column "tags": expected a list of distinct non-empty strings; got "a"',
        'column "age": expected number; got true']
    # Past what a JSON reader holds: refused alike, written with an exponent or as 401 digits.
    for big in ("1e400", "1" + "0" * 400, "-1e400"):
        r = service.post(f"{server.url}/api/agents/{boot['agent_id']}/tools/record_add",
                         data=f'{{"collection": "people", "body": {{"name": "x", "age": {big}}}}}',
                         headers={"Content-Type": "application/json"})
        assert r.status_code == 422 and r.json()["problems"][0].startswith(
            'column "age": expected a number no larger than 1.8e308 either way'), (big, r.text)
    assert live_count(db, people) == 0


def test_datetimes_are_stored_in_utc_and_an_empty_list_is_a_value(server, boot, service, people) -> None:
    record = ok(add(server, service, boot, {"name": "Ada", "met_at": "2024-05-01T11:30:00+02:00", "tags": [],
                                            "vip": False, "age": 36}, collection="people"))["record"]
    assert record["met_at"] == "2024-05-01T09:30:00Z"
    assert record["tags"] == [] and record["vip"] is False and record["age"] == 36


def test_ids_start_at_one_and_are_never_reused(server, db, boot, service, operator, leads) -> None:
    for i in range(3):
        ok(add(server, service, boot, {"email": f"u{i}@example.com"}))
    assert ok(call_tool(server, service, boot["agent_id"], "record_remove", collection="leads", id=3)) == {"removed": 3}
    assert ok(add(server, service, boot, {"email": "after-remove@example.com"}))["record"]["id"] == 4
    cleared = ok(operator.delete(f"{server.url}/api/collections/{leads['id']}/records"))
    assert cleared == {"cleared": 3, "collection": "leads"}
    assert live_count(db, leads) == 0
    assert ok(add(server, service, boot, {"email": "after-clear@example.com"}))["record"]["id"] == 5
    assert [c["operation"] for c in changes(db, f"org/{boot['org_id']}/collections/leads")] == ["clear"]
    assert [c["operation"] for c in changes(db, f"org/{boot['org_id']}/collections/leads/5")] == ["create"]


# --- the unique column ---------------------------------------------------------------------------

def test_an_add_with_an_existing_unique_value_merges_into_that_record(server, db, boot, service, operator,
                                                                      leads) -> None:
    ok(add(server, service, boot, {"email": "Ada@Example.com", "status": "new", "score": 1}))
    out = ok(add(server, service, boot, {"email": "  ada@example.COM ", "status": "won"}))
    assert out["note"] == "merged into existing record 1"
    assert out["record"]["id"] == 1 and out["record"]["status"] == "won" and out["record"]["score"] == 1
    assert out["record"]["email"] == "  ada@example.COM " and out["record"]["version"] == 2
    assert live_count(db, leads) == 1
    # the HTTP API says merged: <id>, with 200 rather than 201
    r = operator.post(f"{server.url}/api/collections/{leads['id']}/records",
                      json={"body": {"email": "ADA@example.com", "score": 9}})
    assert r.status_code == 200
    assert r.json()["merged"] == 1 and r.json()["record"]["score"] == 9 and r.json()["record"]["version"] == 3
    r = operator.post(f"{server.url}/api/collections/{leads['id']}/records", json={"body": {"email": "new@example.com"}})
    assert r.status_code == 201 and r.json()["merged"] is None and r.json()["record"]["id"] == 2
    assert r.json()["record"]["display_path"] == f"org/{boot['org_id']}/collections/leads/2"
    # a merge is an update of that record: provenance on the record path
    assert [c["operation"] for c in changes(db, f"org/{boot['org_id']}/collections/leads/1")] == [
        "create", "update", "update"]


def test_a_large_number_has_one_identity_however_it_was_written(server, db, boot, operator) -> None:
    """1e23 sent as JSON is a float whose binary value is 99999999999999991611392, while
    PostgreSQL stores the 100000000000000000000000 it was written as. The identity came from the
    binary value on a write and from the stored number once read back, so the same number merged
    on one add and made a second record after any change of the columns, or when written out."""
    numbered = [{"name": "n", "type": "number", "description": "a big number", "required": True, "unique": True}]
    coll = make_collection(db, boot["org_id"], "big", numbered, guild_id=boot["guild_id"])
    url = f"{server.url}/api/collections/{coll['id']}/records"

    def post(raw: str):
        return operator.post(url, data=raw, headers={"Content-Type": "application/json"})

    assert post('{"body": {"n": 1e23}}').status_code == 201
    assert post('{"body": {"n": 100000000000000000000000}}').json()["merged"] == 1
    r = operator.patch(f"{server.url}/api/collections/{coll['id']}",
                       json={"columns": [dict(numbered[0], description="still a big number")]})
    assert r.status_code == 200, r.text
    assert post('{"body": {"n": 1e23}}').json()["merged"] == 1
    assert live_count(db, coll) == 1
    found = operator.get(url, params={"query": "100000000000000000000000"}).json()
    assert [rec["id"] for rec in found["records"]] == [1]


def test_a_unique_value_too_long_to_index_is_a_problem_not_a_500(server, db, boot, operator, service,
                                                                 leads, people) -> None:
    """The live identity index is a btree, and PostgreSQL refuses an entry past about 2 700 bytes
    with an internal error. A longer unique value is a problem listed with the others, and a
    column whose records hold one cannot become unique: a 409 naming them, nothing changed."""
    r = add(server, service, boot, {"email": "x" * 2001, "status": "pending"})
    assert r.status_code == 422, r.text
    assert r.json()["problems"] == [
        'column "email": a unique value is at most 2000 bytes once normalised (the store indexes it whole); '
        "this one is 2001 bytes; send a shorter value",
        'column "status": expected one of new, contacted, won, lost; got "pending"']
    assert live_count(db, leads) == 0
    ok(add(server, service, boot, {"email": "é" * 1000}))   # 2 000 bytes in UTF-8: the most there is
    # the city column of people holds a long value; making it unique names the record
    ok(add(server, service, boot, {"name": "Ada", "city": "c" * 3000}, collection="people"))
    columns = [dict(c, unique=(c["name"] == "city")) for c in PEOPLE]
    r = operator.patch(f"{server.url}/api/collections/{people['id']}", json={"columns": columns})
    assert r.status_code == 409, r.text
    assert "longer than a unique value may be (2000 bytes once normalised; records 1)" in r.json()["error"]
    described = operator.get(f"{server.url}/api/collections/{people['id']}").json()
    assert [c["name"] for c in described["columns"] if c["unique"]] == ["name"]


def test_a_body_of_thousands_of_unknown_columns_is_told_of_a_hundred_and_the_count(server, db, boot, operator,
                                                                                  leads) -> None:
    """Every problem at once is for a body a person or a model mends: 100 000 unknown keys (2 MB)
    were answered line by line with 32 MB, which a client that does not read held a worker with."""
    body = {f"k{i}": i for i in range(100_000)}
    r = operator.post(f"{server.url}/api/collections/{leads['id']}/records", json={"body": body}, timeout=60)
    assert r.status_code == 422 and len(r.content) < 20_000, (r.status_code, len(r.content))
    problems = r.json()["problems"]
    assert len(problems) == 101 and problems[0].startswith('column "k0": unknown column')
    assert problems[-1] == ("99901 more problems not listed here; mend these and send it again to see the rest")
    assert live_count(db, leads) == 0


def test_forty_thousand_columns_are_refused_at_once(server, operator) -> None:
    """Duplicate names were counted with list.count per name: 40 000 columns took 73 s of a
    worker's CPU. They are counted once now, and the answer lists a hundred problems."""
    columns = [{"name": f"c{i}", "type": "text"} for i in range(40_000)]
    r = operator.post(f"{server.url}/api/collections", json={"name": "wide", "purpose": "p", "columns": columns},
                      timeout=20)
    assert r.status_code == 422
    assert r.json()["problems"][0] == "a collection has at most 64 columns; got 40000"
    assert len(r.json()["problems"]) == 101


def test_a_removed_records_unique_value_is_free_again(server, boot, service, leads) -> None:
    ok(add(server, service, boot, {"email": "ada@example.com"}))
    ok(call_tool(server, service, boot["agent_id"], "record_remove", collection="leads", id=1))
    out = ok(add(server, service, boot, {"email": "ada@example.com"}))
    assert out["record"]["id"] == 2 and "note" not in out


def test_moving_the_unique_value_onto_another_record_is_409_naming_it(server, db, boot, service, leads) -> None:
    ok(add(server, service, boot, {"email": "ada@example.com"}))
    ok(add(server, service, boot, {"email": "bob@example.com"}))
    r = call_tool(server, service, boot["agent_id"], "record_update", collection="leads", id=2,
                  body={"email": "ADA@example.com"})
    assert r.status_code == 409
    assert r.json()["error"] == ('column "email": "ADA@example.com" is already held by record 1 of leads; a unique'
                                 ' value belongs to one record, so update record 1 instead, or choose another value')
    with db.connection() as conn:
        row = conn.execute("SELECT content_json, version FROM artifacts WHERE collection_id = %s AND key = '2'",
                           (leads["id"],)).fetchone()
    assert row["content_json"] == {"email": "bob@example.com"} and row["version"] == 1


def test_thirty_two_simultaneous_adds_of_one_value_make_one_record_and_31_merges(db, boot, leads) -> None:
    with db.connection() as conn:
        agent = load_agent(conn, boot["agent_id"], {boot["org_id"]})
    start = threading.Barrier(32)
    results: list[Any] = []
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            with psycopg.connect(db.conninfo, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
                start.wait()
                with conn.transaction():
                    call = AgentCall.open(conn, agent, tool="record_add")
                    coll = collection_for_agent(conn, agent, "leads", "write", lock=True)
                    results.append(records.record_add(conn, coll, {"email": "Same@Example.com", "score": i},
                                                      call.actor))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 32
    assert sum(1 for r in results if r.merged is None) == 1
    assert sorted(r.merged for r in results if r.merged is not None) == [1] * 31
    assert live_count(db, leads) == 1
    with db.connection() as conn:
        row = conn.execute("SELECT version FROM artifacts WHERE collection_id = %s", (leads["id"],)).fetchone()
        assert row["version"] == 32
        assert conn.execute("SELECT next_id FROM artifact_collections WHERE id = %s",
                            (leads["id"],)).fetchone()["next_id"] == 2


# --- record_update and record_remove -------------------------------------------------------------

def test_record_update_merges_a_patch_and_null_clears(server, db, boot, service, leads) -> None:
    ok(add(server, service, boot, {"email": "ada@example.com", "status": "new", "score": 3}))
    out = ok(call_tool(server, service, boot["agent_id"], "record_update", collection="leads", id=1,
                       body={"status": "won", "score": None}))
    assert "warnings" not in out
    record = out["record"]
    assert (record["email"], record["status"], record["score"], record["version"]) == ("ada@example.com", "won", None, 2)
    with db.connection() as conn:
        assert conn.execute("SELECT content_json FROM artifacts WHERE collection_id = %s",
                            (leads["id"],)).fetchone()["content_json"] == {"email": "ada@example.com", "status": "won"}
    assert [(c["operation"], c["version"]) for c in changes(db, f"org/{boot['org_id']}/collections/leads/1")] == [
        ("create", 1), ("update", 2)]
    r = call_tool(server, service, boot["agent_id"], "record_update", collection="leads", id=1,
                  body={"email": None, "score": "high"})
    assert r.status_code == 422
    assert r.json()["problems"] == ['column "email": required, so it cannot be cleared (null); give it a value',
                                    'column "score": expected number; got "high"']
    r = call_tool(server, service, boot["agent_id"], "record_update", collection="leads", id=99, body={"score": 1})
    assert r.status_code == 404
    assert r.json()["error"] == ("unknown record 99 in collection leads: no live record has that id;"
                                 " record_list or record_search find ids")


def test_problems_in_untouched_columns_come_back_as_warnings(server, db, boot, service, operator, leads) -> None:
    ok(add(server, service, boot, {"email": "ada@example.com", "status": "contacted", "score": 3}))
    # The operator narrows the values list and retypes score: stored values stay as they are.
    columns = [dict(c) for c in LEADS]
    columns[1]["values"] = ["new", "won", "lost"]
    columns[2]["type"] = "text"
    with db.transaction() as conn:
        conn.execute("UPDATE artifact_collections SET columns = %s WHERE id = %s", (json.dumps(columns), leads["id"]))
    out = ok(call_tool(server, service, boot["agent_id"], "record_update", collection="leads", id=1,
                       body={"signed_up_at": "2024-01-02T03:04:05Z"}))
    assert out["warnings"] == ['column "status": expected one of new, won, lost; got "contacted"',
                               'column "score": expected text; got 3']
    assert out["record"]["signed_up_at"] == "2024-01-02T03:04:05Z" and out["record"]["version"] == 2
    r = operator.patch(f"{server.url}/api/collections/{leads['id']}/records/1", json={"body": {"status": "won"}})
    assert ok(r)["warnings"] == ['column "score": expected text; got 3']


def test_record_remove_soft_deletes_and_the_record_is_gone_for_readers(server, db, boot, service, operator,
                                                                       leads) -> None:
    ok(add(server, service, boot, {"email": "ada@example.com"}))
    assert ok(call_tool(server, service, boot["agent_id"], "record_remove", collection="leads", id=1)) == {"removed": 1}
    r = call_tool(server, service, boot["agent_id"], "record_remove", collection="leads", id=1)
    assert r.status_code == 404
    r = operator.get(f"{server.url}/api/collections/{leads['id']}/records/1")
    assert r.status_code == 404
    with db.connection() as conn:
        row = conn.execute("SELECT deleted_at, version FROM artifacts WHERE collection_id = %s", (leads["id"],)).fetchone()
    assert row["deleted_at"] is not None and row["version"] == 2
    assert [(c["operation"], c["version"]) for c in changes(db, f"org/{boot['org_id']}/collections/leads/1")] == [
        ("create", 1), ("delete", 2)]


def test_writes_notify_the_collection_path_on_add_and_the_record_path_after(server, db, boot, service, leads) -> None:
    with psycopg.connect(db.conninfo, autocommit=True) as listener:
        listener.execute("LISTEN \"guild.files.changed\"")
        ok(add(server, service, boot, {"email": "ada@example.com"}))
        ok(call_tool(server, service, boot["agent_id"], "record_update", collection="leads", id=1, body={"score": 2}))
        ok(call_tool(server, service, boot["agent_id"], "record_remove", collection="leads", id=1))
        add(server, service, boot, {"email": 5})  # rejected: no event
        events = [json.loads(n.payload) for n in listener.notifies(timeout=1.0, stop_after=4)]
    base = f"org/{boot['org_id']}/collections/leads"
    assert [(e["display_path"], e["operation"], e["version"]) for e in events] == [
        (base, "create", 1), (f"{base}/1", "update", 2), (f"{base}/1", "delete", 3)]


def test_a_new_records_history_starts_on_its_own_path_and_a_merge_is_announced_for_the_collection(
        server, db, boot, service, operator, leads) -> None:
    base = f"org/{boot['org_id']}/collections/leads"
    ok(add(server, service, boot, {"email": "ada@example.com"}))
    # The Databases page's provenance strip looks the record up by its display path.
    r = operator.get(f"{server.url}/api/file-changes", params={"display_path": f"{base}/1"})
    assert [(c["operation"], c["version"]) for c in r.json()["changes"]] == [("create", 1)]
    with psycopg.connect(db.conninfo, autocommit=True) as listener:
        listener.execute("LISTEN \"guild.files.changed\"")
        out = ok(add(server, service, boot, {"email": "ADA@example.com", "score": 3}))
        assert out["note"] == "merged into existing record 1"
        events = [json.loads(n.payload) for n in listener.notifies(timeout=1.0, stop_after=2)]
    assert sorted((e["display_path"], e["operation"]) for e in events) == [
        (base, "update"), (f"{base}/1", "update")]


# --- access and caps -----------------------------------------------------------------------------

def test_read_access_refuses_writes_and_no_access_reads_as_unknown(server, db, boot, service) -> None:
    shared = make_collection(db, boot["org_id"], "shared", LEADS)
    make_collection(db, boot["org_id"], "secret", LEADS)
    grant(db, shared["id"], agent_id=boot["agent_id"], mode="read")
    r = add(server, service, boot, {"email": "ada@example.com"}, collection="shared")
    assert r.status_code == 403 and "collection shared is read-only for this agent" in r.json()["error"]
    assert ok(call_tool(server, service, boot["agent_id"], "record_list", collection="shared")) == {
        "total": 0, "records": []}
    for name in ("secret", "nope"):
        r = add(server, service, boot, {"email": "ada@example.com"}, collection=name)
        assert r.status_code == 404 and r.json()["error"] == f"unknown collection {name}"


def test_ten_thousand_live_records_is_the_cap(server, db, boot, service, leads) -> None:
    bulk_records(db, leads, 10_000)
    r = add(server, service, boot, {"email": "one-more@example.com"})
    assert r.status_code == 422
    assert r.json()["error"].startswith("collection leads already holds 10000 live records, the most a collection")
    # a merge is not a new record, so it still goes through at the cap
    out = ok(add(server, service, boot, {"email": "user5@example.com", "status": "won"}))
    assert out["note"] == "merged into existing record 5"
    ok(call_tool(server, service, boot["agent_id"], "record_remove", collection="leads", id=1))
    assert ok(add(server, service, boot, {"email": "one-more@example.com"}))["record"]["id"] == 10_001


def test_more_than_32_kb_of_value_text_is_a_rejected_record(server, db, boot, service, people) -> None:
    """The same 422 and shape as when the size is one of several problems (below)."""
    # 16 500 characters, but 33 000 bytes of UTF-8: the cap is on bytes of indexed text
    r = add(server, service, boot, {"name": "Ada", "city": "é" * 16_500}, collection="people")
    assert r.status_code == 422, r.text
    assert r.json()["error"].startswith("record rejected\n- indexed value text: 33004 bytes; at most 32768 (32 KB)")
    assert r.json()["problems"] == [r.json()["error"].split("\n- ", 1)[1]]
    assert live_count(db, people) == 0
    assert ok(add(server, service, boot, {"name": "Ada", "city": "x" * 20_000}, collection="people"))["record"]["id"] == 1


def test_a_body_over_the_cap_with_other_problems_names_them_all_in_one_422(server, db, boot, service, people) -> None:
    """All problems at once: a wrong type beside too much text is one answer naming both, not a
    422 for the type and then, once that is mended, a 413 for the size."""
    r = add(server, service, boot, {"name": "Ada", "city": "x" * 33_000, "age": "old"}, collection="people")
    assert r.status_code == 422, r.text
    problems = r.json()["problems"]
    assert len(problems) == 2 and problems[0].startswith('column "age": ')
    assert problems[1].startswith("indexed value text: 33004 bytes; at most 32768 (32 KB)")
    assert live_count(db, people) == 0
    # The same in a change of a record: the merged record would be over the cap.
    ok(add(server, service, boot, {"name": "Ada", "city": "x" * 25_000}, collection="people"))
    r = call_tool(server, service, boot["agent_id"], "record_update", collection="people", id=1,
                  body={"stage": "gone", "tags": [f"{i:03}" + "y" * 197 for i in range(40)]})
    assert r.status_code == 422, r.text
    assert [p.split(":")[0] for p in r.json()["problems"]] == ['column "stage"', "indexed value text"]


# --- the operator's routes -----------------------------------------------------------------------

def test_a_record_change_with_if_match_is_refused_when_the_record_moved_on(server, db, boot, operator,
                                                                           leads) -> None:
    """Two people editing one record through the API: the second, holding an older version,
    gets 412 and the first one's change stands (no silent lost update)."""
    base = f"{server.url}/api/collections/{leads['id']}/records"
    rec = ok(operator.post(base, json={"body": {"email": "ada@example.com", "status": "new"}}), 201)["record"]
    url = f"{base}/{rec['id']}"
    first = ok(operator.patch(url, json={"body": {"status": "won"}}, headers={"If-Match": f'"{rec["version"]}"'}))
    assert first["record"]["version"] == rec["version"] + 1
    r = operator.patch(url, json={"body": {"status": "lost"}}, headers={"If-Match": str(rec["version"])})
    assert r.status_code == 412, r.text
    assert f"is at version {rec['version'] + 1}, not {rec['version']}" in r.json()["error"]
    assert ok(operator.get(url))["status"] == "won"
    r = operator.patch(url, json={"body": {"status": "lost"}}, headers={"If-Match": "soon"})
    assert r.status_code == 422 and "If-Match must be the record's version number" in r.json()["error"]
    # Without If-Match a change is unconditional, as record_update is for agents.
    assert ok(operator.patch(url, json={"body": {"status": "lost"}}))["record"]["status"] == "lost"


def test_operator_routes_read_write_and_answer_other_organisations_as_unknown(server, db, boot, operator,
                                                                              leads) -> None:
    base = f"{server.url}/api/collections/{leads['id']}/records"
    r = operator.post(base, json={"body": {"email": "ada@example.com", "status": "pending"}})
    assert r.status_code == 422 and r.json()["problems"] == [
        'column "status": expected one of new, contacted, won, lost; got "pending"']
    r = operator.post(base, json={"email": "ada@example.com"})
    assert r.status_code == 422 and "body" in r.json()["error"]
    created = ok(operator.post(base, json={"body": {"email": "ada@example.com"}}), 201)["record"]
    assert created["updated_by"] == "ada@example.com"
    got = ok(operator.get(f"{base}/1"))
    assert got == created
    patched = ok(operator.patch(f"{base}/1", json={"body": {"score": 4}}))
    assert patched["record"]["score"] == 4 and patched["warnings"] == []
    assert [c["actor_type"] for c in changes(db, f"org/{boot['org_id']}/collections/leads/1")] == ["user", "user"]
    assert ok(operator.delete(f"{base}/1")) == {"removed": 1}
    assert operator.get(f"{base}/1").status_code == 404
    other = make_collection(db, boot["org_id"], "elsewhere", LEADS)
    stranger = admin.bootstrap(db, org_name="Other")
    theirs = make_collection(db, stranger["org_id"], "leads", LEADS)
    for url in (f"{server.url}/api/collections/{theirs['id']}/records", f"{server.url}/api/collections/999999/records"):
        r = operator.get(url)
        assert r.status_code == 404 and r.json()["error"].startswith("unknown collection")
        assert operator.post(url, json={"body": {"email": "x@example.com"}}).status_code == 404
    assert ok(operator.get(f"{server.url}/api/collections/{other['id']}/records"))["total"] == 0
    # the service token does not reach the operator's routes
    service = server.session(bearer=boot["service_token"])
    assert service.get(base).status_code == 404

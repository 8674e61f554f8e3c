"""record_search and record_list: the text search, every where type, order, since, paging totals and
the hint of a narrowed list that found nothing, through the tool route and the operator's routes."""
from __future__ import annotations

import time
from typing import Any

import pytest

from store import admin
from test_records_support import LEADS, PEOPLE, call_tool, grant, make_collection, ok, q

ALICE = {"name": "Alice Martin", "city": "Paris", "stage": "active", "age": 34, "met_at": "2024-03-01T10:00:00Z",
         "vip": True, "tags": ["climbing", "chess", "v2-beta"], "langs": ["en", "fr"]}
BOB = {"name": "Bob Stone", "city": "Berlin", "stage": "new", "age": 51, "met_at": "2023-11-20T08:00:00+01:00",
       "vip": False, "tags": ["sailing"], "langs": ["de"]}
CAROL = {"name": "Carol Zhang", "city": "Parisville", "stage": "done", "age": 34, "tags": [],
         "langs": ["en"]}
DAN = {"name": "Dan Okafor", "city": "Lagos 2", "age": 28.5}


@pytest.fixture
def people(server, db, boot, service) -> dict[str, Any]:
    coll = make_collection(db, boot["org_id"], "people", PEOPLE, guild_id=boot["guild_id"])
    for body in (ALICE, BOB, CAROL, DAN):
        ok(call_tool(server, service, boot["agent_id"], "record_add", collection="people", body=body))
    return coll


def listing(server, service, boot, **args: Any) -> dict[str, Any]:
    return ok(call_tool(server, service, boot["agent_id"], "record_list", collection="people", **args))


def names(result: dict[str, Any]) -> list[str]:
    return [r["name"].split()[0] for r in result["records"]]


def where(server, service, boot, **terms: Any) -> list[str]:
    return names(listing(server, service, boot, where=terms))


def search(server, service, boot, **args: Any) -> Any:
    return call_tool(server, service, boot["agent_id"], "record_search", **args)


# --- where, by column type -----------------------------------------------------------------------

def test_text_where_is_substring_plus_similar_spelling_without_digits(server, service, boot, people) -> None:
    assert where(server, service, boot, city="pari") == ["Alice", "Carol"]  # substring, any case
    assert where(server, service, boot, city="Parsi") == ["Alice", "Carol"]  # a transposition in a five-letter word hits
    assert where(server, service, boot, city="Berlni") == ["Bob"]
    assert where(server, service, boot, city="Bremen") == []  # a shared first letter is not similar
    assert where(server, service, boot, city="Lagos 2") == ["Dan"]
    assert where(server, service, boot, city="Lagso 2") == []  # a term with a digit is substring only
    assert where(server, service, boot, city="Lisbon") == []
    assert where(server, service, boot, city="100%") == []  # wildcards are literal


def test_values_columns_match_exactly_and_name_the_allowed_values(server, service, boot, people) -> None:
    assert where(server, service, boot, stage="active") == ["Alice"]
    assert where(server, service, boot, langs="en") == ["Alice", "Carol"]
    r = call_tool(server, service, boot["agent_id"], "record_list", collection="people",
                  where={"stage": "activ", "langs": "es"})
    assert r.status_code == 422
    assert r.json()["problems"] == ['where "stage": expected one of new, active, done; got "activ"',
                                    'where "langs": expected one of en, fr, de; got "es"']


def test_numbers_and_datetimes_match_exactly_or_by_range(server, service, boot, people) -> None:
    assert where(server, service, boot, age=34) == ["Alice", "Carol"]
    assert where(server, service, boot, age=28.5) == ["Dan"]
    assert where(server, service, boot, age={"gte": 30, "lte": 40}) == ["Alice", "Carol"]
    assert where(server, service, boot, age={"lte": 30}) == ["Dan"]
    assert where(server, service, boot, met_at="2023-11-20T07:00:00Z") == ["Bob"]  # stored in UTC
    assert where(server, service, boot, met_at={"gte": "2024-01-01T00:00:00+00:00"}) == ["Alice"]
    r = call_tool(server, service, boot["agent_id"], "record_list", collection="people",
                  where={"age": "34", "met_at": {"after": "2024-01-01"}})
    assert r.status_code == 422
    assert r.json()["problems"] == [
        'where "age": expected a number, or {"gte": 42}, {"lte": 42} or both; got "34"',
        'where "met_at": expected an ISO 8601 datetime with a timezone, or {"gte": "2024-05-01T00:00:00Z"},'
        ' {"lte": "2024-05-01T00:00:00Z"} or both; got {"after": "2024-01-01"}']


def test_boolean_id_arrays_and_null(server, service, boot, people) -> None:
    assert where(server, service, boot, vip=True) == ["Alice"]
    assert where(server, service, boot, vip=False) == ["Bob"]
    assert where(server, service, boot, id=2) == ["Bob"]
    assert where(server, service, boot, tags="sail") == ["Bob"]  # an item by substring
    assert where(server, service, boot, tags="climbnig") == ["Alice"]  # similar spelling of an item
    assert where(server, service, boot, tags="v2-bta") == []  # digit: substring only
    assert where(server, service, boot, vip=None) == ["Carol", "Dan"]  # null matches missing
    assert where(server, service, boot, met_at=None, age=34) == ["Carol"]
    assert where(server, service, boot, tags=None) == ["Dan"]  # [] is a value, not missing
    assert where(server, service, boot, id=None) == []  # every record has its id


def test_where_limits_and_unknown_columns(server, service, boot, people) -> None:
    r = call_tool(server, service, boot["agent_id"], "record_list", collection="people",
                  where={"nickname": "al", "city": "x" * 201, "id": "2"})
    assert r.status_code == 422
    assert r.json()["problems"] == [
        'where "nickname": unknown column; you can filter on id, name, city, stage, age, met_at, vip, tags, langs',
        'where "city": the term is 201 characters long; at most 200 are allowed',
        'where "id": expected a record id (a whole number from 1); got "2"']
    r = call_tool(server, service, boot["agent_id"], "record_list", collection="people",
                  where={f"c{i}": 1 for i in range(9)})
    assert r.status_code == 422 and r.json()["problems"] == ["where: at most 8 columns; got 9"]


# --- order, paging, since ------------------------------------------------------------------------

def test_order_as_object_or_string_and_the_default(server, service, boot, people) -> None:
    assert names(listing(server, service, boot)) == ["Alice", "Bob", "Carol", "Dan"]
    assert names(listing(server, service, boot, order="age desc")) == ["Bob", "Alice", "Carol", "Dan"]
    assert names(listing(server, service, boot, order={"column": "met_at", "direction": "asc"}))[:2] == ["Bob", "Alice"]
    assert names(listing(server, service, boot, order="id DESC")) == ["Dan", "Carol", "Bob", "Alice"]
    r = call_tool(server, service, boot["agent_id"], "record_list", collection="people", order="tags desc",
                  limit=500, offset=-1)
    assert r.status_code == 422
    assert r.json()["problems"] == [
        'order: "tags" is an array column, which has no order; order by one of id, created_at, updated_at, name,'
        ' city, stage, age, met_at, vip',
        'limit: expected a whole number from 1 to 100; got 500; page further with offset',
        'offset: expected a whole number from 0 to 9223372036854775807; got -1']
    # Past PostgreSQL's bigint: the same sentence, not the database's "out of range".
    r = call_tool(server, service, boot["agent_id"], "record_list", collection="people", offset=2**63)
    assert r.status_code == 422 and r.json()["problems"] == [
        'offset: expected a whole number from 0 to 9223372036854775807; got 9223372036854775808']
    # A bad column and a bad direction are both told, in one answer; an order naming no column says so.
    r = call_tool(server, service, boot["agent_id"], "record_list", collection="people",
                  order={"column": "nope", "direction": "sideways"})
    assert r.status_code == 422 and [p.split(";")[0] for p in r.json()["problems"]] == [
        "order: the direction is asc or desc", 'order: "nope" is not a column'], r.json()
    for nothing in ({}, ""):
        r = call_tool(server, service, boot["agent_id"], "record_list", collection="people", order=nothing)
        assert r.status_code == 422 and [p[:40] for p in r.json()["problems"]] == [
            "order: name a column to order by, one of"], r.json()
    # record_search takes no offset, so its limit's sentence does not offer one.
    r = call_tool(server, service, boot["agent_id"], "record_search", collection="people", query="x", limit=500)
    assert r.status_code == 422 and r.json()["problems"] == [
        'limit: expected a whole number from 1 to 100; got 500; narrow the query or add where']


def test_paging_totals_ignore_limit_and_offset(server, db, boot, service) -> None:
    make_collection(db, boot["org_id"], "leads", LEADS, guild_id=boot["guild_id"])
    for i in range(25):
        ok(call_tool(server, service, boot["agent_id"], "record_add", collection="leads",
                     body={"email": f"u{i}@example.com", "status": "new" if i % 2 else "won"}))
    page = ok(call_tool(server, service, boot["agent_id"], "record_list", collection="leads"))
    assert page["total"] == 25 and len(page["records"]) == 20  # limit 20 by default
    page = ok(call_tool(server, service, boot["agent_id"], "record_list", collection="leads", limit=10, offset=20))
    assert page["total"] == 25 and [r["id"] for r in page["records"]] == [21, 22, 23, 24, 25]
    page = ok(call_tool(server, service, boot["agent_id"], "record_list", collection="leads", limit=5, offset=5,
                        where={"status": "won"}))
    assert page["total"] == 13 and [r["id"] for r in page["records"]] == [11, 13, 15, 17, 19]
    page = ok(call_tool(server, service, boot["agent_id"], "record_list", collection="leads", offset=100))
    assert page == {"total": 25, "records": []}


def test_since_picks_up_exactly_what_changed_after_the_previous_run(server, db, boot, service, people) -> None:
    run = admin.create_run(db, agent_id=boot["agent_id"], kind="schedule", routine="triage")
    with db.connection() as conn:
        previous_run_at = conn.execute("SELECT clock_timestamp() AS t").fetchone()["t"].isoformat()
    time.sleep(0.01)
    ok(call_tool(server, service, boot["agent_id"], "record_update", collection="people", id=1, body={"age": 35}))
    ok(call_tool(server, service, boot["agent_id"], "record_add", collection="people", body={"name": "Eve"}))
    changed = listing(server, service, boot, since=previous_run_at)
    assert names(changed) == ["Alice", "Eve"] and changed["total"] == 2  # default order: updated_at asc
    assert run["routine"] == "triage"
    r = call_tool(server, service, boot["agent_id"], "record_list", collection="people", since="yesterday")
    assert r.status_code == 422 and r.json()["problems"][0].startswith("since: expected an ISO 8601 timestamp")


# --- hints ---------------------------------------------------------------------------------------

def test_an_empty_narrowed_list_explains_itself(server, service, boot, people) -> None:
    out = listing(server, service, boot, where={"city": "Tokyo"})
    assert out["total"] == 0 and out["records"] == []
    hint = out["hint"]
    assert hint.startswith('record_list on people with where {"city": "Tokyo"} matched no records. people holds 4'
                           " live records; the newest change was at ")
    assert ("Columns: name (text, required, unique); city (text); stage (text, values new | active | done);"
            " age (number); met_at (datetime); vip (boolean); tags (array); langs (array, values en | fr | de).") in hint
    assert "A larger limit will not change the answer" in hint
    assert "where matches by column type: text by substring" in hint and "record_search matches words" in hint
    assert "null matches a missing or null value" in hint  # (the spec's words: a key with null is one too)
    out = listing(server, service, boot, since="2999-01-01T00:00:00Z")
    assert out["hint"].startswith("record_list on people with since 2999-01-01T00:00:00Z matched no records.")
    assert "to check whether a record exists, use where on the unique column name without since, or record_search" \
        in out["hint"]
    # an unnarrowed empty listing, or a non-empty one, carries no hint
    assert "hint" not in listing(server, service, boot, where={"city": "Paris"})


# --- record_search -------------------------------------------------------------------------------

def test_search_matches_words_in_values_not_keys_with_the_websearch_grammar(server, service, boot, people) -> None:
    def hits(query: str, **args: Any) -> list[str]:
        return names(ok(search(server, service, boot, collection="people", query=query, **args)))

    assert hits("paris climbing") == ["Alice"]  # whole words, ANDed: Parisville is another word ...
    assert hits("pari climbing") == []
    assert sorted(hits("pari")) == ["Alice", "Carol"]  # ... but a one-token query is also a substring
    assert hits("city") == []  # column names are not indexed
    assert sorted(hits("berlin OR lagos")) == ["Bob", "Dan"]
    assert hits("alice -chess") == []
    assert hits('"bob stone"') == ["Bob"] and hits('"stone bob"') == []
    assert hits("Alcie") == []  # not fuzzy
    assert hits("3 OR zzz") == ["Carol"]  # the id is indexed as a word
    assert hits("3")[0] == "Carol"  # and ranks above the substring hits (34, 2023...)
    empty = ok(search(server, service, boot, collection="people", query="zeppelin"))
    assert empty["records"] == [] and "not fuzzy" in empty["hint"]


def test_a_where_term_with_a_digit_still_ranks_the_closer_value_first(server, service, boot, people) -> None:
    """Similar spelling stays out of a digit term's matches, not out of the ranking: among the
    records it matches (by substring), the one whose value is the term ranks first."""
    for body in ({"name": "x9 zebra"}, {"name": "qqqx9qqqqqq zebra"}):  # the closer one older
        ok(call_tool(server, service, boot["agent_id"], "record_add", collection="people", body=body))
    out = ok(search(server, service, boot, collection="people", query="zebra", where={"name": "x9"}))
    assert [r["name"] for r in out["records"]] == ["x9 zebra", "qqqx9qqqqqq zebra"]
    assert [r["name"] for r in ok(search(server, service, boot, collection="people", query="zebra",
                                         where={"name": "x9 zebra"}))["records"]][0] == "x9 zebra"


def test_search_without_collection_covers_every_readable_collection(server, db, boot, service, people) -> None:
    other = make_collection(db, boot["org_id"], "cities", [
        {"name": "city", "type": "text", "description": "a city", "required": True, "unique": False}])
    hidden = make_collection(db, boot["org_id"], "hidden", [
        {"name": "city", "type": "text", "description": "a city", "required": True, "unique": False}])
    grant(db, other["id"], guild_id=boot["guild_id"], mode="read")
    with db.transaction() as conn:
        for coll in (other, hidden):
            conn.execute("INSERT INTO artifacts (org_id, kind, level, collection_id, key, display_path, content_json,"
                         " search_blob) VALUES (%s, 'object', 'org', %s, '1', %s, '{\"city\": \"Paris\"}', 'Paris')",
                         (boot["org_id"], coll["id"], f"org/{boot['org_id']}/collections/{coll['name']}/1"))
    out = ok(search(server, service, boot, query="paris"))
    assert sorted((r["collection"], r["id"]) for r in out["records"]) == [("cities", 1), ("people", 1), ("people", 3)]
    r = search(server, service, boot, query="paris", where={"city": "paris"})
    assert r.status_code == 422 and r.json()["problems"] == [
        "where: needs collection, since where names a collection's columns; name the collection, or drop where to"
        " search every collection you can read"]
    r = search(server, service, boot, query="paris", collection="hidden")
    assert r.status_code == 404 and r.json()["error"] == "unknown collection hidden"


def test_search_where_narrows_and_similarity_ranks(server, service, boot, people) -> None:
    out = ok(search(server, service, boot, collection="people", query="34 OR 51 OR 28.5", where={"city": "paris"}))
    assert names(out) == ["Alice", "Carol"]  # exact "Paris" ranks above "Parisville"
    r = search(server, service, boot, collection="people", query="x", limit=101)
    assert r.status_code == 422
    r = search(server, service, boot, collection="people", query="   ")
    assert r.status_code == 422 and r.json()["problems"][0].startswith("query: expected words to search for")


# --- the operator's listing route ----------------------------------------------------------------

def test_http_listing_takes_where_and_order_as_json_and_query_searches(server, operator, people) -> None:
    base = f"{server.url}/api/collections/{people['id']}/records"
    out = ok(operator.get(base, params={"where": q({"age": {"gte": 30}}), "order": "age desc", "limit": "2"}))
    assert out["total"] == 3 and names(out) == ["Bob", "Alice"]
    assert [c["name"] for c in out["columns"]] == [c["name"] for c in PEOPLE]
    assert out["records"][0]["display_path"].endswith("/collections/people/2")
    out = ok(operator.get(base, params={"order": q({"column": "name", "direction": "desc"})}))
    assert names(out) == ["Dan", "Carol", "Bob", "Alice"]
    out = ok(operator.get(base, params={"query": "berlin OR paris"}))
    assert sorted(names(out)) == ["Alice", "Bob"] and out["total"] == 2
    r = operator.get(base, params={"where": "{status: new}"})
    assert r.status_code == 422 and "where" in r.json()["error"]
    r = operator.get(base, params={"limit": "lots"})
    assert r.status_code == 422 and r.json()["problems"] == [
        'limit: expected a whole number from 1 to 100; got "lots"; page further with offset']
    # a search takes order too: the hits sorted by the column instead of rank
    out = ok(operator.get(base, params={"query": "berlin OR paris", "order": "age desc"}))
    assert names(out) == ["Bob", "Alice"]
    out = ok(operator.get(base, params={"where": q({"city": "Nowhere"})}))
    assert out["total"] == 0 and "matched no records" in out["hint"]

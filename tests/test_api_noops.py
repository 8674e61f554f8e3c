"""Requests to the Databases routes that change nothing, or that name something wrongly, found in
review: a change that changes nothing writes nothing (no new etag, no provenance row, no event);
an unknown field or guild is the request's problem, listed with the others. Real server, real
requests."""
from __future__ import annotations

import requests

from store import admin
from test_collections_support import changes, col, create


def test_a_collection_patch_that_changes_nothing_keeps_its_etag_and_history(server, operator, db) -> None:
    made = create(operator, server.url, "leads")
    url = f"{server.url}/api/collections/{made['id']}"
    etag = operator.get(url).headers["ETag"]
    for body in ({}, {"name": "leads"}, {"purpose": "leads table"}, {"columns": [col("title")]}, {"guild_id": None}):
        r = operator.patch(url, json=body)
        assert r.status_code == 200, (body, r.text)
        assert operator.get(url).headers["ETag"] == etag, body
    assert changes(db, made["display_path"]) == ["create"]
    # An editor that loaded the table before those requests still saves.
    r = operator.patch(url, json={"purpose": "who asked"}, headers={"If-Match": etag})
    assert r.status_code == 200, r.text
    assert operator.get(url).headers["ETag"] != etag
    assert changes(db, made["display_path"]) == ["create", "update"]


def test_a_grant_set_to_what_it_is_or_removed_when_absent_writes_nothing(server, operator, boot, db) -> None:
    made = create(operator, server.url, "leads")
    sales = admin.create_guild(db, org_id=boot["org_id"], name="Sales")
    guild_url = f"{server.url}/api/guilds/{sales['id']}/collection-access"
    agent_url = f"{server.url}/api/agents/{boot['agent_id']}/collection-access"
    for url, mode in ((guild_url, None), (agent_url, None), (guild_url, "read"), (guild_url, "read"),
                      (agent_url, "write"), (agent_url, "write"), (guild_url, None), (guild_url, None)):
        r = operator.put(url, json={"collection_id": made["id"], "mode": mode})
        assert r.status_code == 200, r.text
    # The guild's grant set, the agent's row set, the guild's grant removed: three changes.
    assert changes(db, made["display_path"]) == ["create", "update", "update", "update"]


def test_removing_the_row_of_an_agent_outside_a_guilds_own_table_answers(server, operator, boot, db) -> None:
    made = create(operator, server.url, "ledger", guild_id=boot["guild_id"])
    sales = admin.create_guild(db, org_id=boot["org_id"], name="Sales")
    seller = admin.create_agent(db, org_id=boot["org_id"], guild_id=sales["id"], name="seller")
    r = operator.put(f"{server.url}/api/agents/{seller['id']}/collection-access",
                     json={"collection_id": made["id"], "mode": None})
    assert r.status_code == 200, r.text
    assert r.json() == {"agent_id": seller["id"], "collection_id": made["id"], "name": "ledger",
                        "purpose": "ledger table", "scope": "guild", "guild_mode": None, "agent_mode": None,
                        "effective": None}
    r = operator.put(f"{server.url}/api/agents/{seller['id']}/collection-access",
                     json={"collection_id": made["id"], "mode": "read"})
    assert r.status_code == 422 and "accepted only for an agent of that guild" in r.json()["error"]
    assert changes(db, made["display_path"]) == ["create"]


def test_an_unknown_guild_is_a_problem_of_the_body_listed_with_the_others(server, operator, boot, db) -> None:
    other = admin.bootstrap(db, org_name="Other", email="o@example.com", password="correct horse battery")
    for guild_id in (999999, other["guild_id"]):
        r = operator.post(f"{server.url}/api/collections",
                          json={"name": "Bad Name", "purpose": "p", "columns": [], "guild_id": guild_id})
        assert r.status_code == 422, r.text
        assert r.json()["problems"][1:] == [
            f"guild_id {guild_id} is not a guild of this organisation; give one of its guilds' ids, "
            "or null for an organisation table"]
        assert r.json()["problems"][0].startswith('name "Bad Name" is not a collection name')
    made = create(operator, server.url, "leads")
    r = operator.patch(f"{server.url}/api/collections/{made['id']}", json={"guild_id": other["guild_id"]})
    assert r.status_code == 422 and r.json()["problems"][0].startswith(f"guild_id {other['guild_id']} is not")
    assert operator.get(f"{server.url}/api/collections/{made['id']}").json()["scope"] == "org"


def test_a_record_write_refuses_a_field_beside_body(server, operator, db) -> None:
    made = create(operator, server.url, "leads")
    records = f"{server.url}/api/collections/{made['id']}/records"
    r = operator.post(records, json={"body": {"title": "one"}, "extra": 1})
    assert r.status_code == 422, r.text
    assert r.json()["problems"] == ['unknown field "extra"; send {"body": {...}} with the record\'s column '
                                    "values and nothing beside it"]
    assert operator.get(records).json()["total"] == 0
    rid = operator.post(records, json={"body": {"title": "one"}}).json()["record"]["id"]
    r = operator.patch(f"{records}/{rid}", json={"body": {"title": "two"}, "version": 1})
    assert r.status_code == 422, r.text
    assert operator.get(f"{records}/{rid}").json()["title"] == "one"
    # A body with problems of its own: listed with the field beside it, in one refusal.
    r = operator.post(records, json={"body": {"title": 5, "colour": "red"}, "extra": 1})
    assert r.status_code == 422, r.text
    assert r.json()["error"].startswith("record rejected\n")
    assert [p.split(";")[0].split(":")[0] for p in r.json()["problems"]] == [
        'unknown field "extra"', 'column "title"', 'column "colour"'], r.json()["problems"]
    assert operator.get(records).json()["total"] == 1


def test_a_bad_where_is_reported_with_every_other_listing_problem(server, operator) -> None:
    made = create(operator, server.url, "leads")
    r = operator.get(f"{server.url}/api/collections/{made['id']}/records",
                     params={"limit": "abc", "offset": "-1", "since": "yesterday", "where": "{bad"})
    assert r.status_code == 422, r.text
    problems = r.json()["problems"]
    assert [p.split(":")[0].split(" ")[0] for p in problems] == ["where", "since", "limit", "offset"], problems
    assert problems[0] == ('where is not valid JSON: Expecting property name enclosed in double quotes at '
                           'character 2; send an object such as {"status": "new"}')


def test_a_record_carries_its_version_as_an_etag_and_if_match_star_matches_it(server, operator) -> None:
    made = create(operator, server.url, "leads")
    records = f"{server.url}/api/collections/{made['id']}/records"
    rid = operator.post(records, json={"body": {"title": "one"}}).json()["record"]["id"]
    r = operator.get(f"{records}/{rid}")
    assert r.headers["ETag"] == '"1"'
    r = operator.patch(f"{records}/{rid}", json={"body": {"title": "two"}}, headers={"If-Match": r.headers["ETag"]})
    assert r.status_code == 200 and r.headers["ETag"] == '"2"', r.text
    r = operator.patch(f"{records}/{rid}", json={"body": {"title": "three"}}, headers={"If-Match": '"1"'})
    assert r.status_code == 412, r.text
    r = operator.patch(f"{records}/{rid}", json={"body": {"title": "three"}}, headers={"If-Match": "*"})
    assert r.status_code == 200 and r.json()["record"]["title"] == "three", r.text


def test_a_write_sent_from_another_sites_page_is_refused(server, operator, boot) -> None:
    # A browser that read a note over /dav/ sends the Basic login with a form another site's page
    # submits to /api/ (text/plain needs no CORS preflight): it names that page as its Origin.
    made = create(operator, server.url, "leads")
    records = f"{server.url}/api/collections/{made['id']}/records"
    auth = (boot["email"], boot["password"])
    form = '{"body":{"title":"from evil=' + '"}}'
    for origin in ("http://evil.example", "null", server.url.replace("127.0.0.1", "localhost")):
        r = requests.post(records, data=form, auth=auth,
                          headers={"Content-Type": "text/plain", "Origin": origin}, timeout=10)
        assert r.status_code == 403, (origin, r.status_code, r.text)
        assert r.json()["error"] == (f"a request from a page of another site (Origin: {origin}) is refused: "
                                     "the API answers programs and Host Finder's own pages")
        r = requests.post(f"{server.url}/api/collections", auth=auth, headers={"Origin": origin}, timeout=10,
                          json={"name": "csrf", "purpose": "p", "columns": []})
        assert r.status_code == 403, (origin, r.status_code, r.text)
    assert operator.get(records).json()["total"] == 0
    assert [c["name"] for c in operator.get(f"{server.url}/api/collections").json()["collections"]] == ["leads"]
    # Programs send no Origin; a page of this host names it.
    for headers in ({}, {"Origin": server.url}):
        r = requests.post(records, json={"body": {"title": "mine"}}, auth=auth, headers=headers, timeout=10)
        assert r.status_code == 201, (headers, r.text)
    # A Bearer token is no login a browser keeps: a program that names an Origin is not refused.
    r = requests.post(records, json={"body": {"title": "by token"}}, timeout=10,
                      headers={"Authorization": f"Bearer {boot['member_token']}", "Origin": "http://app.example"})
    assert r.status_code == 201, r.text
    # Reads stay open to any page the browser shows (they change nothing).
    assert requests.get(records, auth=auth, headers={"Origin": "http://evil.example"}, timeout=10).status_code == 200


def test_a_record_patch_that_changes_nothing_writes_nothing(server, operator, db) -> None:
    """The same values sent again (a client retrying its PATCH, an agent its record_update) keep
    the record's version and history; the answer is the record, as for a change."""
    made = create(operator, server.url, "leads")
    records = f"{server.url}/api/collections/{made['id']}/records"
    rid = operator.post(records, json={"body": {"title": "one"}}).json()["record"]["id"]
    path = f"{made['display_path']}/{rid}"
    r = operator.patch(f"{records}/{rid}", json={"body": {"title": "one"}})
    assert r.status_code == 200 and r.json()["record"]["version"] == 1 and r.headers["ETag"] == '"1"', r.text
    assert changes(db, path) == ["create"]
    r = operator.patch(f"{records}/{rid}", json={"body": {"title": "two"}})
    assert r.json()["record"]["version"] == 2 and changes(db, path) == ["create", "update"]


def test_clearing_a_table_that_has_no_records_writes_nothing(server, operator, db) -> None:
    made = create(operator, server.url, "leads")
    records = f"{server.url}/api/collections/{made['id']}/records"
    operator.post(records, json={"body": {"title": "one"}})
    for _ in range(2):
        assert operator.delete(records).status_code in (200, 204)
    assert changes(db, made["display_path"]) == ["create", "clear"]


def test_a_number_retyped_to_a_boolean_takes_true_in_place_of_1(server, operator, db) -> None:
    """1 == True in Python: the no-op check compares JSON, so the change is written."""
    made = create(operator, server.url, "flags", columns=[col("n", "number")])
    records = f"{server.url}/api/collections/{made['id']}/records"
    rid = operator.post(records, json={"body": {"n": 1}}).json()["record"]["id"]
    r = operator.patch(f"{server.url}/api/collections/{made['id']}", json={"columns": [col("n", "boolean")]})
    assert r.status_code == 200, r.text
    r = operator.patch(f"{records}/{rid}", json={"body": {"n": True}})
    assert r.status_code == 200 and r.json()["record"]["n"] is True and r.json()["record"]["version"] == 2, r.text
    # 2 and 2.0 are one JSON number: sending either again changes nothing.
    r = operator.patch(f"{server.url}/api/collections/{made['id']}", json={"columns": [col("n", "number")]})
    assert r.status_code == 200, r.text
    operator.patch(f"{records}/{rid}", json={"body": {"n": 2}})
    version = operator.get(f"{records}/{rid}").json()["version"]
    assert operator.patch(f"{records}/{rid}", json={"body": {"n": 2.0}}).json()["record"]["version"] == version

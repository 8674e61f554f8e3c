"""/api/ refusals found in review: a body that is not JSON or not UTF-8 (400, saying where), where
and order that are not JSON, unknown routes and ids a route cannot take (the API's JSON 404 with a
sentence, not Werkzeug's page boilerplate), where a lone surrogate is, and /api/health while the
store is down. Real server, real requests; each assertion is what the caller reads."""
from __future__ import annotations

from typing import Any

import psycopg
import pytest
import requests

JSON = {"Content-Type": "application/json"}


def leads(server: Any, operator: requests.Session) -> str:
    """A collection with one record; its records URL."""
    r = operator.post(f"{server.url}/api/collections", json={
        "name": "leads", "purpose": "People who asked for a demo",
        "columns": [{"name": "company", "type": "text", "description": "the company"},
                    {"name": "status", "type": "text", "description": "where the lead is"}]})
    assert r.status_code == 201, r.text
    records = f"{server.url}/api/collections/{r.json()['id']}/records"
    r = operator.post(records, json={"body": {"company": "Acme", "status": "new"}})
    assert r.status_code == 201, r.text
    return records


def refused(r: requests.Response, status: int) -> str:
    """The sentence of a refusal in the API's error shape."""
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert r.headers["Content-Type"].startswith("application/json"), r.headers["Content-Type"]
    body = r.json()
    assert set(body) == {"error", "problems", "status"} and body["status"] == status, body
    assert "Traceback" not in r.text and "<" not in body["error"]
    return body["error"]


def stored(operator: requests.Session, records: str) -> list[dict[str, Any]]:
    return [rec["body"] if "body" in rec else rec for rec in operator.get(records).json()["records"]]


# -- 1. a body that is not JSON, or not UTF-8 ----------------------------------------------------------

@pytest.mark.parametrize("body, sentence", [
    (b'{"body":{', "the request body is not valid JSON: line 1, column 10: Expecting property name enclosed "
                   "in double quotes"),
    (b'{"body": {"company": "Acme",}}', "the request body is not valid JSON: line 1, column 29: Expecting "
                                        "property name enclosed in double quotes"),
    (b'{\n  "body": {"company": "Acme"}\n  "x": 1}', "the request body is not valid JSON: line 3, column 3: "
                                                    "Expecting ',' delimiter"),
    (b'{"body": {"company": "Acme\xff"}}', "the request body is not UTF-8 (byte 27)"),
])
def test_a_body_that_cannot_be_read_is_a_400_saying_where(server, operator, body: bytes, sentence: str) -> None:
    records = leads(server, operator)
    before = stored(operator, records)
    for method, url in (("POST", records), ("PATCH", f"{records}/1")):
        r = operator.request(method, url, data=body, headers=JSON)
        assert refused(r, 400) == sentence, method
        assert r.json()["problems"] == [sentence]
    assert stored(operator, records) == before


def test_a_number_longer_than_python_reads_is_named(server, operator) -> None:
    records = leads(server, operator)
    r = operator.post(records, data=b'{"body": {"company": ' + b"9" * 5000 + b"}}", headers=JSON)
    assert refused(r, 422) == ("the request body holds a number of more than 4300 digits, more than any "
                               "value here can hold")


def test_a_body_that_is_json_still_reaches_the_route(server, operator) -> None:
    records = leads(server, operator)
    r = operator.post(records, data='\ufeff{"body": {"company": "Büro"}}'.encode("utf-8"), headers=JSON)
    assert r.status_code == 201, r.text  # a UTF-8 byte order mark is read past, as before
    r = operator.post(records, data=b"null", headers=JSON)
    assert r.status_code == 422, r.text  # JSON, but no record: the route's own refusal


def test_the_document_lists_400_where_a_body_is_read(server) -> None:
    paths = requests.get(f"{server.url}/api/openapi.json").json()["paths"]
    for path, ops in paths.items():
        for method, op in ops.items():
            if "requestBody" in op:
                assert "not JSON, or not UTF-8" in op["responses"]["400"]["description"], (method, path)
                assert "not JSON" not in op["responses"]["422"]["description"], (method, path)
    tool = paths["/api/agents/{agent_id}/tools/{tool}"]["post"]["responses"]["400"]["description"]
    assert tool.startswith("X-Run-Id longer than 32")


# -- 2. where and order that are not JSON ------------------------------------------------------------

@pytest.mark.parametrize("where, sentence", [
    ('{"status":"new",}', "where is not valid JSON: Expecting property name enclosed in double quotes at "
                          'character 17; send an object such as {"status": "new"}'),
    ('{"status":"n\tew"}', "where is not valid JSON: Invalid control character at character 13; send an "
                           'object such as {"status": "new"}'),
])
def test_where_that_is_not_json_says_so(server, operator, where: str, sentence: str) -> None:
    records = leads(server, operator)
    r = operator.get(records, params={"where": where})
    assert refused(r, 422) == f"records listing arguments rejected\n- {sentence}"
    assert r.json()["problems"] == [sentence]
    r = operator.get(records, params={"where": '{"status": "new"}'})
    assert r.status_code == 200 and r.json()["total"] == 1


def test_where_that_is_not_json_is_reported_with_every_other_problem(server, operator) -> None:
    records = leads(server, operator)
    r = operator.get(records, params={"where": "{bad", "limit": "abc", "query": "acme"})
    refused(r, 422)
    problems = r.json()["problems"]
    assert problems[0] == ("where is not valid JSON: Expecting property name enclosed in double quotes at "
                           'character 2; send an object such as {"status": "new"}')
    assert [p.split(":")[0] for p in problems[1:]] == ["limit"], problems


def test_order_that_is_broken_json_says_so_and_plain_order_still_works(server, operator) -> None:
    records = leads(server, operator)
    r = operator.get(records, params={"order": '{"column": "company", "direction": "desc"'})
    refused(r, 422)
    assert r.json()["problems"] == [
        "order is not valid JSON: Expecting ',' delimiter at character 42; send "
        '{"column": "updated_at", "direction": "desc"}, or the plain text "updated_at desc"']
    assert operator.get(records, params={"order": "company desc"}).status_code == 200
    assert operator.get(records, params={"order": '{"column": "company"}'}).status_code == 200


# -- 3. unknown routes, ids a route cannot take, methods it does not take -----------------------------

@pytest.mark.parametrize("method, path", [("GET", "/api/nope"), ("DELETE", "/api/collections/1/nope"),
                                          ("GET", "/api")])
def test_an_unknown_route_is_a_json_404_naming_it(server, operator, method: str, path: str) -> None:
    r = operator.request(method, server.url + path)
    assert refused(r, 404) == f"no API route {method} {path}; the routes are listed at /api/openapi.json"
    assert requests.get(f"{server.url}/api/openapi.json").status_code == 200


@pytest.mark.parametrize("method, tail, name, got", [
    ("GET", "/records/-1", "record_id", "-1"),
    ("PATCH", "/records/9223372036854775808", "record_id", "9223372036854775808"),
    ("DELETE", "/records/1.5", "record_id", "1.5"),
    ("GET", "/records/%D9%A1", "record_id", "\u0661"),  # an Arabic-Indic one
])
def test_an_id_the_route_cannot_take_is_named(server, operator, method: str, tail: str, name: str,
                                              got: str) -> None:
    records = leads(server, operator)
    r = operator.request(method, records.removesuffix("/records") + tail, json={"body": {"status": "won"}})
    assert refused(r, 404) == (f"{name} in /api/collections/{{collection_id}}/records/{{record_id}} must be "
                               f"a whole number from 1 to 9223372036854775807 in ASCII digits; got {got!r}")
    r = operator.get(f"{server.url}/api/collections/0x1/records")
    assert refused(r, 404).startswith("collection_id in /api/collections/{collection_id}/records must be a whole "
                                      "number from 1 to 9223372036854775807")


# -- 4. where a lone surrogate is ----------------------------------------------------------------------

def test_a_lone_surrogate_is_located_by_the_keys_sent(server, operator) -> None:
    records = leads(server, operator)
    r = operator.patch(f"{records}/1", data='{"body":{"company":"\\ud800"}}', headers=JSON)
    assert refused(r, 422) == ("body.company holds a lone surrogate escape (such as \\ud800), which is not a "
                               "character; send text as valid Unicode")
    r = operator.get(records, params={"where": '{"company": "\\ud800"}'})
    assert refused(r, 422).startswith("where.company holds a lone surrogate escape")
    r = operator.post(records, data='"\\ud800"', headers=JSON)
    assert refused(r, 422).startswith("the request body holds a lone surrogate escape")
    assert stored(operator, records)[0]["company"] == "Acme"


# -- 5. /api/health while the store cannot be read -----------------------------------------------------

def test_a_nul_is_named_where_it_is_with_the_other_problems(server, operator) -> None:
    """A NUL character (which PostgreSQL's text cannot hold) in a search, a where term, a purpose
    or a column's description is named where it is, beside the request's other problems; it was
    one sentence of the database's last line ("a text value contains a NUL…"), alone."""
    records = leads(server, operator)
    r = operator.get(records, params={"query": "a\x00b", "limit": "abc"})
    refused(r, 422)
    assert r.json()["problems"][0].startswith("query contains a NUL character (\\u0000)"), r.json()
    assert len(r.json()["problems"]) == 2 and r.json()["problems"][1].startswith("limit")
    r = operator.get(records, params={"where": '{"company": "a\\u0000b"}', "offset": "-1"})
    refused(r, 422)
    assert r.json()["problems"][0].startswith('where "company": the term contains a NUL'), r.json()
    assert len(r.json()["problems"]) == 2
    r = operator.post(f"{server.url}/api/collections", json={
        "name": "Bad Name", "purpose": "a\u0000b",
        "columns": [{"name": "x", "type": "text", "description": "d\u0000", "values": ["ok", "n\u0000"]}]})
    refused(r, 422)
    problems = r.json()["problems"]
    assert any(p.startswith("purpose contains a NUL") for p in problems), problems
    assert any("description contains a NUL" in p for p in problems), problems
    assert any("values item 2 contains a NUL" in p for p in problems), problems
    assert any(p.startswith('name "Bad Name"') for p in problems), problems


def test_health_says_in_a_sentence_that_the_store_is_down(server, monkeypatch) -> None:
    def gone() -> Any:
        raise psycopg.OperationalError("connection is lost")
    monkeypatch.setattr(server.db, "connection", gone)
    r = requests.get(f"{server.url}/api/health")
    assert r.status_code == 503 and r.headers["Retry-After"] == "2"
    body = r.json()
    assert body["ok"] is False and body["store"] == "unreachable" and body["status"] == 503
    assert body["error"] == ("the store's database cannot be reached just now (PostgreSQL is down, restarting "
                             "or overloaded); try again in a few seconds")
    monkeypatch.undo()
    assert requests.get(f"{server.url}/api/health").json()["store"] == "reachable"

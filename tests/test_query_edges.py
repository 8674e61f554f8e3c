"""Queries a client can send that the parser or PostgreSQL choked on: `where` nested thousands of
levels deep (RecursionError) and search queries of dozens of hyphens ("tsquery stack too small").
Each is answered, never a 500. Real server, real requests."""
from __future__ import annotations

from typing import Any

import pytest

from store import admin
from test_records_support import PEOPLE, call_tool, make_collection, ok

HYPHENS = ["-" * 40, "-" * 64, "-" * 100, "- " * 60, "a" + "-" * 80 + "b", "-a -b " * 30, '"' + "-" * 70 + '"',
           "or " * 50 + "-" * 50]


@pytest.fixture
def people(server, db, boot, service) -> dict[str, Any]:
    coll = make_collection(db, boot["org_id"], "people", PEOPLE, guild_id=boot["guild_id"])
    ok(call_tool(server, service, boot["agent_id"], "record_add", collection="people",
                 body={"name": "Alice Martin-Dupont", "city": "Paris"}))
    ok(call_tool(server, service, boot["agent_id"], "note_write", level="agent", key="plan.md", content="the well-known plan"))
    return coll


def test_a_where_too_long_for_the_request_line_is_refused_at_the_door(server, operator, people) -> None:
    # 100 000 levels percent-encode to 600 KB of URI: the door refuses it before anything parses it.
    where = '{"name": ' + "[" * 100_000 + "]" * 100_000 + "}"
    r = operator.get(f"{server.url}/api/collections/{people['id']}/records", params={"where": where})
    assert r.status_code == 414 and "Request-URI" in r.text


@pytest.mark.parametrize("depth", [1000, 5000])
def test_where_nested_thousands_deep_is_a_422_with_a_sentence(server, operator, people, depth: int) -> None:
    where = '{"name": ' + "[" * depth + "]" * depth + "}"
    for extra in ({}, {"query": "alice"}):
        r = operator.get(f"{server.url}/api/collections/{people['id']}/records", params={"where": where, **extra})
        assert r.status_code == 422, r.text
        assert "where" in r.json()["error"] and "nested too deeply" in r.json()["error"]


def test_where_nested_within_reason_is_an_ordinary_problem(server, operator, people) -> None:
    where = '{"name": ' + "[" * 50 + "]" * 50 + "}"
    r = operator.get(f"{server.url}/api/collections/{people['id']}/records", params={"where": where})
    assert r.status_code == 422 and 'where "name"' in r.json()["error"]


@pytest.mark.parametrize("query", HYPHENS)
def test_hyphen_floods_in_every_search_are_answered(server, operator, service, boot, people, query: str) -> None:
    r = operator.get(f"{server.url}/api/collections/{people['id']}/records", params={"query": query})
    assert r.status_code == 200, r.text
    assert isinstance(r.json()["records"], list)
    r = call_tool(server, service, boot["agent_id"], "record_search", collection="people", query=query)
    assert r.status_code == 200, r.text
    r = call_tool(server, service, boot["agent_id"], "note_find", query=query)
    assert r.status_code == 200, r.text


def test_hyphenated_words_and_exclusion_still_work(server, operator, service, boot, people) -> None:
    base = f"{server.url}/api/collections/{people['id']}/records"
    assert [x["name"] for x in operator.get(base, params={"query": "martin-dupont"}).json()["records"]] \
        == ["Alice Martin-Dupont"]
    assert operator.get(base, params={"query": "paris -alice"}).json()["records"] == []
    found = ok(call_tool(server, service, boot["agent_id"], "note_find", query="well-known"))
    assert [n["path"] if "path" in n else n["display_path"] for n in found["notes"]][0].endswith("plan.md")


@pytest.mark.parametrize("query,expected", [
    ("-" * 40, " "), ("- - -", " "), ("paris -alice", "paris -alice"), ("---alice", " -alice"),
    ("well-known", "well-known"), ("v2-", "v2-"), ('-"a phrase"', ' -"a phrase"'), ('"-----"', '"-----"'),
    ("a !-!-!-b", "a -b"), ("or or or", "or or or"),
])
def test_websearch_text_keeps_what_a_person_meant(query: str, expected: str) -> None:
    from store.search_query import websearch_text
    assert websearch_text(query) == expected

"""The Databases page searches and pages at once: with query, offset pages the ranked hits, since
narrows them, and order sorts the hits by a column instead of rank."""
from __future__ import annotations

import json
import time
from datetime import datetime, timezone

from test_collections_support import col, create


def _names(out: dict) -> list[str]:
    return [r["name"] for r in out["records"]]


def test_search_takes_offset_since_and_order(server, operator, boot, db) -> None:
    made = create(operator, server.url, "firms", [col("name"), col("notes"), col("score", "number")])
    base = f"{server.url}/api/collections/{made['id']}/records"
    bodies = [{"name": "A", "notes": "acme acme acme", "score": 3}, {"name": "B", "notes": "acme acme", "score": 9},
              {"name": "C", "notes": "acme", "score": 1}, {"name": "D", "notes": "acme and more words here",
                                                             "score": 7},
              {"name": "E", "notes": "acme once", "score": 5}, {"name": "F", "notes": "globex", "score": 8}]
    ids = {}
    for body in bodies:
        r = operator.post(base, json={"body": body})
        assert r.status_code == 201, r.text
        ids[body["name"]] = r.json()["record"]["id"]

    ranked = operator.get(base, params={"query": "acme", "limit": "100"}).json()
    assert ranked["total"] == 5 and sorted(_names(ranked)) == ["A", "B", "C", "D", "E"]
    # offset pages the ranked hits: the pages put together are the ranking, and total stays
    pages = [operator.get(base, params={"query": "acme", "limit": "2", "offset": str(o)}).json() for o in (0, 2, 4)]
    assert [p["total"] for p in pages] == [5, 5, 5]
    assert sum((_names(p) for p in pages), []) == _names(ranked)
    past = operator.get(base, params={"query": "acme", "offset": "10"}).json()
    assert (past["total"], past["records"]) == (5, [])

    # order sorts the hits by a column instead of rank (JSON or "column desc"), ties by id
    out = operator.get(base, params={"query": "acme", "order": json.dumps({"column": "score", "direction": "desc"}),
                                     "limit": "3"}).json()
    assert _names(out) == ["B", "D", "E"] and out["total"] == 5
    out = operator.get(base, params={"query": "acme", "order": "score asc", "offset": "3"}).json()
    assert _names(out) == ["D", "B"]

    # since narrows the hits to records created or updated at or after it
    time.sleep(0.05)
    mark = datetime.now(timezone.utc).isoformat()
    time.sleep(0.05)
    for name in ("C", "E", "F"):
        assert operator.patch(f"{base}/{ids[name]}", json={"body": {"score": 2}}).status_code == 200
    out = operator.get(base, params={"query": "acme", "since": mark}).json()
    assert out["total"] == 2 and sorted(_names(out)) == ["C", "E"]
    out = operator.get(base, params={"query": "acme", "since": mark, "order": "name desc", "limit": "1",
                                     "offset": "1"}).json()
    assert (out["total"], _names(out)) == (2, ["C"])

    # every problem of a search at once, as for a listing
    r = operator.get(base, params={"query": "acme", "order": "nope", "since": "yesterday", "offset": "-1"})
    assert r.status_code == 422
    problems = r.json()["problems"]
    assert len(problems) == 3
    assert problems[0].startswith("since: expected an ISO 8601 timestamp")
    assert problems[1].startswith('order: "nope" is not a column; order by one of id, created_at, updated_at, name')
    assert problems[2].startswith("offset: expected a whole number from 0")

"""Route matching at the edges: ids beyond a bigint on every method are unknown (404, not 405),
and every 405 says which methods the route does take (Allow). Real server, real requests."""
from __future__ import annotations

from typing import Any

import pytest
import requests

BIG = (2**63, 2**64 + 5, 10**30)

ID_ROUTES = [
    ("GET", "/api/collections/{id}"), ("PATCH", "/api/collections/{id}"), ("DELETE", "/api/collections/{id}"),
    ("GET", "/api/collections/{id}/records"), ("POST", "/api/collections/{id}/records"),
    ("DELETE", "/api/collections/{id}/records"), ("PATCH", "/api/collections/1/records/{id}"),
    ("DELETE", "/api/collections/1/records/{id}"), ("PUT", "/api/agents/{id}/task"),
    ("POST", "/api/agents/{id}/tools/note_find"), ("PUT", "/api/guilds/{id}/collection-access"),
    ("PUT", "/api/agents/{id}/collection-access"), ("PATCH", "/api/runs/{id}"),
]


@pytest.mark.parametrize("method,route", ID_ROUTES)
def test_an_id_beyond_a_bigint_is_unknown_on_every_method(server, operator, method: str, route: str) -> None:
    for big in BIG:
        r = operator.request(method, server.url + route.format(id=big), json={})
        assert r.status_code == 404, (method, route, big, r.status_code, r.text)
        assert r.json()["status"] == 404
    # The largest bigint is still an id: one that does not exist.
    r = operator.request(method, server.url + route.format(id=2**63 - 1), json={})
    assert r.status_code in (404, 422), r.text


@pytest.mark.parametrize("method,path,allowed", [
    ("POST", "/api/health", {"GET", "HEAD", "OPTIONS"}),
    ("DELETE", "/api/collections", {"GET", "HEAD", "OPTIONS", "POST"}),
    ("PUT", "/api/collections/1/records", {"GET", "HEAD", "OPTIONS", "POST", "DELETE"}),
    ("POST", "/api/runs/1", {"PATCH", "OPTIONS"}),
    ("GET", "/api/agents/1/tools/note_find", {"POST", "OPTIONS"}),
    ("DELETE", "/api/openapi.json", {"GET", "HEAD", "OPTIONS"}),
])
def test_every_405_carries_allow_and_a_sentence(server, operator, method: str, path: str, allowed: set[str]) -> None:
    r = operator.request(method, server.url + path)
    assert r.status_code == 405
    assert {m.strip() for m in r.headers["Allow"].split(",")} == allowed
    assert r.json()["error"].startswith(f"{method} is not allowed here; this route takes ")

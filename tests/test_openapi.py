"""The OpenAPI document: every live /api/ route is in it, with its path parameters and methods."""
from __future__ import annotations

import re

import requests

from api.openapi import OPERATIONS, api_routes, openapi_path, shape


def test_every_api_route_is_documented(server) -> None:
    r = requests.get(f"{server.url}/api/openapi.json")  # public, like /api/health
    assert r.status_code == 200
    doc = r.json()
    assert doc["openapi"].startswith("3.")
    live = api_routes(server.gateway.api.url_map)
    assert len(live) >= 10
    missing = []
    for rule, method in live:
        path, params = openapi_path(rule)
        op = doc["paths"].get(path, {}).get(method)
        if op is None:
            missing.append(f"{method.upper()} {rule.rule} (endpoint {rule.endpoint})")
            continue
        assert op["summary"], (method, path)
        declared = [p["name"] for p in op.get("parameters", []) if p["in"] == "path"]
        assert declared == re.findall(r"\{([^}]+)\}", path), (method, path)
    assert not missing, ("routes missing from api/openapi.py OPERATIONS; add one entry for each:\n"
                         + "\n".join(missing))
    # Nothing documented that the app does not serve.
    served = {(openapi_path(rule)[0], method) for rule, method in live}
    assert {(p, m) for p, ops in doc["paths"].items() for m in ops} == served


def test_the_document_describes_the_collection_routes(server) -> None:
    r = requests.get(f"{server.url}/api/openapi.json")
    doc = r.json()
    create = doc["paths"]["/api/collections"]["post"]
    assert create["requestBody"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/CollectionCreate"}
    assert set(create["responses"]) >= {"201", "401", "409", "422"}
    patch = doc["paths"]["/api/collections/{collection_id}"]["patch"]
    assert patch["parameters"][0] == {"name": "collection_id", "in": "path", "required": True,
                                      "schema": {"type": "integer"}}
    column = doc["components"]["schemas"]["ColumnChange"]["properties"]
    assert "rename_from" in column and column["type"]["enum"] == ["text", "number", "boolean", "datetime", "array"]
    # Every $ref points at a schema the document defines.
    refs = set(re.findall(r'"#/components/schemas/([A-Za-z]+)"', r.text))
    assert refs and refs <= set(doc["components"]["schemas"])


def test_entries_match_rules_by_shape_whatever_the_parameter_names() -> None:
    assert shape("/api/agents/<int:id>/tools/<name>") == shape("/api/agents/{agent_id}/tools/{tool}")
    assert len({(shape(p), m) for p, m in OPERATIONS}) == len(OPERATIONS)

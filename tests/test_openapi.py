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
                                      "schema": {"type": "integer", "format": "int64", "minimum": 1,
                                                 "maximum": 2**63 - 1}}
    column = doc["components"]["schemas"]["ColumnChange"]["properties"]
    assert "rename_from" in column and column["type"]["enum"] == ["text", "number", "boolean", "datetime", "array"]
    # Every $ref points at a schema the document defines.
    refs = set(re.findall(r'"#/components/schemas/([A-Za-z]+)"', r.text))
    assert refs and refs <= set(doc["components"]["schemas"])


def test_entries_match_rules_by_shape_whatever_the_parameter_names() -> None:
    assert shape("/api/agents/<int:id>/tools/<name>") == shape("/api/agents/{agent_id}/tools/{tool}")
    assert len({(shape(p), m) for p, m in OPERATIONS}) == len(OPERATIONS)


def test_the_document_links_created_things_to_their_operations_and_lists_every_status(server) -> None:
    doc = requests.get(f"{server.url}/api/openapi.json").json()
    created = doc["paths"]["/api/collections"]["post"]["responses"]["201"]["links"]
    assert created["GetCollection"] == {"operationId": "collections.get_collection",
                                        "parameters": {"collection_id": "$response.body#/id"}}
    ops = {op["operationId"] for path in doc["paths"].values() for op in path.values()}
    assert {link["operationId"] for link in created.values()} <= ops
    record = doc["paths"]["/api/collections/{collection_id}/records"]["post"]["responses"]["201"]["links"]
    assert record["GetRecord"]["parameters"] == {"collection_id": "$request.path.collection_id",
                                                 "record_id": "$response.body#/record/id"}
    run = doc["paths"]["/api/runs"]["post"]["responses"]["201"]["links"]["SetRunStatus"]
    assert run["parameters"] == {"run_id": "$response.body#/id"}
    for path, methods in doc["paths"].items():
        for method, op in methods.items():
            assert "503" in op["responses"], (path, method)
            if op.get("security"):
                assert {"401", "404", "429"} <= set(op["responses"]), (path, method)
            if "requestBody" in op:
                assert {"413", "422"} <= set(op["responses"]), (path, method)
    tool = doc["paths"]["/api/agents/{agent_id}/tools/{tool}"]["post"]["parameters"][1]
    assert tool["name"] == "tool" and "note_find" in tool["schema"]["enum"]


def test_whole_numbers_written_with_a_fraction_are_the_same_numbers(server, operator, boot) -> None:
    """JSON Schema counts 3.0 as an integer, so the server does too (schemathesis sends such ids)."""
    r = operator.post(f"{server.url}/api/collections", json={
        "name": "leads", "purpose": "demo requests", "org_id": float(boot["org_id"]),
        "columns": [{"name": "email", "type": "text", "description": "the email"}]})
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    r = operator.put(f"{server.url}/api/agents/{boot['agent_id']}/collection-access",
                     json={"collection_id": float(cid), "mode": "read"})
    assert r.status_code == 200, r.text
    r = operator.put(f"{server.url}/api/agents/{boot['agent_id']}/collection-access",
                     data='{"collection_id": %d.5, "mode": "read"}' % cid, headers={"Content-Type": "application/json"})
    assert r.status_code == 422

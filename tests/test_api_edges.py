"""/api/ edges found in review: JSON bodies a parser or a database cannot take, numbers spelled in
digits other than ASCII, org_id of the wrong JSON type, and an OpenAPI document that says what the
routes really answer. Real server, real requests."""
from __future__ import annotations

import re
from typing import Any

import pytest
import requests


def task_url(server: Any, boot: dict[str, Any]) -> str:
    return f"{server.url}/api/agents/{boot['agent_id']}/task"


def tool_url(server: Any, boot: dict[str, Any], tool: str = "note_find") -> str:
    return f"{server.url}/api/agents/{boot['agent_id']}/tools/{tool}"


def leads(server: Any, operator: requests.Session) -> int:
    r = operator.post(f"{server.url}/api/collections", json={
        "name": "leads", "purpose": "People who asked for a demo",
        "columns": [{"name": "email", "type": "text", "description": "the email", "unique": True}]})
    assert r.status_code == 201, r.text
    return r.json()["id"]


def task_version(server: Any, operator: requests.Session, boot: dict[str, Any]) -> int:
    return operator.get(task_url(server, boot)).json()["version"]


# -- 5. JSON bodies ---------------------------------------------------------------------------------

@pytest.mark.parametrize("depth", [65, 2000, 100_000])
def test_a_deeply_nested_body_is_a_422(server, operator, service, boot, depth: int) -> None:
    before = task_version(server, operator, boot)
    body = '{"task": ' + "[" * depth + "]" * depth + "}"
    for session, url, method in ((operator, task_url(server, boot), "PUT"), (service, tool_url(server, boot), "POST")):
        r = session.request(method, url, data=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 422, (url, r.status_code, r.text[:200])
        assert r.json()["error"] == "the JSON body is nested too deeply; at most 64 levels of arrays and objects"
    assert task_version(server, operator, boot) == before


def test_nesting_within_the_cap_is_parsed(server, service, boot) -> None:
    body = '{"query": "x", "extra": ' + "[" * 60 + "]" * 60 + "}"
    r = service.post(tool_url(server, boot), data=body, headers={"Content-Type": "application/json"})
    # Parsed: the argument check saw the nested value and names it (note_find takes no "extra").
    assert r.status_code == 422, r.text
    assert r.json()["problems"] == ["extra: unknown argument; note_find takes query, level, limit"]


@pytest.mark.parametrize("body", ['{"task": "a\\ud800b"}', '{"task": "x", "\\udfff": 1}', '{"task": ["\\ud800"]}'])
def test_a_lone_surrogate_is_a_422_not_a_500(server, operator, boot, body: str) -> None:
    before = task_version(server, operator, boot)
    r = operator.put(task_url(server, boot), data=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert "lone surrogate escape (such as \\ud800)" in r.json()["error"]
    assert "lone surrogate escape (such as \\ud800)" in r.json()["problems"][0]
    assert task_version(server, operator, boot) == before


def test_a_lone_surrogate_in_a_record_or_tool_call_is_a_422(server, operator, service, boot) -> None:
    cid = leads(server, operator)
    r = operator.post(f"{server.url}/api/collections/{cid}/records", data='{"body": {"email": "\\ud83d"}}',
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and r.json()["problems"][0].startswith("body.email holds a lone surrogate")
    r = service.post(tool_url(server, boot), data='{"query": "\\udc00"}', headers={"Content-Type": "application/json"})
    assert r.status_code == 422 and "lone surrogate" in r.json()["problems"][0]


def test_nul_characters_never_crash_the_http_layer(server, operator, service, boot) -> None:
    r = service.post(tool_url(server, boot, "no_such_tool"), data='{"q": "a\\u0000b"}',
                     headers={"Content-Type": "application/json"})
    assert r.status_code == 404, r.text
    assert r.json()["error"].startswith("unknown tool no_such_tool; the tools are memory_get, memory_write, ")
    r = operator.get(f"{server.url}/api/file-changes", params={"display_path": "x", "limit": "1\x00"})
    assert r.status_code == 422 and "limit" in r.json()["problems"][0]


# -- 6. numbers in headers and query values -----------------------------------------------------------

@pytest.mark.parametrize("value", ["²", "١", "1.0", "-1", "", "99999999999"])
def test_if_match_takes_only_a_version_in_ascii_digits(server, operator, boot, value: str) -> None:
    before = task_version(server, operator, boot)
    r = operator.put(task_url(server, boot), json={"task": "new"}, headers={"If-Match": value.encode()})
    assert r.status_code == 422, r.text
    assert r.json()["error"].startswith("If-Match must be the task's version number, a whole number from 0 to")
    assert task_version(server, operator, boot) == before
    ok = operator.put(task_url(server, boot), json={"task": "new"}, headers={"If-Match": f'"{before}"'})
    assert ok.status_code == 200 and ok.json()["version"] == before + 1


@pytest.mark.parametrize("value", ["²", "١", "12a", "99999999999999999999"])
def test_x_run_id_takes_only_an_id_in_ascii_digits(server, service, boot, value: str) -> None:
    r = service.post(tool_url(server, boot), json={"query": "x"}, headers={"X-Run-Id": value.encode()})
    assert r.status_code == 422, r.text
    assert r.json()["error"].startswith("the X-Run-Id header: a whole number from 1 to 9223372036854775807")


@pytest.mark.parametrize("value", ["²", "١", "0", "1001", "ten"])
def test_file_changes_limit_takes_only_ascii_digits_in_range(server, operator, value: str) -> None:
    r = operator.get(f"{server.url}/api/file-changes", params={"display_path": "org/1/x.md", "limit": value})
    assert r.status_code == 422, r.text
    assert r.json()["problems"] == [f"limit: a whole number from 1 to 1000 in ASCII digits; got {value!r}"]


def test_records_limit_and_org_id_in_other_digits_are_refused(server, operator, boot) -> None:
    cid = leads(server, operator)
    for name in ("limit", "offset"):
        r = operator.get(f"{server.url}/api/collections/{cid}/records", params={name: "١"})
        assert r.status_code == 422 and f"{name}: expected a whole number" in r.text, r.text
    assert operator.get(f"{server.url}/api/collections/{cid}/records", params={"limit": "2"}).status_code == 200
    for value in ("١", "1.5", "0"):
        r = operator.get(f"{server.url}/api/collections", params={"org_id": value})
        assert r.status_code == 422 and r.json()["error"].startswith("org_id: a whole number from 1"), r.text
    r = operator.get(f"{server.url}/api/collections", params={"org_id": str(boot["org_id"])})
    assert r.status_code == 200


# -- 7. org_id in a body ------------------------------------------------------------------------------

@pytest.mark.parametrize("org_id", [1.9, True, "1", [1], 0])
def test_org_id_in_a_body_is_a_json_integer(server, operator, boot, org_id: Any) -> None:
    body = {"name": "leads", "purpose": "demo", "org_id": org_id if org_id != 1.9 else boot["org_id"] + 0.9,
            "columns": [{"name": "email", "type": "text", "description": "the email"}]}
    r = operator.post(f"{server.url}/api/collections", json=body)
    assert r.status_code == 422, r.text
    assert r.json()["error"].startswith("org_id must be an organisation's id, a JSON integer such as 1; got ")
    assert operator.get(f"{server.url}/api/collections").json()["collections"] == []
    body["org_id"] = boot["org_id"]
    assert operator.post(f"{server.url}/api/collections", json=body).status_code == 201


# -- 8. the OpenAPI document ---------------------------------------------------------------------------

def test_the_document_lists_what_the_routes_answer(server) -> None:
    doc = requests.get(f"{server.url}/api/openapi.json").json()
    paths = doc["paths"]
    add = paths["/api/collections/{collection_id}/records"]["post"]["responses"]
    assert {"200", "201", "409", "413", "422"} <= set(add)
    assert add["200"]["content"] == add["201"]["content"]  # the merged answer is a record result too
    assert {"409", "413", "422"} <= set(paths["/api/collections/{collection_id}/records/{record_id}"]["patch"]["responses"])
    assert "422" in paths["/api/collections/{collection_id}/records"]["get"]["responses"]
    assert "422" in paths["/api/collections"]["get"]["responses"]
    for route in ("/api/file-changes", "/api/file-changes/latest"):
        assert all("422" in op["responses"] for op in paths[route].values()), route
    task = paths["/api/agents/{agent_id}/task"]["put"]
    assert {"412", "413", "422"} <= set(task["responses"])
    assert set(task["requestBody"]["content"]) == {"application/json", "text/markdown"}
    assert "If-Match" in [p["name"] for p in task["parameters"] if p["in"] == "header"]
    tool = paths["/api/agents/{agent_id}/tools/{tool}"]["post"]
    assert [p["name"] for p in tool["parameters"] if p["in"] == "header"] == ["X-Run-Id", "X-Tool-Call-Id"]
    assert {"403", "409", "413", "422"} <= set(tool["responses"])
    assert tool["security"] == [{"bearer": []}]


def test_every_route_that_needs_credentials_documents_401_and_refuses_without(server) -> None:
    doc = requests.get(f"{server.url}/api/openapi.json").json()
    schemes = set(doc["components"]["securitySchemes"])
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if op["security"]:
                assert "401" in op["responses"], (method, path)
                assert {name for s in op["security"] for name in s} <= schemes
            # Every {id} parameter becomes 1; the one {tool} a tool name.
            url = server.url + re.sub(r"\{[a-z_]+_id\}", "1", path.replace("{tool}", "note_find"))
            r = requests.request(method.upper(), url)
            assert (r.status_code == 401) == bool(op["security"]), (method, path, r.status_code)


def test_basic_with_a_service_token_is_refused_on_the_tool_route(server, boot) -> None:
    r = requests.post(tool_url(server, boot), json={"query": "x"}, auth=(boot["email"], boot["service_token"]))
    assert r.status_code in (401, 404), r.text
    r = requests.post(tool_url(server, boot), json={"query": "x"},
                      headers={"Authorization": f"Bearer {boot['service_token']}"})
    assert r.status_code == 200, r.text


def test_ids_in_routes_are_ascii_digits_only(server, operator) -> None:
    made = operator.post(f"{server.url}/api/collections", json={
        "name": "digits", "purpose": "p", "columns": [{"name": "a", "type": "text", "description": "a"}]}).json()
    assert made["id"] == 1 and operator.get(f"{server.url}/api/collections/1").status_code == 200
    r = operator.get(f"{server.url}/api/collections/%D9%A1")  # Arabic-Indic one: not an id
    assert r.status_code == 404
    r = operator.get(f"{server.url}/api/collections/99999999999999999999")
    assert r.status_code == 404

"""The door of /api/: who gets in, who gets 401, and who gets 404 for another organisation."""
from __future__ import annotations

import subprocess
import sys
from typing import Any

import requests

from store import admin
from tests.conftest import REPO


def test_health_needs_no_credentials_and_reports_schema(server) -> None:
    r = requests.get(f"{server.url}/api/health")
    assert r.status_code == 200
    body = r.json()
    assert body["ok"] is True and body["store"] == "reachable"
    assert body["schema_version"] == body["schema_latest"] >= 1


def test_missing_or_wrong_credentials_get_401_with_a_challenge(server, boot: dict[str, Any]) -> None:
    url = f"{server.url}/api/agents/{boot['agent_id']}/tools/note_find"
    for auth in (None, (boot["email"], "wrong password"), ("nobody@example.com", "x" * 12)):
        r = requests.post(url, json={"query": "x"}, auth=auth)
        assert r.status_code == 401, auth
        assert r.headers["WWW-Authenticate"].startswith("Basic")
        # Credentials sent are told they were not accepted, not that some are required.
        assert r.json()["error"].startswith("authentication required" if auth is None else
                                            "the credentials sent were not accepted"), (auth, r.json())
    r = requests.post(url, json={"query": "x"}, headers={"Authorization": "Bearer hf_not-a-token"})
    assert r.status_code == 401 and r.json()["error"].startswith("the credentials sent were not accepted")


def test_service_token_reaches_the_tool_route_and_a_member_does_not(server, boot, operator, service) -> None:
    url = f"{server.url}/api/agents/{boot['agent_id']}/tools/no_such_tool"
    r = service.post(url, json={})
    assert r.status_code == 404
    assert "unknown tool no_such_tool" in r.json()["error"]
    # A member is an operator, not the orchestrator: the tool route does not exist for them.
    r = operator.post(url, json={})
    assert r.status_code == 404
    assert r.json()["error"].startswith("not found: this route is the orchestrator's")
    # And the orchestrator's token does not reach the operator's routes, told the same way.
    r = service.get(f"{server.url}/api/collections")
    assert r.status_code == 404 and r.json()["error"].startswith("not found: a service token reaches")


def test_another_organisations_agent_is_not_found(server, db, boot, service) -> None:
    other = admin.bootstrap(db, org_name="Other")
    r = service.post(f"{server.url}/api/agents/{other['agent_id']}/tools/note_find", json={"query": "x"})
    assert r.status_code == 404
    assert r.json()["error"] == f"unknown agent {other['agent_id']}"
    # the same answer as for an agent id that does not exist at all
    r2 = service.post(f"{server.url}/api/agents/999999/tools/note_find", json={"query": "x"})
    assert r2.status_code == 404 and r2.json()["error"] == "unknown agent 999999"


def test_member_token_works_as_basic_password_and_as_bearer(server, boot) -> None:
    r = server.session(basic=(boot["email"], boot["member_token"])).request(
        "PROPFIND", f"{server.url}/dav/", headers={"Depth": "0"})
    assert r.status_code == 207, r.text
    # Bearer is for /api/: an authenticated member meets the operator's answer (404 on the
    # orchestrator's route), not the 401 of a stranger.
    r = server.session(bearer=boot["member_token"]).post(
        f"{server.url}/api/agents/{boot['agent_id']}/tools/note_find", json={"query": "x"})
    assert r.status_code == 404
    # A member token is not a password for another user.
    r = server.session(basic=("someone@example.com", boot["member_token"])).request(
        "PROPFIND", f"{server.url}/dav/", headers={"Depth": "0"})
    assert r.status_code == 401


def test_dav_requires_basic_login(server, boot) -> None:
    r = requests.request("PROPFIND", f"{server.url}/dav/", headers={"Depth": "0"})
    assert r.status_code == 401
    assert "Basic" in r.headers["WWW-Authenticate"]
    r = requests.request("PROPFIND", f"{server.url}/dav/", headers={"Depth": "0"},
                         auth=(boot["email"], boot["password"]))
    assert r.status_code == 207


def test_the_product_hashes_passwords_at_argon2ids_full_cost() -> None:
    """The suite hashes at argon2id's smallest cost in its own process (conftest
    cheap_password_hashes); the product, as a command runs it, uses the library's default cost
    (RFC 9106's second recommendation: 64 MiB, 3 passes)."""
    done = subprocess.run([sys.executable, "-c", "from store.access import hash_password; print(hash_password('x'))"],
                          cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.startswith("$argon2id$v=19$m=65536,t=3,p=4$"), done.stdout


def test_tokens_are_stored_hashed(db, boot) -> None:
    with db.connection() as conn:
        rows = conn.execute("SELECT token_hash, prefix FROM api_tokens").fetchall()
        users = conn.execute("SELECT password_hash FROM users").fetchall()
    for row in rows:
        assert boot["service_token"].encode() not in bytes(row["token_hash"])
        assert len(bytes(row["token_hash"])) == 32
    assert all(u["password_hash"].startswith("$argon2id$") for u in users)

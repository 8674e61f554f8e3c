"""What careless or hostile clients send the gateway as a whole: always a 4xx with a sentence,
never a 500, a traceback or a dropped connection."""
from __future__ import annotations

import base64
import http.client
import json
from typing import Any
from urllib.parse import urlparse

import pytest


def raw(server, method: str, path: str, headers: dict[str, str] | None = None, body: bytes = b"") -> tuple[int, str]:
    """One request with exactly these bytes (requests would quote or refuse some of them)."""
    u = urlparse(server.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.putrequest(method, path, skip_accept_encoding=True)
    for k, v in (headers or {}).items():
        conn.putheader(k, v)
    conn.endheaders(body or None)
    r = conn.getresponse()
    text = r.read().decode("utf-8", "replace")
    conn.close()
    return r.status, text


def basic(raw_credentials: bytes) -> str:
    return "Basic " + base64.b64encode(raw_credentials).decode()


@pytest.mark.parametrize("header", [basic(b"nocolon"), basic(b"a\0@example.com:b"), basic(b"\xff:\xff"),
                                    "Basic ###", basic(b"ada@example.com:" + b"x" * 5000)])
@pytest.mark.parametrize("path", ["/dav/", "/api/collections"])
def test_garbled_basic_credentials_are_a_failed_login(server, boot, header: str, path: str) -> None:
    status, text = raw(server, "GET", path, {"Authorization": header})
    assert status == 401, text
    assert "Traceback" not in text and "exception" not in text.lower()


def test_a_path_that_is_not_utf8_is_a_400(server, boot) -> None:
    for path in ("/dav/%ff", "/dav/org/%ED%A0%80.md"):
        status, text = raw(server, "GET", path, {"Authorization": basic(b"ada@example.com:correct horse battery")})
        assert status == 400 and "not valid UTF-8" in text


def test_a_negative_content_length_is_a_400(server, boot) -> None:
    u = urlparse(server.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.putrequest("PUT", f"/dav/org/{boot['org_id']}/x.md")
    conn.putheader("Authorization", basic(b"ada@example.com:correct horse battery"))
    conn.putheader("Content-Length", "-5")
    conn.endheaders()
    r = conn.getresponse()
    assert r.status == 400 and b"not a number of bytes" in r.read()


@pytest.mark.parametrize("text", ["a\u0000b", "\ud800"])
def test_text_postgresql_cannot_hold_is_a_422_everywhere(server, boot, operator, service, text: str) -> None:
    tool = f"{server.url}/api/agents/{boot['agent_id']}/tools"

    def post(session, url: str, payload: Any):
        # json.dumps keeps a lone surrogate as the escape \ud800, as a JSON client would send it.
        return session.post(url, data=json.dumps(payload), headers={"Content-Type": "application/json"})

    for r in (post(service, f"{tool}/note_find", {"query": text}),
              post(service, f"{tool}/note_get", {"path": f"org/{boot['org_id']}/{text}.md"}),
              post(service, f"{tool}/note_write", {"level": "org", "key": f"{text}.md", "content": "x"}),
              post(operator, f"{server.url}/api/collections",
                   {"name": "t", "purpose": text, "columns": [{"name": "a", "type": "text", "description": "a"}]})):
        assert r.status_code in (403, 404, 422), (r.request.url, r.status_code, r.text)
        assert r.json()["error"], r.text
    # A lookup by a path with a NUL simply finds nothing; a surrogate is refused with the body.
    r = post(operator, f"{server.url}/api/file-changes/latest", {"display_paths": [text]})
    if "\0" in text:
        assert r.status_code == 200 and r.json()["latest"] == {text: None}
    else:
        assert r.status_code == 422 and "lone surrogate" in r.json()["error"]


def test_options_star_says_what_the_server_answers(server, boot) -> None:
    """``OPTIONS *`` asks about the server as a whole (RFC 9110 9.3.7): every method some path
    takes, not the web app's page saying there is no page at /*; any other method on * is a 400
    (cheroot's own, with its sentence)."""
    u = urlparse(server.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request("OPTIONS", "*")
    r = conn.getresponse()
    assert r.read() == b""
    assert r.status == 200
    allow = {m.strip() for m in r.getheader("Allow", "").split(",")}
    assert {"OPTIONS", "GET", "PUT", "PROPFIND", "LOCK", "PATCH"} <= allow
    conn.close()
    status, text = raw(server, "GET", "*")
    assert status == 400 and "absolute-path" in text, text

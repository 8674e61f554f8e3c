"""What careless or hostile clients send the gateway as a whole: always a 4xx with a sentence,
never a 500, a traceback or a dropped connection."""
from __future__ import annotations

import base64
import http.client
import json
import socket
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


def ask(server, head: str) -> tuple[int, dict[str, str], str]:
    """Send a request head of exactly these lines (no body: a declared length the door refuses
    unread) and read the answer: status, headers (lower-case names), body."""
    u = urlparse(server.url)
    with socket.create_connection((u.hostname, u.port), timeout=10) as s:
        s.sendall(head.replace("\n", "\r\n").encode("latin-1") + b"\r\n\r\n")
        answer = b""
        while True:
            head_end = answer.find(b"\r\n\r\n")
            if head_end >= 0:
                lines = answer[:head_end].decode("latin-1").split("\r\n")
                headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
                if len(answer) - head_end - 4 >= int(headers.get("content-length", "0")):
                    return (int(lines[0].split(" ")[1]), headers,
                            answer[head_end + 4:].decode("utf-8", "replace"))
            got = s.recv(65536)
            assert got, f"the connection closed before a whole answer: {answer[:300]!r}"
            answer += got


def test_a_body_over_its_limit_is_refused_in_the_format_of_who_asked(server, boot) -> None:
    """A form over the web app's limit is the web app's error page (it was a line of plain text),
    saying the limit and offering the form back, not a login; the API's refusal is its JSON error;
    a WebDAV PUT keeps the store's sentence in plain text."""
    origin = f"Host: {urlparse(server.url).netloc}\nReferer: {server.url}/notes/new"
    status, headers, body = ask(server, f"POST /notes/new HTTP/1.1\n{origin}\n"
                                        "Content-Type: application/x-www-form-urlencoded\nContent-Length: 3000000")
    assert status == 413 and headers["content-type"].startswith("text/html"), (status, headers, body[:300])
    assert "<title>Too large" in body and "a form here takes at most 2,097,152 bytes (2 MB" in body
    assert 'href="/notes/new">Back to the form</a>' in body and ">Log in<" not in body
    assert headers["connection"] == "close" and "default-src 'none'" in headers["content-security-policy"]

    status, headers, body = ask(server, "POST /api/collections HTTP/1.1\nHost: x\n"
                                        "Content-Type: application/json\nContent-Length: 3000000")
    assert status == 413 and headers["content-type"] == "application/json"
    assert json.loads(body) == {"error": "the body is 3000000 bytes; an API request body is at most 2097152 bytes. "
                                         "Nothing was read or stored", "problems": [], "status": 413}

    status, headers, body = ask(server, f"PUT /dav/org/{boot['org_id']}/big.md HTTP/1.1\nHost: x\n"
                                        f"Authorization: {basic(b'ada@example.com:correct horse battery')}\n"
                                        "Content-Length: 3000000")
    assert status == 413 and headers["content-type"].startswith("text/plain") and "big.md" in body


@pytest.mark.parametrize("path, kind", [("/databases", "text/html"), ("/api/collections", "application/json"),
                                        ("/dav/", "text/plain")])
def test_a_head_over_its_limit_is_refused_in_the_format_of_who_asked(server, boot, path: str, kind: str) -> None:
    """Headers (a cookie grown too large) or a request line over 64 KB: the door refuses them
    before any application runs, in the format of the part of the tree the path names (it was
    cheroot's "The headers sent with the request exceed the maximum allowed bytes." in plain
    text everywhere, also under /api/, whose every other answer is JSON)."""
    for head, status, words in ((f"GET {path} HTTP/1.1\nHost: x\nCookie: hf={'c' * 70_000}", 431,
                                 "headers are over 65,536 bytes"),
                                (f"GET {path}?q={'q' * 70_000} HTTP/1.1\nHost: x", 414,
                                 "Request-URI (the path and its query) is over 65,536 bytes")):
        got, headers, body = ask(server, head)
        assert got == status and headers["content-type"].startswith(kind), (got, headers, body[:300])
        assert headers["connection"] == "close"
        if kind == "application/json":
            assert words in json.loads(body)["error"] and json.loads(body)["status"] == status
        elif kind == "text/html":
            assert "<h1>" in body and words in body.replace("&#39;", "'") and ">Log in<" not in body
        else:
            assert words in body and "maximum allowed bytes" not in body


def test_repeated_slashes_are_one_path_and_never_a_redirect_to_the_requests_host(server, boot) -> None:
    """//databases and //api/collections were a 400 saying "Absolute URI not allowed if server is
    not a proxy"; /api//collections and /notes//... a 308 whose Location was built from the Host
    header (Host: evil.example sent the client to http://evil.example/...). Repeated slashes are
    read as one: the answer is the one-slash path's. WebDAV paths keep their own reading."""
    login = f"Authorization: {basic(b'ada@example.com:correct horse battery')}"
    evil = "Host: evil.example"
    org = boot["org_id"]
    for doubled, single in (("//databases", "/databases"), ("/notes//org", "/notes/org"),
                            ("//api/collections", "/api/collections"), ("/api//collections", "/api/collections"),
                            ("///api///health", "/api/health"), ("//dav/", "/dav/"),
                            (f"/dav//org/{org}/", f"/dav/org/{org}/")):
        status, headers, body = ask(server, f"GET {doubled} HTTP/1.1\n{evil}\n{login}")
        expected, expected_headers, expected_body = ask(server, f"GET {single} HTTP/1.1\n{evil}\n{login}")
        assert (status, headers.get("location")) == (expected, expected_headers.get("location")), (doubled, body[:300])
        assert status not in (301, 308, 400) and "evil.example" not in headers.get("location", "")
        assert headers["content-type"] == expected_headers["content-type"]
    status, headers, body = ask(server, f"GET /api//collections HTTP/1.1\n{evil}\n{login}")
    assert status == 200 and "collections" in json.loads(body)

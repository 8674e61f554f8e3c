"""Every WebDAV answer complete and with the right status (issue 13, and issue 15's DAV items):
errors answered before the provider carry their body, another organisation's things are 404,
getetag equals the ETag header, and no error body leaks an exception or a driver message."""
from __future__ import annotations

import socket
from typing import Any
from urllib.parse import urlsplit
from xml.etree import ElementTree as ET

import pytest
import requests

from store import admin
from store.db import Database
from tests.test_dav import Dav

NS = {"d": "DAV:"}


@pytest.fixture
def dav(server: Any, operator: requests.Session, boot: dict[str, Any]) -> Dav:
    return Dav(server, operator, boot)


def raw_request(server: Any, request_line_path: str, method: str = "GET", auth: str = "") -> tuple[str, dict, bytes]:
    """One request with the path sent exactly as written (no client normalisation), read to its
    end: a response whose body never comes fails here with a timeout."""
    host = urlsplit(server.url)
    with socket.create_connection((host.hostname, host.port), timeout=5) as s:
        s.sendall(f"{method} {request_line_path} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {auth}\r\n"
                  "Connection: close\r\nContent-Length: 0\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    return lines[0], headers, body


def basic(boot: dict[str, Any]) -> str:
    import base64
    return base64.b64encode(f"{boot['email']}:{boot['password']}".encode()).decode()


@pytest.mark.parametrize("path", ["/dav/../x", "/dav/org/1/%2e%2e/%2e%2e/..", "/dav/org/%2e%2e/%2e%2e/etc"])
def test_errors_before_the_provider_carry_their_body(server: Any, boot: dict[str, Any], path: str) -> None:
    status, headers, body = raw_request(server, path, auth=basic(boot))
    assert status.split()[1].startswith("4"), status
    assert int(headers["content-length"]) == len(body) > 0


def test_another_organisations_folder_is_unknown(dav: Dav, server: Any, db: Database) -> None:
    other = admin.bootstrap(db, org_name="Other", email="bob@example.com", password="another horse battery")
    theirs = f"org/{other['org_id']}/guilds/{other['guild_id']}"
    for method, kw in (("PUT", {"data": b"x"}), ("GET", {}), ("DELETE", {}), ("MKCOL", {}),
                       ("PROPFIND", {"headers": {"Depth": "0"}}), ("LOCK", {"data": b""})):
        for path in (f"{theirs}/x.md", theirs + "/", f"org/{other['org_id']}/x.md"):
            r = dav.req(method, path, **kw)
            assert r.status_code == 404, (method, path, r.status_code, r.text)
    r = dav.move(f"{dav.g}/nothing.md", f"{theirs}/x.md")
    assert r.status_code == 404
    dav.put(f"{dav.g}/mine.md", "m")
    r = dav.move(f"{dav.g}/mine.md", f"{theirs}/x.md")
    assert r.status_code in (404, 409) and dav.get(f"{dav.g}/mine.md").text == "m"


def test_getetag_is_the_etag_header(dav: Dav) -> None:
    dav.put(f"{dav.g}/tag.md", "t")
    etag = dav.get(f"{dav.g}/tag.md").headers["ETag"]
    r = dav.req("PROPFIND", f"{dav.g}/tag.md", headers={"Depth": "0"})
    assert ET.fromstring(r.content).findtext(".//d:getetag", namespaces=NS) == etag
    assert etag.startswith('"') and etag.endswith('"')
    r = dav.req("PROPFIND", f"{dav.g}/", headers={"Depth": "1"})
    tags = [e.text for e in ET.fromstring(r.content).findall(".//d:getetag", NS) if e.text]
    assert etag in tags


@pytest.mark.parametrize("dest", ["/dav/", "/dav", "/dav/org/", "/dav/org/1/"])
def test_move_or_copy_to_the_root_is_a_sentence(dav: Dav, server: Any, dest: str) -> None:
    dav.put(f"{dav.g}/stay.md", "s")
    for method in ("MOVE", "COPY"):
        r = dav.req(method, f"{dav.g}/stay.md", headers={"Destination": server.url + dest})
        assert r.status_code == 403, (method, dest, r.status_code, r.text)
        assert "Source exception" not in r.text and "Traceback" not in r.text
        folder = dest.removeprefix("/dav").rstrip("/").replace("/org/1", f"/org/{dav.org}") or "/"
        assert f"{folder} is a folder; files go inside it" in r.text, r.text
    assert dav.get(f"{dav.g}/stay.md").text == "s"


def test_error_bodies_carry_no_exception_or_driver_message(dav: Dav, server: Any, caplog: Any) -> None:
    # A name PostgreSQL cannot hold and an oversized If header reach different layers; neither
    # answer may show an exception's repr.
    for r in (dav.put(f"{dav.g}/nul%00.md", "x"), dav.put(f"{dav.g}/a.md", b"\xff\xfe"),
              dav.req("PROPFIND", f"{dav.g}/", headers={"Depth": "1"}, data=b"<not xml")):
        assert "Source exception" not in r.text and "psycopg" not in r.text and "Error(" not in r.text, r.text


def send_and_hang_up(server: Any, boot: dict[str, Any], path: str, head: str, body: bytes) -> None:
    """A client that sends part of a PUT and loses its network (closes its side)."""
    host = urlsplit(server.url)
    with socket.create_connection((host.hostname, host.port), timeout=5) as s:
        s.sendall(f"PUT {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {basic(boot)}\r\n{head}\r\n".encode() + body)
        s.shutdown(socket.SHUT_WR)
        while s.recv(65536):
            pass


@pytest.mark.parametrize("how", ["short", "chunked"])
@pytest.mark.parametrize("exists", [True, False], ids=["existing", "new"])
def test_an_interrupted_put_stores_nothing(dav: Dav, server: Any, boot: dict[str, Any], db: Database,
                                           how: str, exists: bool) -> None:
    from tests.test_dav import artifact
    note = f"{dav.g}/phone.md"
    if exists:
        dav.put(note, "the whole previous text")
    if how == "short":
        send_and_hang_up(server, boot, "/dav/" + note, "Content-Length: 1000\r\n", b"only the first bytes")
    else:
        send_and_hang_up(server, boot, "/dav/" + note, "Transfer-Encoding: chunked\r\n",
                         b"14\r\nonly the first bytes\r\n")
    row = artifact(db, note)
    if exists:
        assert row["content"] == "the whole previous text" and row["version"] == 1
    else:
        assert row is None
    # The same, complete, is saved.
    assert dav.put(note, "complete").status_code in (201, 204)
    assert dav.get(note).text == "complete"

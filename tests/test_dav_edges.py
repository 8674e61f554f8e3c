"""WebDAV edges found in review: what another organisation can learn from a pending lock, where dead
properties go and how many, Destination and If headers, encoded slashes, odd ranges, and the
hardening headers of ?view=html. Raw HTTP against the real gateway."""
from __future__ import annotations

import html
from typing import Any
from urllib.parse import quote

import pytest
import requests

from store import admin, properties
from store.db import Database

NS = {"d": "DAV:"}
LOCK_BODY = (b'<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/>'
             b'</D:lockscope><D:locktype><D:write/></D:locktype><D:owner>ada-secret-owner</D:owner></D:lockinfo>')


def proppatch_body(**values: str) -> bytes:
    props = "".join(f"<X:{k}>{v}</X:{k}>" for k, v in values.items())
    return (f'<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:X="urn:x"><D:set><D:prop>{props}'
            f'</D:prop></D:set></D:propertyupdate>').encode()


ALLPROP = b'<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:allprop/></D:propfind>'


class Dav:
    def __init__(self, server: Any, auth: tuple[str, str], boot: dict[str, Any]) -> None:
        self.base = server.url + "/dav"
        self.s = requests.Session()
        self.s.auth = auth
        self.agent = f"org/{boot['org_id']}/agents/{boot['agent_id']}"
        self.org = f"org/{boot['org_id']}"

    def url(self, path: str) -> str:
        return f"{self.base}/{quote(path.lstrip('/'))}"

    def req(self, method: str, path: str, *, raw: bool = False, **kw: Any) -> requests.Response:
        return self.s.request(method, f"{self.base}/{path.lstrip('/')}" if raw else self.url(path), **kw)


@pytest.fixture
def ada(server: Any, boot: dict[str, Any]) -> Dav:
    return Dav(server, (boot["email"], boot["password"]), boot)


@pytest.fixture
def bob(server: Any, db: Database) -> Dav:
    other = admin.bootstrap(db, org_name="Other", email="bob@example.com", password="another horse battery")
    return Dav(server, ("bob@example.com", "another horse battery"), other)


def note(db: Database, display_path: str) -> dict | None:
    with db.connection() as conn:
        return conn.execute("SELECT id FROM artifacts WHERE display_path = %s AND deleted_at IS NULL",
                            (display_path,)).fetchone()


def said(r: requests.Response) -> str:
    """The refusal's sentence as a person reads it (WsgiDAV escapes it into an HTML page)."""
    return html.unescape(r.text)


def props_of(db: Database, path: str) -> dict[str, str]:
    with db.connection() as conn:
        return properties.get_all(conn, path)


# -- 1. a pending lock is invisible to other organisations ----------------------------------------

def test_a_pending_lock_is_unknown_to_another_organisation(ada: Dav, bob: Dav) -> None:
    pending = f"{ada.agent}/upload.md"
    r = ada.req("LOCK", pending, data=LOCK_BODY, headers={"Timeout": "Second-600", "Depth": "0"})
    assert r.status_code in (200, 201), r.text
    # Ada still sees her pending name and its lock (Finder's LOCK-then-PUT).
    mine = ada.req("PROPFIND", pending, headers={"Depth": "0"})
    assert mine.status_code == 207 and b"ada-secret-owner" in mine.content
    # To her it is an empty file until its PUT (RFC 4918 7.3): HEAD and GET agree.
    head, get = ada.req("HEAD", pending), ada.req("GET", pending)
    assert (head.status_code, head.headers["Content-Length"]) == (200, "0")
    assert (get.status_code, get.content) == (200, b""), get.text[:200]
    # Bob, of another organisation, learns nothing: the same 404 as for a name never locked.
    seen = bob.req("PROPFIND", pending, headers={"Depth": "0"})
    assert seen.status_code == 404 and b"ada-secret-owner" not in seen.content
    assert r.headers["Lock-Token"].strip("<>").encode() not in seen.content
    assert bob.req("HEAD", pending).status_code == 404
    assert bob.req("DELETE", pending).status_code == 404
    assert bob.req("MOVE", pending, headers={"Destination": bob.url(f"{bob.agent}/x.md")}).status_code == 404
    assert bob.req("GET", pending).status_code == 404


@pytest.mark.parametrize("name, status", [("notes.txt", 403), ("newfolder.md/", 403), ("collections/none/9", 409)])
def test_a_lock_on_a_name_no_put_could_write_is_refused(ada: Dav, name: str, status: int) -> None:
    """A lock on a name not written yet reserves it for the PUT that follows (Finder, Office): a
    name no PUT could write is refused now with the PUT's sentence, not granted a lock (201)."""
    path = f"{ada.org}/{name}" if name.startswith("collections") else f"{ada.agent}/{name}"
    r = ada.req("LOCK", path, data=LOCK_BODY, headers={"Timeout": "Second-600", "Depth": "0"})
    assert r.status_code == status, (r.status_code, r.text[:300])
    assert "Lock-Token" not in r.headers
    assert ada.req("PROPFIND", path, headers={"Depth": "0"}).status_code == 404


# -- 2. where dead properties go, and how many ------------------------------------------------------

@pytest.mark.parametrize("folder", ["", "org/"])
def test_the_shared_layout_takes_no_properties(ada: Dav, bob: Dav, db: Database, folder: str) -> None:
    r = ada.req("PROPPATCH", folder, data=proppatch_body(color="red"))
    assert r.status_code == 403, r.text
    assert "shared by every organisation" in said(r) and "org/<org_id>/" in said(r)
    assert props_of(db, folder.strip("/")) == {}
    # One left there before this rule is not shown to anyone.
    with db.transaction() as conn:
        conn.execute("INSERT INTO path_properties (path, name, value) VALUES (%s, '{urn:x}old', '<x/>')",
                     (folder.strip("/"),))
    seen = bob.req("PROPFIND", folder, headers={"Depth": "0"}, data=ALLPROP)
    assert seen.status_code == 207 and b"urn:x" not in seen.content


def test_read_only_folders_take_no_properties(ada: Dav, operator: requests.Session, server: Any, db: Database) -> None:
    made = operator.post(f"{server.url}/api/collections", json={
        "name": "leads", "purpose": "demo", "columns": [
            {"name": "email", "type": "text", "description": "the email"}]})
    assert made.status_code == 201, made.text
    for path in (f"{ada.org}/collections/", f"{ada.org}/collections/leads/", f"{ada.org}/collections/leads/collection.json"):
        r = ada.req("PROPPATCH", path, data=proppatch_body(color="red"))
        assert r.status_code == 403 and "read-only, so it takes no properties" in said(r), (path, r.text)
        assert props_of(db, path.strip("/")) == {}
    # A note and the agent's folder do take them.
    assert ada.req("PUT", f"{ada.agent}/n.md", data=b"# n\n").status_code == 201
    for path in (f"{ada.agent}/n.md", f"{ada.agent}/"):
        r = ada.req("PROPPATCH", path, data=proppatch_body(color="red"))
        assert r.status_code == 207 and b"200 OK" in r.content, r.text
        assert list(props_of(db, path.strip("/"))) == ["{urn:x}color"]


def test_property_values_and_counts_are_capped(ada: Dav, db: Database) -> None:
    path = f"{ada.agent}/n.md"
    assert ada.req("PUT", path, data=b"# n\n").status_code == 201
    r = ada.req("PROPPATCH", path, data=proppatch_body(big="a" * 5000, small="ok"))
    assert r.status_code == 207
    assert b"413" in r.content and b"holds at most 4096 bytes" in r.content
    assert b"424" in r.content  # the other property of the request is not written either
    assert props_of(db, path) == {}

    fill = {f"p{i}": "v" for i in range(properties.MAX_PER_PATH - 2)}
    assert b"200 OK" in ada.req("PROPPATCH", path, data=proppatch_body(**fill)).content
    # Three more in one request would pass the cap: none of them is written.
    r = ada.req("PROPPATCH", path, data=proppatch_body(q1="v", q2="v", q3="v"))
    assert b"507" in r.content and b"the most one file or folder can hold (64)" in r.content
    assert len(props_of(db, path)) == properties.MAX_PER_PATH - 2
    assert b"200 OK" in ada.req("PROPPATCH", path, data=proppatch_body(q1="v", q2="v")).content
    assert b"200 OK" in ada.req("PROPPATCH", path, data=proppatch_body(p0="changed")).content  # not a new name
    assert b"507" in ada.req("PROPPATCH", path, data=proppatch_body(q3="v")).content
    assert len(props_of(db, path)) == properties.MAX_PER_PATH


# -- 3, 4. Destination and encoded slashes --------------------------------------------------------

@pytest.mark.parametrize("destination, says", [
    ("::::", "is not a URL or an absolute path"),
    ("", "the Destination header is empty"),
    ("AGENT/%ff.md", "is not valid UTF-8 once percent-decoded"),
    ("AGENT/a%2Fb.md", "encoded slash"),
    ("ROOT/api/x.md", "is outside /dav/"),
])
def test_a_bad_destination_is_a_400_with_a_sentence(ada: Dav, db: Database, destination: str, says: str) -> None:
    src = f"{ada.agent}/m.md"
    assert ada.req("PUT", src, data=b"m").status_code == 201
    dest = destination.replace("AGENT", ada.url(ada.agent)).replace("ROOT", ada.base.removesuffix("/dav"))
    for method in ("COPY", "MOVE"):
        r = ada.req(method, src, headers={"Destination": dest})
        assert r.status_code == 400 and says in said(r), (method, r.status_code, r.text)
    with db.connection() as conn:
        names = [r["display_path"] for r in conn.execute(
            "SELECT display_path FROM artifacts WHERE display_path LIKE %s AND deleted_at IS NULL",
            (f"{ada.agent}/%",))]
    assert f"{ada.agent}/m.md" in names and not any("\ufffd" in n or "%2F" in n or "a/b" in n for n in names)


def test_a_new_file_in_a_folder_that_does_not_exist_is_a_409_naming_where_it_can_go(ada: Dav, db: Database) -> None:
    """RFC 4918 9.7.1 / 9.9.4: a PUT or MOVE whose folder is missing is a 409 (it was a 404
    'unknown file /org/1/sub', as if the file itself were what was missing)."""
    org = ada.org
    r = ada.req("PUT", f"{org}/sub/x.md", data=b"x")
    assert r.status_code == 409 and f"there is no folder /{org}/sub to put x.md in" in said(r), r.text
    assert "notes are flat" in said(r) and f"such as /{org}/x.md" in said(r)
    assert ada.req("PUT", f"{ada.agent}/m.md", data=b"m").status_code == 201
    moved = ada.req("MOVE", f"{ada.agent}/m.md", headers={"Destination": ada.url(f"{ada.agent}/sub/m.md")})
    assert moved.status_code == 409 and f"such as /{ada.agent}/m.md" in said(moved), moved.text
    assert note(db, f"{ada.agent}/m.md") is not None and note(db, f"{org}/x.md") is None


def test_a_destination_on_this_server_written_another_way_is_this_server(ada: Dav, db: Database) -> None:
    """A Destination naming this server with its default port written out, or its name in
    capitals, is this server (it was a 502: WsgiDAV compared the text); another server is still a
    502, with a sentence that says what to send instead."""
    src = f"{ada.agent}/m.md"
    assert ada.req("PUT", src, data=b"m").status_code == 201
    as_proxied = {"Host": "notes.example.com"}
    for n, host in enumerate(("notes.example.com:80", "NOTES.example.com")):
        dest = f"http://{host}/dav/{ada.agent}/moved{n}.md"
        r = ada.req("MOVE", src, headers={**as_proxied, "Destination": dest})
        assert r.status_code == 201, (host, r.status_code, r.text)
        src = f"{ada.agent}/moved{n}.md"
    elsewhere = ada.req("MOVE", src, headers={**as_proxied, "Destination": f"http://other.example.com/dav/{ada.agent}/x.md"})
    assert elsewhere.status_code == 502 and "this request came to 'notes.example.com'" in said(elsewhere)
    assert "proxy_set_header Host" in said(elsewhere)
    assert note(db, src) is not None and note(db, f"{ada.agent}/x.md") is None


def test_an_encoded_slash_in_a_name_is_refused(ada: Dav, db: Database) -> None:
    for encoded in ("a%2Fb.md", "a%2fb.md"):
        r = ada.req("PUT", f"{ada.agent}/{encoded}", raw=True, data=b"# x\n")
        assert r.status_code == 400 and "encoded slash (%2F)" in said(r) and "notes are flat" in said(r)
    assert note(db, f"{ada.agent}/a%2Fb.md") is None and note(db, f"{ada.agent}/a/b.md") is None
    # A name holding a percent sign itself still works: %25 is not a slash.
    assert ada.req("PUT", f"{ada.agent}/100%.md", data=b"# x\n").status_code == 201
    assert note(db, f"{ada.agent}/100%.md") is not None


@pytest.mark.parametrize("method, headers, says", [
    ("PROPFIND", {"Depth": "2"}, "is not one of 0, 1 or infinity"),
    ("MOVE", {"Overwrite": "maybe"}, "is neither T nor F"),
    ("UNLOCK", {}, "UNLOCK needs a Lock-Token header"),
])
def test_a_bad_depth_overwrite_or_missing_lock_token_says_what_would_work(ada: Dav, db: Database, method: str,
                                                                         headers: dict[str, str], says: str) -> None:
    src = f"{ada.agent}/h.md"
    assert ada.req("PUT", src, data=b"h").status_code == 201
    if method == "MOVE":
        headers = {**headers, "Destination": ada.url(f"{ada.agent}/moved.md")}
    r = ada.req(method, src, headers=headers)
    assert r.status_code == 400 and says in said(r), (r.status_code, r.text[:400])
    assert note(db, src) is not None and note(db, f"{ada.agent}/moved.md") is None


# -- 9. If and Range ---------------------------------------------------------------------------------

@pytest.mark.parametrize("header", ["garbage", "(", "(<x>", "<http://h/x>", "()"])
def test_a_malformed_if_header_is_a_400(ada: Dav, db: Database, header: str) -> None:
    r = ada.req("PUT", f"{ada.agent}/c.md", data=b"x", headers={"If": header})
    assert r.status_code == 400 and "the If header" in said(r) and "malformed" in said(r), r.text
    assert note(db, f"{ada.agent}/c.md") is None


def test_well_formed_if_headers_still_work(ada: Dav) -> None:
    path = f"{ada.agent}/c.md"
    assert ada.req("PUT", path, data=b"x").status_code == 201
    r = ada.req("LOCK", path, data=LOCK_BODY, headers={"Timeout": "Second-60", "Depth": "0"})
    token = r.headers["Lock-Token"]
    assert ada.req("PUT", path, data=b"y", headers={"If": f"({token})"}).status_code == 204
    tagged = f"<{ada.url(path)}> ({token})"
    assert ada.req("PUT", path, data=b"z", headers={"If": tagged}).status_code == 204
    assert ada.req("PUT", path, data=b"w", headers={"If": "(<opaquelocktoken:nope>)"}).status_code in (412, 423)


def test_ranges_are_one_satisfiable_range_or_the_whole_file(ada: Dav) -> None:
    path = f"{ada.agent}/r.md"
    assert ada.req("PUT", path, data=b"0123456789").status_code == 201
    r = ada.req("GET", path, headers={"Range": "bytes=2-4"})
    assert (r.status_code, r.content, r.headers["Content-Range"]) == (206, b"234", "bytes 2-4/10")
    assert ada.req("GET", path, headers={"Range": "bytes=-3"}).content == b"789"
    for ignored in ("bytes=5-2", "bytes=0-0,2-3", "items=0-1", "bytes=abc"):
        r = ada.req("GET", path, headers={"Range": ignored})
        assert (r.status_code, r.content) == (200, b"0123456789"), ignored
    r = ada.req("GET", path, headers={"Range": "bytes=-0"})
    assert r.status_code == 416 and r.headers.get("Content-Range") == "bytes */10"
    assert ada.req("GET", path, headers={"Range": "bytes=20-"}).status_code == 416


# -- 10. the HTML view ------------------------------------------------------------------------------

def test_the_html_view_forbids_scripts_and_sniffing(ada: Dav) -> None:
    path = f"{ada.agent}/v.md"
    assert ada.req("PUT", path, data=b"# Title\n\n<script>alert(1)</script>\n").status_code == 201
    r = ada.req("GET", path, params={"view": "html"})
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/html")
    assert r.headers["Content-Security-Policy"] == "default-src 'none'; style-src 'unsafe-inline'"
    assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert b"<script>" not in r.content

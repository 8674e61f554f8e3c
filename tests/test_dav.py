"""The Host Finder over WebDAV, raw HTTP against the real gateway: every rule of issue 6."""
from __future__ import annotations

import unicodedata
from typing import Any
from xml.etree import ElementTree as ET

import pytest
import requests
from urllib.parse import quote

from store import admin
from store.db import Database

NS = {"d": "DAV:"}


class Dav:
    def __init__(self, server: Any, session: requests.Session, boot: dict[str, Any]) -> None:
        self.base = server.url + "/dav"
        self.s = session
        self.org, self.guild, self.agent = boot["org_id"], boot["guild_id"], boot["agent_id"]

    def url(self, path: str) -> str:
        return f"{self.base}/{quote(path.lstrip('/'))}"

    def req(self, method: str, path: str, **kw: Any) -> requests.Response:
        return self.s.request(method, self.url(path), **kw)

    def put(self, path: str, data: bytes | str, **headers: str) -> requests.Response:
        return self.req("PUT", path, data=data.encode() if isinstance(data, str) else data, headers=headers)

    def get(self, path: str, **kw: Any) -> requests.Response:
        return self.req("GET", path, **kw)

    def move(self, src: str, dst: str, overwrite: str = "T") -> requests.Response:
        return self.req("MOVE", src, headers={"Destination": self.url(dst), "Overwrite": overwrite})

    def names(self, folder: str) -> list[str]:
        r = self.req("PROPFIND", folder.rstrip("/") + "/", headers={"Depth": "1"})
        assert r.status_code == 207, r.text
        from xml.etree import ElementTree as ET
        hrefs = [h.text for h in ET.fromstring(r.content).findall(".//d:response/d:href", NS)]
        from urllib.parse import unquote
        return sorted(unquote(h.rstrip("/")).rsplit("/", 1)[-1] for h in hrefs[1:])

    @property
    def g(self) -> str:
        return f"org/{self.org}/guilds/{self.guild}"

    @property
    def a(self) -> str:
        return f"org/{self.org}/agents/{self.agent}"


@pytest.fixture
def dav(server: Any, operator: requests.Session, boot: dict[str, Any]) -> Dav:
    return Dav(server, operator, boot)


def changes(db: Database, path: str) -> list[tuple[str, int, str]]:
    with db.connection() as conn:
        return [(r["operation"], r["version"], r["actor_name"]) for r in conn.execute(
            "SELECT operation, version, actor_name FROM file_changes WHERE display_path = %s ORDER BY id",
            (path,)).fetchall()]


def artifact(db: Database, path: str) -> dict | None:
    with db.connection() as conn:
        return conn.execute("SELECT id, version, content FROM artifacts WHERE display_path = %s"
                            " AND deleted_at IS NULL", (path,)).fetchone()


def test_layout_only_my_organisations_and_reading(dav: Dav, db: Database, boot: dict[str, Any]) -> None:
    other = admin.create_org(db, name="Elsewhere")
    assert dav.names("") == ["org"]
    assert dav.names("org") == [str(dav.org)]
    assert dav.req("PROPFIND", f"org/{other['id']}/", headers={"Depth": "0"}).status_code == 404
    assert dav.names(f"org/{dav.org}") == ["agents", "collections", "guilds"]
    assert dav.names(dav.a) == ["history-archive", "memory.md", "scripts", "task.md"]

    r = dav.put(f"{dav.g}/plan.md", "# Plan\n\nShip it.\n")
    assert r.status_code == 201
    r = dav.get(f"{dav.g}/plan.md")
    assert r.status_code == 200 and r.text == "# Plan\n\nShip it.\n"
    assert r.headers["Content-Type"] == "text/markdown; charset=utf-8"
    assert r.headers["ETag"].startswith('"a') and r.headers["ETag"].endswith('-v1"')
    assert r.headers["Last-Modified"].endswith("GMT") and r.headers["Content-Length"] == "17"
    part = dav.get(f"{dav.g}/plan.md", headers={"Range": "bytes=2-5"})
    assert part.status_code == 206 and part.text == "Plan"
    head = dav.req("HEAD", f"{dav.g}/plan.md")
    assert head.status_code == 200 and head.headers["ETag"] == r.headers["ETag"]
    assert changes(db, f"{dav.g}/plan.md") == [("create", 1, boot["email"])]

    infinity = dav.req("PROPFIND", f"org/{dav.org}/", headers={"Depth": "infinity"})
    assert infinity.status_code == 403 and b"propfind-finite-depth" in infinity.content
    # A file has no depth to refuse (RFC 4918 9.1): with Depth infinity or none at all (how simple
    # clients ask whether a file exists) it is described alone; a missing one is 404.
    for depth in ({"Depth": "infinity"}, {}):
        alone = dav.req("PROPFIND", f"{dav.g}/plan.md", headers=depth)
        assert alone.status_code == 207, (depth, alone.status_code, alone.text)
        assert [h.text for h in ET.fromstring(alone.content).findall(".//{DAV:}response/{DAV:}href")] == [
            f"/dav/{dav.g}/plan.md"]
        assert dav.req("PROPFIND", f"{dav.g}/no-such.md", headers=depth).status_code == 404
    assert dav.req("PROPFIND", f"org/{dav.org}/").status_code == 403   # a folder with no Depth: infinity
    # Finder asks for quotas (RFC 4331). There is no byte quota: the properties are absent (404),
    # not empty elements that clients read as "0 bytes free".
    quota = (b'<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:quota-available-bytes/>'
             b'<D:quota-used-bytes/><D:getcontentlength/></D:prop></D:propfind>')
    for target in (f"{dav.g}/", f"{dav.g}/plan.md"):
        r = dav.req("PROPFIND", target, data=quota, headers={"Depth": "0"})
        assert r.status_code == 207
        status_of = {prop.tag: stat.findtext("{DAV:}status")
                     for stat in ET.fromstring(r.content).iter("{DAV:}propstat") for prop in stat.find("{DAV:}prop")}
        assert "404" in status_of["{DAV:}quota-available-bytes"] and "404" in status_of["{DAV:}quota-used-bytes"]


def test_browser_views(dav: Dav) -> None:
    dav.put(f"{dav.g}/plan.md", "# Plan\n\nSee ![[org/1/x.md]] and `![[org/1/code.md]]` <b>bold</b>\n")
    listing = dav.get(dav.g + "/")
    assert listing.status_code == 200 and "text/html" in listing.headers["Content-Type"]
    assert "plan.md" in listing.text
    page = dav.get(f"{dav.g}/plan.md", params={"view": "html"})
    assert page.status_code == 200 and page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert "<h1>Plan</h1>" in page.text
    assert '<a href="/dav/org/1/x.md?view=html" class="embed">' in page.text
    assert "<code>![[org/1/code.md]]</code>" in page.text  # an embed in code stays code
    assert "<b>" not in page.text and "&lt;b&gt;bold&lt;/b&gt;" in page.text  # raw HTML disabled


def test_refusals_say_why_and_write_nothing(dav: Dav, db: Database) -> None:
    r = dav.put(f"{dav.g}/report.txt", "hello")
    assert r.status_code == 403 and "does not end in .md" in r.text
    r = dav.req("MKCOL", f"{dav.g}/drafts")
    assert r.status_code == 403 and "notes are flat" in r.text
    r = dav.put(f"{dav.g}/latin1.md", "caf\xe9".encode("latin-1"))
    assert r.status_code == 400 and "not UTF-8" in r.text
    r = dav.put(f"{dav.g}/big.md", b"x" * 262_145)
    assert r.status_code == 413 and "big.md is 262,145 bytes; a write holds at most 262,144 bytes" in r.text
    assert dav.put(f"{dav.g}/exact.md", b"x" * 262_144).status_code == 201
    r = dav.put(f"org/{dav.org}/guilds/notes.md", "x")
    assert r.status_code == 403 and "one folder per guild" in r.text
    for name in ("report.txt", "latin1.md", "big.md"):
        assert artifact(db, f"{dav.g}/{name}") is None
        assert dav.get(f"{dav.g}/{name}").status_code == 404


def test_conditional_puts(dav: Dav) -> None:
    path = f"{dav.g}/cond.md"
    first = dav.put(path, "one")
    etag = first.headers["ETag"]
    assert dav.put(path, "two", **{"If-None-Match": "*"}).status_code == 412
    assert dav.put(path, "two", **{"If-Match": etag}).status_code == 204
    stale = dav.put(path, "three", **{"If-Match": etag})
    assert stale.status_code == 412
    assert dav.put(path, "three", **{"If-Unmodified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"}).status_code == 412
    assert dav.get(path).text == "two"
    # If-Match says more than a date: with it, If-Unmodified-Since is not evaluated (RFC 9110 13.2.2).
    current = dav.get(path).headers["ETag"]
    both = {"If-Match": current, "If-Unmodified-Since": "Sat, 01 Jan 2000 00:00:00 GMT"}
    assert dav.put(path, "three", **both).status_code == 204 and dav.get(path).text == "three"
    assert dav.put(path, "four", **{**both, "If-Match": etag}).status_code == 412
    assert dav.put(f"{dav.g}/fresh.md", "new", **{"If-None-Match": "*"}).status_code == 201


def test_embeds_reserved_keys_and_editor_saves(dav: Dav, db: Database, boot: dict[str, Any]) -> None:
    note = f"{dav.g}/plan.md"
    dav.put(note, "v1")
    original = artifact(db, note)
    assert dav.put(f"{dav.a}/task.md", f"Follow ![[{note}]] daily.\n").status_code == 204
    r = dav.req("DELETE", note)
    assert r.status_code == 409 and f"org/{dav.org}/agents/{dav.agent}/task.md" in r.text
    r = dav.move(note, f"{dav.g}/renamed.md")
    assert r.status_code == 409 and "task.md" in r.text
    assert dav.get(note).text == "v1"

    # Overwrite in place.
    assert dav.put(note, "v2").status_code == 204
    # Side file + MOVE over the note: one new version of the same note; embed kept.
    assert dav.put(f"{dav.g}/plan.md.tmp.4242", "v3").status_code == 201
    assert dav.move(f"{dav.g}/plan.md.tmp.4242", note).status_code == 204
    after = artifact(db, note)
    assert after["id"] == original["id"] and after["version"] == 3 and after["content"] == "v3"
    assert "plan.md.tmp.4242" not in dav.names(dav.g)
    # vim: rename away to a backup name, write the file again, delete the backup.
    assert dav.move(note, f"{dav.g}/plan.md~").status_code == 201
    assert dav.get(note).status_code == 404 and dav.get(f"{dav.g}/plan.md~").text == "v3"
    assert dav.put(note, "v4").status_code == 201
    assert dav.req("DELETE", f"{dav.g}/plan.md~").status_code == 204
    final = artifact(db, note)
    assert final["id"] == original["id"] and final["content"] == "v4" and final["version"] == 4
    assert [c[0] for c in changes(db, note)] == ["create", "update", "update", "update"]

    r = dav.req("DELETE", f"{dav.a}/task.md")
    assert r.status_code == 403 and "reserved" in r.text
    r = dav.move(f"{dav.a}/memory.md", f"{dav.a}/old-memory.md")
    assert r.status_code == 403 and "reserved" in r.text
    # A side file saved over memory.md is a memory write, with its history archived.
    dav.put(f"{dav.a}/memory.md", "first memory")
    dav.put(f"{dav.a}/.memory.md.swp", "second memory")
    assert dav.move(f"{dav.a}/.memory.md.swp", f"{dav.a}/memory.md").status_code == 204
    assert dav.get(f"{dav.a}/memory.md").text == "second memory"
    history = dav.names(f"{dav.a}/history-archive")
    assert len(history) == 1 and history[0].endswith("-operator.md")
    assert dav.get(f"{dav.a}/history-archive/{history[0]}").text == "first memory"
    assert dav.put(f"{dav.a}/history-archive/{history[0]}", "x").status_code == 403


def test_moves_between_levels_and_copy(dav: Dav, db: Database) -> None:
    dav.put(f"{dav.g}/idea.md", "idea")
    before = artifact(db, f"{dav.g}/idea.md")
    assert dav.move(f"{dav.g}/idea.md", f"org/{dav.org}/idea.md").status_code == 201
    moved = artifact(db, f"org/{dav.org}/idea.md")
    assert moved["id"] == before["id"] and moved["version"] == 2
    assert artifact(db, f"{dav.g}/idea.md") is None
    assert [c[0] for c in changes(db, f"{dav.g}/idea.md")] == ["create", "move"]
    with db.connection() as conn:   # the row at the new path says where the file came from
        assert conn.execute("SELECT operation, moved_from FROM file_changes WHERE display_path = %s",
                            (f"org/{dav.org}/idea.md",)).fetchall() == [
            {"operation": "create", "moved_from": f"{dav.g}/idea.md"}]
    assert dav.move(f"org/{dav.org}/idea.md", f"{dav.a}/idea.md").status_code == 201
    r = dav.req("COPY", f"{dav.a}/idea.md", headers={"Destination": dav.url(f"{dav.g}/copy.md")})
    assert r.status_code == 201 and dav.get(f"{dav.g}/copy.md").text == "idea"
    dav.put(f"{dav.g}/other.md", "other")
    assert dav.move(f"{dav.g}/copy.md", f"{dav.g}/other.md", overwrite="F").status_code == 412
    # Over an existing note, the move is the destination's next version: its change says where from.
    dav.put(f"{dav.g}/over.md", "over")
    assert dav.move(f"{dav.g}/over.md", f"{dav.g}/other.md").status_code == 204
    with db.connection() as conn:
        assert conn.execute("SELECT operation, moved_from FROM file_changes WHERE display_path = %s"
                            " ORDER BY id DESC LIMIT 1", (f"{dav.g}/other.md",)).fetchone() == {
            "operation": "update", "moved_from": f"{dav.g}/over.md"}
    assert dav.move(f"{dav.a}/idea.md", f"{dav.a}/scripts/idea.py").status_code == 403
    assert dav.put(f"{dav.a}/scripts/fetch.py", "print(1)\n").status_code == 201
    assert dav.get(f"{dav.a}/scripts/fetch.py").headers["Content-Type"] == "text/x-python; charset=utf-8"


def test_side_files_are_per_user_scratch(dav: Dav, server: Any, db: Database, boot: dict[str, Any]) -> None:
    admin.create_user(db, email="bob@example.com", password="bob password 1")
    admin.add_member(db, org_id=dav.org, email="bob@example.com")
    bob = Dav(server, server.session(basic=("bob@example.com", "bob password 1")), boot)
    for name in ("._plan.md", ".DS_Store", "Thumbs.db", "desktop.ini", "~$plan.md", ".~lock.plan.md#",
                 ".plan.md.swp", "plan.md~", "4913", "x.tmp", ".goutputstream-ABC", ".sb-1234", "a.vsctmp"):
        assert dav.put(f"{dav.g}/{name}", b"\x00\x01binary").status_code == 201, name
        assert name in dav.names(dav.g), name
        assert name not in bob.names(dav.g), name
        assert bob.get(f"{dav.g}/{name}").status_code == 404
    assert dav.get(f"{dav.g}/._plan.md").content == b"\x00\x01binary"
    with db.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM artifacts").fetchone()["n"] == 0
        assert conn.execute("SELECT count(*) AS n FROM file_changes").fetchone()["n"] == 0
        # Expired side files vanish.
        conn.execute("UPDATE scratch_files SET expires_at = now() - interval '1 second' WHERE path LIKE %s",
                     ("%DS_Store",))
    assert ".DS_Store" not in dav.names(dav.g)


def test_nfd_names_are_nfc(dav: Dav, db: Database) -> None:
    nfd = unicodedata.normalize("NFD", "café.md")
    assert dav.put(f"{dav.g}/{nfd}", "crème").status_code == 201
    assert artifact(db, f"{dav.g}/café.md")["content"] == "crème"
    assert dav.get(f"{dav.g}/café.md").text == "crème"
    assert dav.get(f"{dav.g}/{nfd}").text == "crème"
    assert "café.md" in dav.names(dav.g)


def test_collections_are_read_only_json(dav: Dav, db: Database) -> None:
    r = dav.s.post(dav.base.replace("/dav", "/api/collections"), json={
        "name": "leads", "purpose": "People", "columns": [
            {"name": "email", "type": "text", "description": "the email", "unique": True}]})
    assert r.status_code == 201, r.text
    cid = r.json()["id"]
    r = dav.s.post(dav.base.replace("/dav", f"/api/collections/{cid}/records"), json={"body": {"email": "a@x.io"}})
    assert r.status_code in (200, 201), r.text
    folder = f"org/{dav.org}/collections/leads"
    assert dav.names(folder) == ["1.json", "collection.json"]
    rec = dav.get(f"{folder}/1.json")
    assert rec.headers["Content-Type"] == "application/json"
    body = rec.json()
    assert body["email"] == "a@x.io" and body["display_path"] == f"org/{dav.org}/collections/leads/1"
    assert dav.get(f"{folder}/collection.json").json()["count"] == 1
    for method, path in (("PUT", f"{folder}/1.json"), ("PUT", f"{folder}/2.json"), ("DELETE", f"{folder}/1.json")):
        r = dav.req(method, path, data=b"{}" if method == "PUT" else None)
        assert r.status_code == 403 and "read-only" in r.text, (method, path)
    assert dav.req("LOCK", f"{folder}/1.json", data=LOCK_BODY, headers={"Timeout": "Second-60"}).status_code in (403, 423)


LOCK_BODY = (b'<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/>'
             b'</D:lockscope><D:locktype><D:write/></D:locktype><D:owner>test</D:owner></D:lockinfo>')


def test_lock_proppatch_and_properties_move_with_the_node(dav: Dav) -> None:
    path = f"{dav.g}/locked.md"
    dav.put(path, "x")
    r = dav.req("LOCK", path, data=LOCK_BODY, headers={"Timeout": "Second-600", "Depth": "0"})
    assert r.status_code == 200, r.text
    token = r.headers["Lock-Token"]
    assert dav.put(path, "no token").status_code == 423
    assert dav.put(path, "with token", If=f"({token})").status_code == 204
    prop = (b'<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:schemas-microsoft-com:">'
            b'<D:set><D:prop><Z:Win32LastModifiedTime>Wed, 01 Jan 2025 10:00:00 GMT</Z:Win32LastModifiedTime>'
            b'</D:prop></D:set></D:propertyupdate>')
    assert dav.req("PROPPATCH", path, data=prop, headers={"If": f"({token})"}).status_code == 207
    assert dav.req("UNLOCK", path, headers={"Lock-Token": token}).status_code == 204
    assert dav.put(path, "free").status_code == 204
    assert dav.move(path, f"{dav.g}/moved.md").status_code == 201
    r = dav.req("PROPFIND", f"{dav.g}/moved.md", headers={"Depth": "0"}, data=(
        b'<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><Z:Win32LastModifiedTime '
        b'xmlns:Z="urn:schemas-microsoft-com:"/></D:prop></D:propfind>'))
    assert r.status_code == 207 and b"Wed, 01 Jan 2025 10:00:00 GMT" in r.content
    # A copy takes them too (RFC 4918 9.8.2), and the original keeps them.
    assert dav.req("COPY", f"{dav.g}/moved.md", headers={"Destination": dav.url(f"{dav.g}/copied.md")}
                   ).status_code == 201
    for name in ("moved.md", "copied.md"):
        r = dav.req("PROPFIND", f"{dav.g}/{name}", headers={"Depth": "0"}, data=(
            b'<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><Z:Win32LastModifiedTime '
            b'xmlns:Z="urn:schemas-microsoft-com:"/></D:prop></D:propfind>'))
        assert r.status_code == 207 and b"Wed, 01 Jan 2025 10:00:00 GMT" in r.content, name

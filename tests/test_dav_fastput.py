"""The PUT fast path (dav_provider/fastput.py) answers what WsgiDAV's generic path answers: the
same status, headers (but Date, and the ETag's value, which names a different file) and bytes,
for new files and replaced ones of every writable family. Whatever the store refuses goes on to
WsgiDAV with the body intact, so its answer is WsgiDAV's own; a recorder proves which path
answered. And the fast path never writes past a WebDAV lock, whoever holds it."""
from __future__ import annotations

import base64
import re
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

import pytest

from dav_provider import fastput
from store import admin

from tests.conftest import record_answers, wait_for_lock_waiters
from tests.test_dav import Dav
from tests.test_dav_locks import lock, lock_body

STRIP = {"date", "connection", "keep-alive"}


@pytest.fixture
def fast_answers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the fast path answered (None from it means WsgiDAV answered)."""
    return record_answers(monkeypatch, fastput)


def _generic(server: Any, session: Any, url: str, data: bytes, **kw: Any) -> Any:
    server.gateway.dav.enabled = False
    try:
        return session.put(url, data=data, **kw)
    finally:
        server.gateway.dav.enabled = True


def _page(r: Any) -> bytes:
    """The body, without the time WsgiDAV's status page prints."""
    return re.sub(rb"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d+)?", b"<time>", r.content)


def _headers(r: Any) -> dict[str, str]:
    return {k.lower(): ("<etag>" if k.lower() == "etag" else v) for k, v in r.headers.items()
            if k.lower() not in STRIP}


@pytest.fixture
def remembered(server: Any, operator: Any, boot: dict[str, Any]) -> str:
    """The guild folder's URL, the operator's login remembered by the door."""
    folder = f"{server.url}/dav/org/{boot['org_id']}/guilds/{boot['guild_id']}"
    assert operator.put(f"{folder}/warm.md", data=b"warm").status_code == 201
    assert server.gateway.login_watch.wait_live()
    assert operator.get(f"{folder}/warm.md").status_code == 200
    return folder


def test_fast_saves_answer_as_wsgidav_does(server, boot, operator, remembered, fast_answers) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    base = f"{server.url}/dav/org/{org}"
    # (fast name, generic name) in each writable family: a new file, then a replaced one.
    pairs = {"guild note": (f"{remembered}/a.md", f"{remembered}/b.md"),
             "org note, non-ASCII name": (f"{base}/caf%C3%A9 1.md", f"{base}/caf%C3%A9 2.md"),
             "agent note": (f"{base}/agents/{agent}/a.md", f"{base}/agents/{agent}/b.md"),
             "script": (f"{base}/agents/{agent}/scripts/a.py", f"{base}/agents/{agent}/scripts/b.py"),
             "side file": (f"{remembered}/._a.md", f"{remembered}/._b.md")}
    for label, (fast_url, generic_url) in pairs.items():
        for step, body in (("new", b"first\n"), ("replaced", "second ✓\n".encode())):
            before = len(fast_answers)
            fast = operator.put(fast_url, data=body)
            generic = _generic(server, operator, generic_url, body)
            assert len(fast_answers) == before + 1, f"{label}, {step}: the fast path did not answer"
            assert (fast.status_code, generic.status_code) == ((201, 201) if step == "new" else (204, 204)), label
            assert _headers(fast) == _headers(generic), f"{label}, {step}"
            assert _page(fast) == _page(generic), f"{label}, {step}"
            got = operator.get(fast_url)
            assert got.content == body and got.headers["ETag"] == fast.headers["ETag"], f"{label}, {step}"
    # task.md and memory.md exist from the start: replaced, with their own families' rules.
    for name in ("task.md", "memory.md"):
        url = f"{base}/agents/{agent}/{name}"
        before = len(fast_answers)
        fast = operator.put(url, data=b"one\n")
        generic = _generic(server, operator, url, b"two\n")
        assert len(fast_answers) == before + 1, name
        assert (fast.status_code, _headers(fast)) == (generic.status_code, _headers(generic)), name
        assert operator.get(url).text == "two\n"


def test_refusals_and_other_requests_get_wsgidavs_answer(server, db, boot, operator, remembered,
                                                          fast_answers) -> None:
    """A refused fast save wrote nothing and replays the same body through WsgiDAV: the status
    and sentence are WsgiDAV's. Conditional saves and empty bodies are WsgiDAV's from the start."""
    org, agent = boot["org_id"], boot["agent_id"]
    other = admin.create_org(db, name="Elsewhere")
    other_guild = admin.create_guild(db, org_id=other["id"], name="theirs")["id"]
    base = f"{server.url}/dav/org/{org}"
    refused = {"a missing folder": (f"{base}/guilds/999999/x.md", 409),
               "another organisation's folder": (f"{server.url}/dav/org/{other['id']}/guilds/{other_guild}/x.md", 404),
               "a name that cannot be a note": (f"{remembered}/notes.txt", 403),
               "a folder": (f"{remembered}/", 405),
               "a layout folder": (f"{base}/guilds/", 405),
               "a read-only family": (f"{base}/agents/{agent}/history-archive/x.md", 403)}
    for label, (url, status) in refused.items():
        fast = operator.put(url, data=b"body")
        generic = _generic(server, operator, url, b"body")
        assert fast.status_code == generic.status_code == status, (label, fast.status_code, fast.text)
        assert _page(fast) == _page(generic), label
    assert fast_answers == []
    assert operator.put(f"{remembered}/c.md", data=b"v1").status_code == 201
    fast_answers.clear()
    etag = operator.head(f"{remembered}/c.md").headers["ETag"]
    assert operator.put(f"{remembered}/c.md", data=b"v2", headers={"If-Match": '"stale"'}).status_code == 412
    assert operator.put(f"{remembered}/c.md", data=b"v2", headers={"If-Match": etag}).status_code == 204
    assert operator.put(f"{remembered}/d.md", data=b"", headers={}).status_code == 201
    assert fast_answers == []
    assert operator.get(f"{remembered}/c.md").text == "v2"


def test_a_body_cut_short_saves_nothing(server, operator, remembered, fast_answers) -> None:
    """A client that goes away mid-body (a phone losing its network): no success answer, and the
    note keeps its previous version, on the fast path as on WsgiDAV's."""
    assert operator.put(f"{remembered}/cut.md", data=b"whole").status_code == 201
    fast_answers.clear()
    url = urlsplit(f"{remembered}/cut.md")
    token = base64.b64encode(":".join(operator.auth).encode()).decode()
    for fast in (True, False):
        server.gateway.dav.enabled = fast
        try:
            with socket.create_connection((url.hostname, url.port), timeout=10) as s:
                s.sendall((f"PUT {url.path} HTTP/1.1\r\nHost: {url.netloc}\r\nAuthorization: Basic {token}\r\n"
                           "Content-Length: 100\r\n\r\n").encode() + b"only ten b")
                s.shutdown(socket.SHUT_WR)
                answer = b""
                while chunk := s.recv(65536):
                    answer += chunk
        finally:
            server.gateway.dav.enabled = True
        assert not answer.startswith(b"HTTP/1.1 2"), answer[:200]
        assert operator.get(f"{remembered}/cut.md").text == "whole"
    assert fast_answers == []


def test_a_lock_anywhere_above_sends_the_save_to_wsgidavs_checks(server, boot, operator, remembered,
                                                                   fast_answers) -> None:
    """A lock on the file or on a folder above it: without its token the save is 423 and nothing
    changes, with it (the If header) the save goes through; a lock elsewhere does not slow saves."""
    dav = Dav(server, operator, boot)
    note, elsewhere = f"{dav.g}/locked.md", f"{dav.g}/free.md"
    dav.put(note, "mine")
    dav.put(elsewhere, "free")
    other = server.session(basic=(boot["email"], boot["member_token"]))
    other_url = f"{remembered}/locked.md"
    assert other.get(other_url).status_code == 200  # the member token's login is remembered
    token = lock(dav, note)
    fast_answers.clear()
    r = other.put(other_url, data=b"theirs")
    assert r.status_code == 423, r.text
    assert operator.get(other_url).text == "mine"
    assert other.put(f"{remembered}/free.md", data=b"still fast").status_code == 204
    assert fast_answers == [f"/org/{boot['org_id']}/guilds/{boot['guild_id']}/free.md"]
    r = other.put(other_url, data=b"with the token", headers={"If": f"(<{token.strip('<>')}>)"})
    assert r.status_code == 204, r.text
    assert operator.get(other_url).text == "with the token"
    # A lock on the folder (depth infinity) covers a new name in it.
    dav.req("UNLOCK", note, headers={"Lock-Token": token})
    folder_token = lock(dav, f"{dav.g}/", depth="infinity")
    assert other.put(f"{remembered}/new.md", data=b"x").status_code == 423
    assert operator.get(f"{remembered}/new.md").status_code == 404
    dav.req("UNLOCK", f"{dav.g}/", headers={"Lock-Token": folder_token})
    fast_answers.clear()
    assert other.put(f"{remembered}/new.md", data=b"x").status_code == 201
    assert len(fast_answers) == 1


def test_a_rename_away_save_through_the_fast_path_keeps_the_notes_identity(server, boot, operator, remembered,
                                                                            fast_answers) -> None:
    """davfs2's and Emacs' save: MOVE the note to a backup name (it is hidden from this user, not
    gone), then PUT it again. The fast path's one-statement write sees the hiding and leaves the
    save to the tree's full path: the note's next version (WebDAV's 201: it was gone for this
    user), and the name shows again."""
    dav = Dav(server, operator, boot)
    note = f"{dav.g}/draft.md"
    assert dav.put(note, "v1").status_code == 201
    assert dav.put(note, "v2").status_code == 204
    assert dav.move(note, f"{dav.g}/draft.md~").status_code in (201, 204)
    assert dav.get(note).status_code == 404
    fast_answers.clear()
    r = dav.put(note, "v3")
    assert r.status_code == 201 and len(fast_answers) == 1, (r.status_code, r.text)
    assert r.headers["ETag"].endswith('-v3"'), r.headers["ETag"]  # the same note, one version on
    assert dav.get(note).text == "v3"
    assert "draft.md" in dav.names(dav.g)


def test_a_locked_name_that_holds_a_percent_sign_is_still_locked(server, boot, operator, remembered,
                                                                   fast_answers) -> None:
    """The lock check compares the decoded name once: "100%41.md" is not "100A.md"."""
    dav = Dav(server, operator, boot)
    note = f"{dav.g}/100%41.md"
    assert dav.put(note, "mine").status_code == 201
    token = lock(dav, note)
    member = server.session(basic=(boot["email"], boot["member_token"]))
    url = dav.url(note)
    assert member.get(url).text == "mine"  # the member token's login is remembered
    r = member.put(url, data=b"theirs")
    assert r.status_code == 423, r.text
    assert operator.get(url).text == "mine"
    assert member.put(url, data=b"with the token", headers={"If": f"(<{token.strip('<>')}>)"}).status_code == 204


def test_a_lock_asked_for_while_a_fast_save_is_writing_is_refused(server, db, boot, operator, remembered,
                                                                   fast_answers) -> None:
    """As on WsgiDAV's path: the URL is marked as being written for the whole write, so a LOCK
    arriving meanwhile gets 423 instead of a lock the write then ignores."""
    dav = Dav(server, operator, boot)
    note = f"{dav.g}/busy.md"
    assert dav.put(note, "v1").status_code == 201
    fast_answers.clear()
    result: list[Any] = []
    with db.transaction() as holder:  # the note's row held: the save waits inside its write
        holder.execute("SELECT id FROM artifacts WHERE display_path = %s AND deleted_at IS NULL FOR UPDATE",
                       (note.strip("/"),))
        saver = threading.Thread(target=lambda: result.append(operator.put(dav.url(note), data=b"v2")))
        saver.start()
        wait_for_lock_waiters(db.conninfo, 1)
        r = server.session(basic=(boot["email"], boot["password"])).request(
            "LOCK", dav.url(note), data=lock_body(), headers={"Timeout": "Second-60", "Depth": "0"})
        assert r.status_code == 423, r.text
    saver.join(30)
    assert result and result[0].status_code == 204 and len(fast_answers) == 1
    assert operator.get(dav.url(note)).text == "v2"

"""The GET/HEAD fast path (dav_provider/fastget.py) answers what WsgiDAV's generic path answers:
the same status, headers (but Date) and bytes, for notes, task.md, memory.md, scripts and
non-ASCII names, with and without conditional headers. Each request is sent twice to the same
server, once with the fast path and once with it switched off; a recorder proves which path
answered."""
from __future__ import annotations

from typing import Any

import pytest

from dav_provider import fastget
from tests.conftest import record_answers

UNCHANGED = "Thu, 01 Jan 2099 00:00:00 GMT"
LONG_AGO = "Thu, 01 Jan 1970 00:00:00 GMT"


@pytest.fixture
def fast_answers(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths the fast path answered (None from it means WsgiDAV answered)."""
    return record_answers(monkeypatch, fastget)


def _both(server: Any, session: Any, method: str, url: str, headers: dict[str, str]) -> tuple[Any, Any]:
    fast = session.request(method, url, headers=headers)
    server.gateway.dav.enabled = False
    try:
        generic = session.request(method, url, headers=headers)
    finally:
        server.gateway.dav.enabled = True
    return fast, generic


def _same(fast: Any, generic: Any, label: str) -> None:
    assert fast.status_code == generic.status_code, label
    strip = {"date", "connection", "keep-alive"}
    assert {k.lower(): v for k, v in fast.headers.items() if k.lower() not in strip} == \
        {k.lower(): v for k, v in generic.headers.items() if k.lower() not in strip}, label
    assert fast.content == generic.content, label
    assert "Date" in fast.headers, label


def test_fast_answers_equal_wsgidav_answers(server, boot, operator, fast_answers) -> None:
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    base = f"{server.url}/dav/org/{org}"
    files = {f"{base}/guilds/{guild}/plain.md": "# plain\n\nwords\n",
             f"{base}/guilds/{guild}/caf%C3%A9 d%C3%A9j%C3%A0.md": "non-ASCII name ✓\n",
             f"{base}/agents/{agent}/task.md": "Follow up daily.\n",
             f"{base}/agents/{agent}/memory.md": "remembered\n",
             f"{base}/agents/{agent}/scripts/tool.py": "print('hi')\n"}
    for url, text in files.items():
        assert operator.put(url, data=text.encode()).status_code in (201, 204), url
    assert server.gateway.login_watch.wait_live()
    operator.get(next(iter(files)))  # the login is remembered from here on
    for url, text in files.items():
        etag = operator.head(url).headers["ETag"]
        cases = {"GET": {}, "HEAD": {},
                 "If-None-Match same": {"If-None-Match": etag},
                 "If-None-Match weak same": {"If-None-Match": "W/" + etag},
                 "If-None-Match other": {"If-None-Match": '"other"'},
                 "If-None-Match any": {"If-None-Match": "*"},
                 "If-Modified-Since later": {"If-Modified-Since": UNCHANGED},
                 "If-Modified-Since long ago": {"If-Modified-Since": LONG_AGO},
                 "both, etag differs": {"If-None-Match": '"other"', "If-Modified-Since": UNCHANGED}}
        for label, headers in cases.items():
            method = "HEAD" if label == "HEAD" else "GET"
            before = len(fast_answers)
            fast, generic = _both(server, operator, method, url, headers)
            assert len(fast_answers) == before + 1, f"{label} {url}: the fast path did not answer"
            _same(fast, generic, f"{label} {url}")
        r = operator.get(url)
        assert r.status_code == 200 and r.text == text and r.headers["ETag"] == etag


def test_everything_else_goes_to_wsgidav(server, boot, operator, fast_answers) -> None:
    org, guild = boot["org_id"], boot["guild_id"]
    folder = f"{server.url}/dav/org/{org}/guilds/{guild}"
    assert operator.put(f"{folder}/n.md", data=b"0123456789").status_code == 201
    assert server.gateway.login_watch.wait_live()
    assert operator.get(f"{folder}/n.md").status_code == 200
    fast_answers.clear()
    assert operator.get(f"{folder}/n.md", headers={"Range": "bytes=2-4"}).content == b"234"
    assert operator.get(f"{folder}/n.md?view=html").headers["Content-Type"].startswith("text/html")
    assert operator.get(f"{folder}/missing.md").status_code == 404
    assert operator.get(f"{folder}/").status_code == 200  # the folder's page
    assert operator.get(f"{folder}/n.md", headers={"If-Match": '"nope"'}).status_code == 412
    assert server.session(basic=(boot["email"], "wrong password")).get(f"{folder}/n.md").status_code == 401
    assert fast_answers == []
    # A login the door has not verified yet is verified on WsgiDAV's path first.
    fresh = server.session(basic=(boot["email"], boot["member_token"]))
    assert fresh.get(f"{folder}/n.md").text == "0123456789" and fast_answers == []
    assert fresh.get(f"{folder}/n.md").text == "0123456789" and len(fast_answers) == 1


def test_a_note_saved_twice_within_one_second_is_not_304_to_the_first_saves_date(server, boot, operator) -> None:
    """If-Modified-Since carries whole seconds: a note saved again within the second of the save a
    client holds has the same Last-Modified, so that date must not earn a 304 (davfs2 then kept
    serving its stale copy); the ETag tells them apart."""
    url = f"{server.url}/dav/org/{boot['org_id']}/guilds/{boot['guild_id']}/twice.md"
    for attempt in range(20):   # until both saves fall within one second
        first = operator.put(url, data=f"first {attempt}\n".encode())
        held = operator.get(url)
        operator.put(url, data=f"second {attempt}\n".encode())
        if operator.head(url).headers["Last-Modified"] == held.headers["Last-Modified"]:
            break
    else:
        pytest.fail("no two saves within one second in 20 tries")
    assert first.status_code in (201, 204)
    r = operator.get(url, headers={"If-Modified-Since": held.headers["Last-Modified"]})
    assert r.status_code == 200 and r.text == f"second {attempt}\n", r.status_code
    assert operator.get(url, headers={"If-None-Match": held.headers["ETag"]}).status_code == 200
    current = operator.head(url).headers["ETag"]
    assert operator.get(url, headers={"If-None-Match": current}).status_code == 304

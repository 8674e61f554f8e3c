"""Conditional requests as a client sends them (RFC 9110 13, RFC 4918 10.4), over the real gateway.

Dates: a date no calendar holds ("Mon, 01 Jan 99999 00:00:00 GMT") in If-Modified-Since or
If-Unmodified-Since is ignored, as RFC 9110 13.1.3 and 13.1.4 require, for every method and on both
the fast paths and WsgiDAV's: never a 500 and a traceback in the log. A date is read as the
instant it names, zone included, alike by every part that compares it.

Tagged If lists: a list tagged with the URL of the request's resource (an absolute URL, or its
path under /dav/, percent-encoded or not) applies to it (RFC 4918 10.4.2): when none of its lists
holds, the request fails with 412 and nothing changes. A list tagged with another resource applies
to that resource only."""
from __future__ import annotations

import logging
import re
from datetime import timedelta, timezone
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
import requests

from store.db import Database
from tests.test_dav import Dav, artifact
from tests.test_dav_locks import PROP, lock_body

FAR = "Mon, 01 Jan 99999 00:00:00 GMT"


@pytest.fixture
def dav(server: Any, operator: requests.Session, boot: dict[str, Any]) -> Dav:
    return Dav(server, operator, boot)


@pytest.fixture
def log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """What the gateway (a thread of this process) logs while the test runs."""
    caplog.set_level(logging.INFO)
    return caplog


def no_failure_logged(log: pytest.LogCaptureFixture) -> None:
    errors = [r.getMessage()[:200] for r in log.records if r.levelno >= logging.ERROR]
    assert not errors and "Traceback" not in log.text, errors


def fast_paths(server: Any, on: bool) -> None:
    server.gateway.dav.enabled = on


# -- dates ------------------------------------------------------------------------------------------

# What each method answers when the condition is ignored (the request as if it had none).
IGNORED = {"GET": 200, "HEAD": 200, "PROPFIND": 207, "PUT": 204, "DELETE": 204, "MOVE": 201,
           "COPY": 201, "PROPPATCH": 207, "LOCK": 200}


@pytest.mark.parametrize("header", ["If-Modified-Since", "If-Unmodified-Since"])
@pytest.mark.parametrize("method", list(IGNORED))
@pytest.mark.parametrize("fast", [True, False], ids=["fast-paths", "wsgidav"])
def test_a_date_no_calendar_holds_is_ignored_not_a_500(dav: Dav, server: Any, db: Database, log: Any,
                                                      method: str, header: str, fast: bool) -> None:
    note, moved = f"{dav.g}/welcome.md", f"{dav.g}/moved.md"   # (a copy goes there too)
    assert dav.put(note, "welcome").status_code == 201
    assert server.gateway.login_watch.wait_live()
    dav.get(note)  # the login is remembered: the fast paths may answer from here on
    fast_paths(server, fast)
    try:
        to_moved = {"headers": {"Destination": dav.url(moved)}}
        extra: dict[str, Any] = {
            "PUT": {"data": b"saved"}, "PROPFIND": {"headers": {"Depth": "0"}}, "MOVE": to_moved,
            "COPY": to_moved, "PROPPATCH": {"data": PROP},
            "LOCK": {"data": lock_body(), "headers": {"Depth": "0"}}}.get(method, {})
        r = dav.req(method, note, **{**extra, "headers": {**extra.get("headers", {}), header: FAR}})
    finally:
        fast_paths(server, True)
    assert r.status_code == IGNORED[method], (r.status_code, r.text[:300])
    if method == "GET":
        assert r.content == b"welcome"
    expected = {"PUT": "saved", "DELETE": None, "MOVE": None}.get(method, "welcome")
    assert (artifact(db, note) or {}).get("content") == expected
    if method in ("MOVE", "COPY"):
        assert artifact(db, moved)["content"] == "welcome"
    no_failure_logged(log)


@pytest.mark.parametrize("date", [FAR, "Mon, 32 Jan 2020 00:00:00 GMT", "Wed, 01 Jan 2020 25:00:00 GMT",
                                  "Wed, 01 Jan 2020 00:00:00 +9999"])
def test_if_unmodified_since_that_is_no_date_does_not_stop_a_save(dav: Dav, db: Database, log: Any,
                                                                  date: str) -> None:
    """RFC 9110 13.1.4: not a valid HTTP-date, so ignored. WsgiDAV read day 32 as 1 February, hour
    25 as the next day's 1 o'clock and a zone of +9999 as GMT, and refused the save with 412."""
    note = f"{dav.g}/kept.md"
    assert dav.put(note, "v1").status_code == 201
    r = dav.put(note, "v2", **{"If-Unmodified-Since": date})
    assert r.status_code == 204, (r.status_code, r.text[:300])
    assert artifact(db, note)["content"] == "v2"
    no_failure_logged(log)


@pytest.mark.parametrize("fast", [True, False], ids=["fast-paths", "wsgidav"])
def test_if_modified_since_does_not_stop_a_save(dav: Dav, server: Any, db: Database, fast: bool) -> None:
    """RFC 9110 13.1.3: If-Modified-Since is for GET and HEAD. A PUT carrying a date later than the
    note's last change was answered 304 and stored nothing, which a client takes for done."""
    fast_paths(server, fast)
    note = f"{dav.g}/later.md"
    assert dav.put(note, "v1").status_code == 201
    later = "Fri, 01 Jan 2100 00:00:00 GMT"
    r = dav.put(note, "v2", **{"If-Modified-Since": later})
    assert r.status_code == 204, (r.status_code, r.text[:300])
    assert artifact(db, note)["content"] == "v2"
    assert dav.get(note, headers={"If-Modified-Since": later}).status_code == 304   # still honoured on GET
    fast_paths(server, True)


def _written(last_modified: str, offset: timedelta, hours: int) -> str:
    """The instant ``last_modified + offset``, written in the zone UTC+``hours``."""
    when = parsedate_to_datetime(last_modified) + offset
    return format_datetime(when.astimezone(timezone(timedelta(hours=hours))))


@pytest.mark.parametrize("fast", [True, False], ids=["fast-paths", "wsgidav"])
def test_a_date_is_the_instant_it_names_in_every_spelling(dav: Dav, server: Any, db: Database, log: Any,
                                                          fast: bool) -> None:
    """A numeric zone is honoured (WsgiDAV read the clock time as GMT) and an asctime-date is GMT
    (the save's own check failed on it with a 500)."""
    note = f"{dav.g}/clock.md"
    assert dav.put(note, "v1").status_code == 201
    assert server.gateway.login_watch.wait_live()
    stamp = dav.get(note).headers["Last-Modified"]
    fast_paths(server, fast)
    try:
        # Half an hour after the last change, written an hour west of GMT: not modified since.
        r = dav.get(note, headers={"If-Modified-Since": _written(stamp, timedelta(minutes=30), -1)})
        assert r.status_code == 304, r.status_code
        # Half an hour before it, written an hour east of GMT: modified since.
        r = dav.get(note, headers={"If-Modified-Since": _written(stamp, timedelta(minutes=-30), 1)})
        assert r.status_code == 200 and r.text == "v1"
    finally:
        fast_paths(server, True)
    asctime = "Sun Nov  6 08:49:37 2094"
    r = dav.put(note, "v2", **{"If-Unmodified-Since": asctime})
    assert r.status_code == 204, (r.status_code, r.text[:300])
    r = dav.put(note, "v3", **{"If-Unmodified-Since": "Sun Nov  6 08:49:37 1994"})
    assert r.status_code == 412
    r = dav.put(note, "v4", **{"If-Unmodified-Since": "Sun, 06 Nov 2094 08:49:37 -0000"})
    assert r.status_code == 204, (r.status_code, r.text[:300])
    assert artifact(db, note)["content"] == "v4"
    no_failure_logged(log)


@pytest.mark.parametrize("validator", [FAR, '"Mon, 01 Jan 99999 00:00:00 GMT"'])
def test_if_range_that_is_no_date_or_entity_tag_sends_the_whole_file(dav: Dav, log: Any,
                                                                     validator: str) -> None:
    """RFC 9110 13.1.5: the condition is false, so the Range is ignored: 200 and the whole file."""
    note = f"{dav.g}/range.md"
    assert dav.put(note, "0123456789").status_code == 201
    for value in (validator, "not a validator"):
        r = dav.get(note, headers={"Range": "bytes=0-3", "If-Range": value})
        assert r.status_code == 200 and r.text == "0123456789", (value, r.status_code, r.text[:300])
    # A matching validator still gives the part.
    etag = r.headers["ETag"]
    r = dav.get(note, headers={"Range": "bytes=0-3", "If-Range": etag})
    assert r.status_code == 206 and r.text == "0123", r.status_code
    r = dav.get(note, headers={"Range": "bytes=0-3", "If-Range": r.headers["Last-Modified"]})
    assert r.status_code == 206 and r.text == "0123", r.status_code
    no_failure_logged(log)


# -- tagged If lists ----------------------------------------------------------------------------------

def tags(dav: Dav, path: str) -> dict[str, str]:
    """The spellings of one resource's URL that clients send as a tag."""
    url = dav.url(path)
    parts = urlsplit(url)
    return {"absolute URL": url,
            "path": parts.path,
            "path not percent-encoded": "/dav/" + path,
            "host in capitals": f"HTTP://{parts.hostname.upper()}:{parts.port}{parts.path}",
            "dot segment": parts.path.replace("/guilds/", "/guilds/./")}


NOTE = "cond note.md"   # a space: percent-encoded in a URL, as is in an unencoded path


@pytest.mark.parametrize("spelling", ["absolute URL", "path", "path not percent-encoded",
                                      "host in capitals", "dot segment"])
def test_a_stale_etag_tagged_with_the_resource_refuses_the_put(dav: Dav, db: Database, log: Any,
                                                              spelling: str) -> None:
    note = f"{dav.g}/{NOTE}"
    assert dav.put(note, "newer").status_code == 201
    tag = tags(dav, note)[spelling]
    r = dav.put(note, "stale", If=f'<{tag}> (["wrong-etag"])')
    assert r.status_code == 412, (r.status_code, r.text[:300])
    assert artifact(db, note)["content"] == "newer" and artifact(db, note)["version"] == 1
    # The current ETag, tagged the same way, lets the save through; so does any list of the
    # resource that holds (RFC 4918 10.4.3: the lists of a tag are alternatives).
    etag = dav.get(note).headers["ETag"]
    assert dav.put(note, "current", If=f"<{tag}> ([{etag}])").status_code == 204
    etag = dav.get(note).headers["ETag"]
    assert dav.put(note, "either", If=f'<{tag}> (["wrong-etag"]) ([{etag}])').status_code == 204
    assert artifact(db, note)["content"] == "either"
    no_failure_logged(log)


def test_a_tagged_bogus_lock_token_on_an_unlocked_note_is_412(dav: Dav, db: Database) -> None:
    note = f"{dav.g}/{NOTE}"
    assert dav.put(note, "kept").status_code == 201
    for tag in (dav.url(note), urlsplit(dav.url(note)).path):
        r = dav.put(note, "overwritten", If=f"<{tag}> (<opaquelocktoken:bogus>)")
        assert r.status_code == 412, (tag, r.status_code, r.text[:300])
    # "Not" of a token that is not there holds.
    assert dav.put(note, "saved", If=f"<{dav.url(note)}> (Not <opaquelocktoken:bogus>)").status_code == 204
    assert artifact(db, note)["content"] == "saved"


def test_every_method_that_checks_if_honours_a_tagged_list(dav: Dav, db: Database, log: Any) -> None:
    """DELETE, MOVE, COPY (onto the tagged destination), PROPPATCH, LOCK refresh and GET: a tagged
    list of the resource that does not hold is 412, and nothing changes."""
    note, spare = f"{dav.g}/{NOTE}", f"{dav.g}/spare.md"
    assert dav.put(note, "kept").status_code == 201
    assert dav.put(spare, "spare").status_code == 201
    stale = {"If": f'<{dav.url(note)}> (["wrong-etag"])'}
    answers = {
        "DELETE": dav.req("DELETE", note, headers=stale),
        "MOVE": dav.req("MOVE", note, headers={**stale, "Destination": dav.url(f"{dav.g}/away.md")}),
        "COPY onto it": dav.req("COPY", spare, headers={**stale, "Destination": dav.url(note)}),
        "PROPPATCH": dav.req("PROPPATCH", note, data=PROP, headers=stale),
        "GET": dav.get(note, headers=stale),
    }
    assert {k: r.status_code for k, r in answers.items()} == {k: 412 for k in answers}
    assert artifact(db, note)["content"] == "kept" and artifact(db, note)["version"] == 1
    assert artifact(db, f"{dav.g}/away.md") is None
    props = dav.req("PROPFIND", note, headers={"Depth": "0"}, data=b'<?xml version="1.0"?><D:propfind '
                    b'xmlns:D="DAV:" xmlns:Z="urn:x-test:"><D:prop><Z:color/></D:prop></D:propfind>')
    assert b"red" not in props.content
    # LOCK refresh: the lock's token tagged with the note, and a stale ETag in the same list.
    token = dav.req("LOCK", note, data=lock_body(),
                    headers={"Timeout": "Second-60", "Depth": "0"}).headers["Lock-Token"]
    r = dav.req("LOCK", note, headers={"If": f'<{dav.url(note)}> ({token} ["wrong-etag"])',
                                       "Timeout": "Second-600"})
    assert r.status_code == 412, r.text
    r = dav.req("LOCK", note, headers={"If": f"<{dav.url(note)}> ({token})", "Timeout": "Second-600"})
    assert r.status_code == 200, r.text
    assert int(re.search(r"Second-(\d+)", r.text).group(1)) > 60, r.text  # refreshed
    # With the token tagged the same way, the holder's change goes through.
    etag = dav.get(note).headers["ETag"]
    assert dav.put(note, "holder's", If=f"<{dav.url(note)}> ({token} [{etag}])").status_code == 204
    assert dav.req("UNLOCK", note, headers={"Lock-Token": token}).status_code == 204
    assert artifact(db, note)["content"] == "holder's"
    no_failure_logged(log)


def test_a_list_tagged_with_another_resource_applies_to_that_resource_only(dav: Dav, db: Database,
                                                                            server: Any) -> None:
    note, other = f"{dav.g}/{NOTE}", f"{dav.g}/other.md"
    assert dav.put(note, "v1").status_code == 201
    assert dav.put(other, "o1").status_code == 201
    # Another note's stale ETag does not stop a save of this one (WsgiDAV checks each resource it
    # touches against its own lists: RFC 4918 10.4.2).
    assert dav.put(note, "v2", If=f'<{dav.url(other)}> (["wrong-etag"])').status_code == 204
    # Neither do lists tagged with a URL outside /dav/ (the web app's /org/...), on another server,
    # or a lock token tagged with the folder above it.
    folder = urlsplit(dav.url(dav.g)).path + "/"
    for tag in ("/" + note, f"http://elsewhere.example/dav/{quote(note)}", folder):
        assert dav.put(note, f"v-{tag}", If=f'<{tag}> (["wrong-etag"])').status_code == 204, tag
    # COPY onto a note: a list tagged with the source applies to the source, one tagged with the
    # destination to the destination.
    src_etag = dav.get(other).headers["ETag"]
    copy = {"Destination": dav.url(note), "Overwrite": "T"}
    r = dav.req("COPY", other, headers={**copy, "If": f"<{dav.url(other)}> ([{src_etag}])"})
    assert r.status_code == 204, r.text
    r = dav.req("COPY", other, headers={**copy, "If": f'<{dav.url(note)}> (["wrong-etag"])'})
    assert r.status_code == 412, r.text
    dest_etag = dav.get(note).headers["ETag"]
    assert dav.put(other, "o2").status_code == 204
    r = dav.req("COPY", other, headers={**copy, "If": f"<{dav.url(note)}> ([{dest_etag}])"})
    assert r.status_code == 204, r.text
    assert artifact(db, note)["content"] == "o2"

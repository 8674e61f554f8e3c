"""Bounds on WebDAV locks (store/locks.py): every lock-aware request reads the live locks with
their data, so a lock's owner is capped as a dead property's value is, and one login holds a
bounded number of live locks. Both refusals say what was wrong and what works, and store nothing."""
from __future__ import annotations

import html
from typing import Any
from xml.etree import ElementTree as ET

import pytest
import requests
from wsgidav import xml_tools

from store import locks as leases
from store.db import Database
from tests.test_dav import Dav, dav  # noqa: F401 - the fixture

NS = {"d": "DAV:"}
DISCOVERY = b'<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/></D:prop></D:propfind>'


def lock_body(owner: str, scope: str = "shared") -> bytes:
    return (f'<D:lockinfo xmlns:D="DAV:"><D:lockscope><D:{scope}/></D:lockscope><D:locktype><D:write/>'
            f'</D:locktype><D:owner>{owner}</D:owner></D:lockinfo>').encode()


def stored_owner_size(body: bytes) -> int:
    """How many bytes the <D:owner> of ``body`` takes as WsgiDAV hands it over (and a lease stores it)."""
    owner = xml_tools.string_to_xml(body).find("{DAV:}owner")
    return len(xml_tools.xml_to_bytes(owner, pretty=False))


def owner_of_stored_size(size: int) -> str:
    """An owner text whose <D:owner> XML is exactly ``size`` bytes as stored."""
    framing = stored_owner_size(lock_body("O")) - 1   # (an empty one is written <D:owner/>)
    return "O" * (size - framing)


def lock(dav: Dav, path: str, owner: str = "ada", *, scope: str = "shared") -> requests.Response:
    return dav.req("LOCK", path, data=lock_body(owner, scope),
                   headers={"Depth": "0", "Timeout": "Second-4100000000"})


def sentence(r: requests.Response) -> str:
    return html.unescape(r.text)


def discovered(dav: Dav, path: str) -> list[Any]:
    r = dav.req("PROPFIND", path, headers={"Depth": "0"}, data=DISCOVERY)
    assert r.status_code == 207, r.text
    return ET.fromstring(r.content).findall(".//d:activelock", NS)


def test_a_lock_owner_over_the_property_cap_is_refused_and_one_at_the_cap_is_granted(
        dav: Dav, db: Database) -> None:
    cap = leases.MAX_OWNER_BYTES
    note, new = f"{dav.g}/owner.md", f"{dav.g}/not-yet.md"
    assert dav.put(note, "hi").status_code == 201
    over = owner_of_stored_size(cap + 1)
    assert stored_owner_size(lock_body(over)) == cap + 1

    r = lock(dav, note, over)
    assert r.status_code == 413, r.text
    assert f"the lock's owner is {cap + 1} bytes; a lock's owner is at most {cap} bytes" in sentence(r)
    assert "such as a name, an email address or a URL" in sentence(r)
    # Nothing stored: no lock is discovered, the note takes a write without a token.
    assert discovered(dav, note) == []
    assert dav.put(note, "still writable").status_code == 204
    assert dav.get(note).text == "still writable"
    # A lock of a name not yet written (lock-null) is refused the same way, and leaves no name.
    r = lock(dav, new, "O" * 1_000_000)
    assert r.status_code == 413 and "at most" in sentence(r), r.text
    assert dav.req("PROPFIND", new, headers={"Depth": "0"}).status_code == 404
    with db.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM path_leases").fetchone()["n"] == 0

    at_cap = owner_of_stored_size(cap)
    r = lock(dav, note, at_cap)
    assert r.status_code == 200, r.text
    with db.connection() as conn:
        lease = leases.get(conn, r.headers["Lock-Token"].strip("<>"))
    assert lease is not None and len(lease["owner"].encode()) == cap
    [active] = discovered(dav, note)
    assert at_cap in ET.tostring(active.find("d:owner", NS), encoding="unicode")


def test_a_login_over_the_live_lock_count_is_refused_until_it_unlocks_one(
        dav: Dav, db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server runs in this process (conftest's running_gateway), and the count is read at
    each grant: a small one here stands for MAX_LIVE_PER_HOLDER."""
    monkeypatch.setattr(leases, "MAX_LIVE_PER_HOLDER", 3)
    notes = [f"{dav.g}/many{i}.md" for i in range(5)]
    for note in notes:
        assert dav.put(note, "hi").status_code == 201
    tokens = []
    for note in notes[:3]:
        r = lock(dav, note)
        assert r.status_code == 200, r.text
        tokens.append(r.headers["Lock-Token"])

    r = lock(dav, notes[3])
    assert r.status_code == 507, r.text
    assert "already holds 3 live locks, the most one login may hold at once (3)" in sentence(r)
    assert "unlock files no longer being edited" in sentence(r)
    assert discovered(dav, notes[3]) == []
    assert dav.put(notes[3], "writable").status_code == 204
    # A refresh of a lock held is no new lock: still granted at the limit.
    r = dav.req("LOCK", notes[0], headers={"If": f"({tokens[0]})", "Timeout": "Second-900"})
    assert r.status_code == 200, r.text

    # An expired lock does not count, and an unlocked one makes room.
    assert dav.req("UNLOCK", notes[0], headers={"Lock-Token": tokens[0]}).status_code == 204
    assert lock(dav, notes[3]).status_code == 200
    assert lock(dav, notes[4]).status_code == 507
    with db.transaction() as conn:
        conn.execute("UPDATE path_leases SET expires_at = now() - interval '1 second' WHERE token = %s",
                     (tokens[1].strip("<>"),))
    assert lock(dav, notes[4]).status_code == 200
    with db.connection() as conn:
        live = conn.execute("SELECT count(*) AS n FROM path_leases WHERE expires_at > now()").fetchone()["n"]
    assert live == 3


def test_a_request_inside_one_organisation_has_that_organisation_as_its_scope() -> None:
    """A request whose path (and Destination) stay in one organisation's folder has that folder
    as its scope: once a read found no lease there, the process skips its reads inside it until a
    lock changes, so another organisation's locks cost it nothing (what each request reads, its
    focus, is tests/test_dav_lock_scope.py's). Any path that could be normalised elsewhere, a
    Destination in another folder or a tagged If header (which names resources anywhere) has the
    whole store as its scope."""
    from dav_provider.locks import request_scope
    inside = {"PATH_INFO": "/org/7/guilds/2/plan.md"}
    assert request_scope(inside) == "org/7"
    assert request_scope({"PATH_INFO": "/dav/org/7/"}) == "org/7"
    assert request_scope(dict(inside, HTTP_DESTINATION="https://h/dav/org/7/agents/3/plan.md")) == "org/7"
    assert request_scope(dict(inside, HTTP_IF="(<opaquelocktoken:x>)")) == "org/7"
    for whole in ({"PATH_INFO": "/"}, {"PATH_INFO": "/org/"}, {"PATH_INFO": "/org/7/../8/plan.md"},
                  {"PATH_INFO": "/org/7/./plan.md"}, {"PATH_INFO": "/org/7//plan.md"},
                  {"PATH_INFO": "/org/7/%2e%2e/8/plan.md"}, {"PATH_INFO": "/org/70000000000000000000/a.md"},
                  dict(inside, HTTP_DESTINATION="https://h/dav/org/8/plan.md"),
                  dict(inside, HTTP_DESTINATION="https://h/dav/org/7/../8/plan.md"),
                  dict(inside, HTTP_IF="<https://h/dav/org/8/x.md> (<opaquelocktoken:x>)")):
        assert request_scope(whole) == "", whole

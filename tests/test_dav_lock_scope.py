"""A WebDAV request reads only the leases that can matter to it (dav_provider/locks.py,
request_focus; store.locks.near): those on its path and the folders above it, and for a folder's
listing, DELETE or MOVE those on its members or below it. One member holding many locks in an
organisation once made every PROPFIND and PUT of every member of it read all of them (about 20 ms
each at MAX_LIVE_PER_HOLDER). The rows are counted on the real gateway's own connections, as
tests/test_dav_scale.py counts statements; the locking rules are checked with those locks around."""
from __future__ import annotations

import threading
from typing import Any
from xml.etree import ElementTree as ET

import psycopg
import pytest

from store.db import Database
from tests.conftest import observed_database, running_gateway
from tests.test_dav import Dav
from tests.test_dav_lock_bounds import lock_body

NS = {"d": "DAV:"}
DISCOVERY = b'<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/></D:prop></D:propfind>'
HELD = 40   # locks held on other files of the organisation

_LOCK = threading.Lock()
_READ: list[str] = []   # the paths of the lease rows the gateway read, one per row
_QUERIES: list[int] = []   # one entry per statement that read lease rows (their number)


class LeaseReading(psycopg.Connection):
    """A psycopg connection that notes the path of every lease row a statement returns."""

    def execute(self, query: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        cur = super().execute(query, *args, **kwargs)
        text = query if isinstance(query, str) else repr(query)
        if "path_leases" in text and cur.description and cur.pgresult is not None:
            names = [c.name for c in cur.description]
            if "token" in names and "path" in names:
                token, path = names.index("token"), names.index("path")
                rows = [cur.pgresult.get_value(i, path) for i in range(cur.pgresult.ntuples)
                        if cur.pgresult.get_value(i, token) is not None]
                with _LOCK:
                    _READ.extend(bytes(p).decode() for p in rows)
                    _QUERIES.append(len(rows))
        return cur


@pytest.fixture
def reading_db(db_url: str) -> Any:
    database = observed_database(db_url, LeaseReading)
    yield database
    database.close()


@pytest.fixture
def served(reading_db: Database, boot: dict[str, Any]) -> Any:
    """(Dav, the gateway's lock storage) on a gateway whose connections note the lease rows read."""
    with running_gateway(reading_db, threads=2) as running:
        assert running.gateway.login_watch.wait_live()
        dav = Dav(running, running.session(basic=(boot["email"], boot["password"])), boot)
        yield dav, running.gateway.dav.provider.lock_manager.storage


def lock(dav: Dav, path: str, *, depth: str = "0", scope: str = "exclusive") -> str:
    r = dav.req("LOCK", path, data=lock_body("ada", scope), headers={"Depth": depth, "Timeout": "Second-600"})
    assert r.status_code == 200, r.text
    return r.headers["Lock-Token"]


def hold_many(dav: Dav, folder: str, n: int = HELD) -> list[str]:
    """``n`` notes of ``folder``, each locked by this login: what one busy member holds."""
    notes = [f"{folder}/held{i}.md" for i in range(n)]
    for note in notes:
        assert dav.put(note, "held").status_code == 201
        lock(dav, note)
    return notes


def read_by(dav: Dav, method: str, path: str, **kw: Any) -> tuple[Any, list[str]]:
    """(the response, the tree paths of the lease rows the gateway read to answer it)."""
    with _LOCK:
        before = len(_READ)
    r = dav.req(method, path, **kw)
    with _LOCK:
        return r, sorted(_READ[before:])


@pytest.mark.parametrize("watched", [True, False], ids=["watched", "every-request-reads"])
def test_a_request_reads_no_lease_of_other_files_of_its_organisation(served: Any, watched: bool) -> None:
    dav, storage = served
    held = hold_many(dav, dav.g)
    held_deeper = hold_many(dav, dav.a, 5)
    mine, free = f"{dav.g}/mine.md", f"{dav.g}/free.md"
    assert dav.put(mine, "mine").status_code == 201 and dav.put(free, "free").status_code == 201
    lock(dav, mine)
    if not watched:
        storage.watch = None   # (as while locks change all the time: no read is skipped)

    for _ in range(2):   # the first and a repeated request alike
        r, read = read_by(dav, "PUT", free, data=b"changed")
        assert r.status_code == 204 and read == [], read
        r, read = read_by(dav, "PROPFIND", mine, headers={"Depth": "0"}, data=DISCOVERY)
        assert r.status_code == 207 and set(read) <= {mine}, read
        assert len(ET.fromstring(r.content).findall(".//d:activelock", NS)) == 1
        r, read = read_by(dav, "PROPFIND", free, headers={"Depth": "0"})
        assert r.status_code == 207 and read == [], read
        # A listing reads its members' leases, none further below it.
        r, read = read_by(dav, "PROPFIND", f"org/{dav.org}/", headers={"Depth": "1"})
        assert r.status_code == 207 and read == [], read
        r, read = read_by(dav, "PROPFIND", dav.a + "/", headers={"Depth": "1"})
        assert r.status_code == 207 and set(read) <= set(held_deeper), read
        r, read = read_by(dav, "GET", free)
        assert r.status_code == 200 and read == [], read
    # A lock being taken decides against the leases that can conflict, not the organisation's
    # (and reads back its own).
    r, read = read_by(dav, "LOCK", free, data=lock_body("ada"), headers={"Depth": "0"})
    assert r.status_code == 200 and set(read) <= {free}, read
    assert len(held) == HELD


def test_a_depth_infinity_lock_on_a_folder_above_still_stops_a_put_below_it(served: Any) -> None:
    dav, _ = served
    hold_many(dav, dav.g)   # locks elsewhere in the organisation
    note, script = f"{dav.a}/below.md", f"{dav.a}/scripts/fetch.py"   # one and two folders below
    assert dav.put(note, "before").status_code == 201
    assert dav.put(script, "print(1)\n").status_code == 201
    token = lock(dav, dav.a + "/", depth="infinity")
    for path in (note, script, f"{dav.a}/new.md", f"{dav.a}/scripts/new.py"):
        assert dav.put(path, "no token").status_code == 423, path
    assert dav.req("DELETE", script).status_code == 423
    assert dav.get(note).text == "before" and dav.get(script).text == "print(1)\n"
    assert dav.put(note, "with it", If=f"({token})").status_code == 204
    assert dav.put(script, "print(2)\n", If=f"({token})").status_code == 204
    assert dav.put(f"{dav.g}/held0.md", "x").status_code == 423   # (still its own lock's)
    assert dav.req("UNLOCK", dav.a + "/", headers={"Lock-Token": token}).status_code == 204
    assert dav.put(script, "print(3)\n").status_code == 204


def test_a_lock_on_a_member_shows_in_its_folders_listing_and_stops_the_folders_delete_and_move(
        served: Any) -> None:
    dav, _ = served
    hold_many(dav, dav.a)   # locks elsewhere in the organisation
    member, other = f"{dav.g}/member.md", f"{dav.g}/other.md"
    assert dav.put(member, "m").status_code == 201 and dav.put(other, "o").status_code == 201
    token = lock(dav, member).strip("<>")

    for body in (DISCOVERY, b""):   # <prop><lockdiscovery/>, and allprop
        r = dav.req("PROPFIND", dav.g + "/", headers={"Depth": "1"}, data=body)
        assert r.status_code == 207, r.text
        found = {}
        for response in ET.fromstring(r.content).findall("d:response", NS):
            href = response.find("d:href", NS).text
            found[href.rsplit("/", 1)[-1] or "/"] = [t.text for t in response.findall(
                ".//d:activelock/d:locktoken/d:href", NS)]
        assert found["member.md"] == [token], found
        assert found["other.md"] == [] and found["/"] == [], found

    for r in (dav.req("DELETE", dav.g + "/"),
              dav.req("MOVE", dav.g + "/", headers={"Destination": dav.url(f"org/{dav.org}/guilds/renamed/")}),
              dav.req("LOCK", dav.g + "/", data=lock_body("ada"), headers={"Depth": "infinity"})):
        assert r.status_code == 423, r.text
        hrefs = [h.text for h in ET.fromstring(r.content).findall(".//d:no-conflicting-lock/d:href", NS)]
        assert hrefs == [f"/dav/{member}"], r.text
    assert dav.get(member).text == "m" and dav.get(other).text == "o"


def test_a_request_for_a_name_beyond_ascii_reads_its_leases_in_one_query(served: Any) -> None:
    """PATH_INFO is WSGI's latin-1 reading of the client's UTF-8: taken as it is, the request's
    first read asked for the leases of "CafÃ©.md", and WsgiDAV's question about "Café.md" then
    cost a second query."""
    dav, storage = served
    note = f"{dav.g}/Café.md"
    assert dav.put(note, "menu").status_code == 201
    lock(dav, note)
    storage.watch = None   # (every request reads, as while locks change)
    with _LOCK:
        before = len(_QUERIES)
    r = dav.req("PROPFIND", note, headers={"Depth": "0"}, data=DISCOVERY)
    assert r.status_code == 207 and len(ET.fromstring(r.content).findall(".//d:activelock", NS)) == 1
    with _LOCK:
        assert len(_QUERIES[before:]) == 1, _QUERIES[before:]

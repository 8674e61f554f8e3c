"""WebDAV locks that protect (RFC 4918 sections 6, 7 and 9), through two gateway processes' worth
of servers on one PostgreSQL: without the lock token a change is 423 and nothing changes; with it
(the If header) the change goes through."""
from __future__ import annotations

import unicodedata
from typing import Any, Iterator
from urllib.parse import unquote
from xml.etree import ElementTree as ET

import pytest
import requests

from store import login_watch
from store.access import Door
from store.db import Database
from store.errors import Locked
from store.host import HostTree
from tests.conftest import RunningServer, running_gateway
from tests.test_dav import Dav, artifact
from tests.test_door_logins import delivered

NS = {"d": "DAV:"}


def lock_body(scope: str = "exclusive", owner: str = "finder") -> bytes:
    return (f'<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:{scope}/>'
            f'</D:lockscope><D:locktype><D:write/></D:locktype><D:owner>{owner}</D:owner></D:lockinfo>').encode()


PROP = (b'<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:" xmlns:Z="urn:x-test:">'
        b'<D:set><D:prop><Z:color>red</Z:color></D:prop></D:set></D:propertyupdate>')


@pytest.fixture
def second(db: Database) -> Iterator[RunningServer]:
    """Another gateway on the same store, as behind a load balancer."""
    with running_gateway(db) as running:
        yield running


@pytest.fixture
def pair(server: Any, second: RunningServer, operator: requests.Session, boot: dict[str, Any]) -> tuple[Dav, Dav]:
    """The lock holder on the first gateway, and another client (same user, no token) on the second."""
    other = second.session(basic=(boot["email"], boot["password"]))
    return Dav(server, operator, boot), Dav(second, other, boot)


def lock(dav: Dav, path: str, *, depth: str = "0", scope: str = "exclusive", timeout: str = "Second-600") -> str:
    r = dav.req("LOCK", path, data=lock_body(scope), headers={"Timeout": timeout, "Depth": depth})
    assert r.status_code in (200, 201), r.text
    return r.headers["Lock-Token"]


def test_a_locked_note_refuses_every_change_without_its_token(pair: tuple[Dav, Dav], db: Database) -> None:
    holder, other = pair
    note, spare = f"{holder.g}/open.md", f"{holder.g}/spare.md"
    holder.put(note, "mine")
    holder.put(spare, "spare")
    token = lock(holder, note)
    refusals = {
        "DELETE": other.req("DELETE", note),
        "MOVE away": other.move(note, f"{holder.g}/taken.md"),
        "MOVE onto": other.move(spare, note),
        "COPY onto": other.req("COPY", spare, headers={"Destination": other.url(note)}),
        "PUT": other.put(note, "theirs"),
        "PROPPATCH": other.req("PROPPATCH", note, data=PROP),
    }
    assert {k: r.status_code for k, r in refusals.items()} == {k: 423 for k in refusals}
    # Each names the lock's root as a URL a client can use (RFC 4918 16, no-conflicting-lock).
    hrefs = ET.fromstring(refusals["PUT"].content).findall(".//{DAV:}no-conflicting-lock/{DAV:}href")
    assert [h.text for h in hrefs] == [f"/dav/{note}"]
    assert artifact(db, note)["content"] == "mine" and artifact(db, note)["version"] == 1
    assert artifact(db, spare) is not None
    # The holder's UNLOCK still finds its lock.
    with_token = {"If": f"({token})"}
    assert holder.req("PROPPATCH", note, data=PROP, headers=with_token).status_code == 207
    assert holder.put(note, "mine, edited", **with_token).status_code == 204
    # COPY onto the locked note: the token is tagged with the destination (RFC 4918 10.4.3).
    tagged = {"If": f"<{holder.url(note)}> ({token})"}
    assert holder.req("COPY", spare, headers={"Destination": holder.url(note), **tagged}).status_code == 204
    assert holder.get(note).text == "spare"
    assert holder.req("DELETE", note, headers=with_token).status_code == 204
    assert artifact(db, note) is None
    # The lock went with the note.
    assert holder.req("UNLOCK", note, headers={"Lock-Token": token}).status_code in (404, 409)


def test_finders_lock_of_an_accented_name_is_refreshed_and_released_at_the_url_it_locked(
        pair: tuple[Dav, Dav], db: Database) -> None:
    """macOS Finder sends names in NFD and refreshes and unlocks at the URL it locked; the note
    is one whichever spelling names it, and so is its lock. A second LOCK meanwhile is refused
    with 423 naming the lock's URL."""
    holder, other = pair
    nfd = f"{holder.g}/" + unicodedata.normalize("NFD", "Résumé.md")
    token = lock(holder, nfd)
    with_token = {"If": f"({token})"}
    assert holder.put(nfd, "first", **with_token).status_code == 201
    refused = other.req("LOCK", nfd, data=lock_body(), headers={"Depth": "0"})
    assert refused.status_code == 423
    hrefs = ET.fromstring(refused.content).findall(".//{DAV:}no-conflicting-lock/{DAV:}href")
    assert [unquote(h.text) for h in hrefs] == [f"/dav/{holder.g}/Résumé.md"]
    refreshed = holder.req("LOCK", nfd, headers={**with_token, "Timeout": "Second-600"})
    assert refreshed.status_code == 200, refreshed.text
    assert holder.req("UNLOCK", nfd, headers={"Lock-Token": token}).status_code == 204
    # Unlocked: the next save's LOCK, from anyone, is granted.
    assert other.req("LOCK", nfd, data=lock_body(), headers={"Depth": "0"}).status_code == 200
    assert artifact(db, f"{holder.g}/Résumé.md")["content"] == "first"


def test_a_lock_taken_through_one_gateway_stops_the_very_next_write_through_the_other(
        pair: tuple[Dav, Dav], db: Database, db_url: str, second: RunningServer) -> None:
    """A gateway that saw no lock anywhere skips the lock query of a write (dav_provider/locks.py)
    until a change to the locks is announced: a LOCK through the first gateway must still stop the
    second one's very next PUT, round after round."""
    holder, other = pair
    note = f"{holder.g}/shared.md"
    holder.put(note, "v0")
    assert second.gateway.login_watch.wait_live()
    for n in range(5):
        assert other.put(note, f"other {n}").status_code == 204   # no lock anywhere: remembered
        assert other.put(note, f"other {n}b").status_code == 204
        with delivered(db_url, login_watch.LEASES):
            token = lock(holder, note)
        assert other.put(note, "not allowed").status_code == 423, f"round {n}"
        assert holder.put(note, f"holder {n}", If=f"({token})").status_code == 204
        assert holder.req("UNLOCK", note, headers={"Lock-Token": token}).status_code == 204
    assert artifact(db, note)["content"] == "holder 4"


def test_a_locked_note_moves_with_its_token(pair: tuple[Dav, Dav], db: Database) -> None:
    holder, other = pair
    note = f"{holder.g}/mv.md"
    holder.put(note, "x")
    token = lock(holder, note)
    assert other.move(note, f"{holder.g}/mv2.md").status_code == 423
    r = holder.req("MOVE", note, headers={"Destination": holder.url(f"{holder.g}/mv2.md"), "If": f"({token})"})
    assert r.status_code == 201, r.text
    assert artifact(db, f"{holder.g}/mv2.md")["content"] == "x"


def test_a_depth_infinity_folder_lock_protects_its_members(pair: tuple[Dav, Dav], db: Database) -> None:
    holder, other = pair
    member = f"{holder.g}/member.md"
    holder.put(member, "m")
    token = lock(holder, holder.g + "/", depth="infinity")
    assert other.put(f"{holder.g}/new.md", "n").status_code == 423
    assert other.put(member, "changed").status_code == 423
    assert other.req("DELETE", member).status_code == 423
    assert other.move(member, f"{holder.g}/renamed.md").status_code == 423
    assert artifact(db, f"{holder.g}/new.md") is None and artifact(db, member)["content"] == "m"
    t = {"If": f"({token})"}
    assert holder.put(f"{holder.g}/new.md", "n", **t).status_code == 201
    assert holder.req("MOVE", member, headers={"Destination": holder.url(f"{holder.g}/renamed.md"), **t}).status_code == 201
    assert holder.req("DELETE", f"{holder.g}/renamed.md", headers=t).status_code == 204
    assert holder.req("UNLOCK", holder.g + "/", headers={"Lock-Token": token}).status_code == 204
    assert other.put(member, "free again").status_code == 201


def test_shared_locks_refresh_timeout_and_discovery(pair: tuple[Dav, Dav], db: Database) -> None:
    holder, other = pair
    note = f"{holder.g}/shared.md"
    holder.put(note, "s")
    a = lock(holder, note, scope="shared")
    b = lock(other, note, scope="shared")
    assert a != b
    r = other.req("LOCK", note, data=lock_body("exclusive"), headers={"Timeout": "Second-60", "Depth": "0"})
    assert r.status_code == 423
    # Either shared token lets its holder write (RFC 4918 6.2: each holder submits its own).
    assert other.put(note, "by b", If=f"({b})").status_code == 204
    assert holder.put(note, "no token").status_code == 423
    # Discovery lists both, with their depth, timeout and owner.
    r = other.req("PROPFIND", note, headers={"Depth": "0"}, data=(
        b'<?xml version="1.0"?><D:propfind xmlns:D="DAV:"><D:prop><D:lockdiscovery/></D:prop></D:propfind>'))
    assert r.status_code == 207
    active = ET.fromstring(r.content).findall(".//d:activelock", NS)
    tokens = {x.findtext("d:locktoken/d:href", namespaces=NS) for x in active}
    assert tokens == {a.strip("<>"), b.strip("<>")}
    for x in active:
        assert x.find("d:lockscope/d:shared", NS) is not None and x.findtext("d:depth", namespaces=NS) == "0"
        assert (x.findtext("d:timeout", namespaces=NS) or "").startswith("Second-")
        assert "finder" in ET.tostring(x.find("d:owner", NS), encoding="unicode")
    # Refresh: LOCK with the token in If and no body answers the lock with its new timeout.
    r = holder.req("LOCK", note, headers={"If": f"({a})", "Timeout": "Second-900"})
    assert r.status_code == 200, r.text
    assert "Second-900" in r.text or "Second-899" in r.text
    # A lock that timed out protects nothing.
    with db.transaction() as conn:
        conn.execute("UPDATE path_leases SET expires_at = now() - interval '1 second'")
    assert holder.put(note, "after expiry").status_code == 204
    assert holder.req("UNLOCK", note, headers={"Lock-Token": a}).status_code in (404, 409)


def test_two_gateways_do_not_both_grant_an_exclusive_lock(pair: tuple[Dav, Dav]) -> None:
    import concurrent.futures
    holder, other = pair
    note = f"{holder.g}/race.md"
    holder.put(note, "r")
    for _ in range(5):
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda d: d.req("LOCK", note, data=lock_body(),
                                                    headers={"Timeout": "Second-60", "Depth": "0"}),
                                    (holder, other)))
        statuses = sorted(r.status_code for r in results)
        assert statuses == [200, 423], statuses
        for r in results:
            if r.status_code == 200:
                d = holder if r is results[0] else other
                assert d.req("UNLOCK", note, headers={"Lock-Token": r.headers["Lock-Token"]}).status_code == 204


def test_a_failure_of_ours_is_logged_whole_and_answered_with_a_sentence(caplog: Any) -> None:
    """What a WebDAV client receives when a store call fails unexpectedly (a driver error): a 500
    with a sentence; the log keeps the traceback."""
    import logging
    from wsgidav.error_printer import ErrorPrinter

    from dav_provider.app import PlainErrors

    def failing(environ: dict, start_response: Any) -> Any:
        raise RuntimeError("connection to server at 10.0.0.7 failed: password authentication failed")
        yield b""

    app = ErrorPrinter(None, PlainErrors(None, failing, {}), {})
    seen: list[str] = []
    with caplog.at_level(logging.ERROR):
        body = b"".join(app({"REQUEST_METHOD": "GET", "PATH_INFO": "/x"}, lambda s, h, e=None: seen.append(s)))
    assert seen == ["500 Internal Server Error"]
    assert b"10.0.0.7" not in body and b"Source exception" not in body and b"logged" in body
    assert "Traceback" in caplog.text and "10.0.0.7" in caplog.text


def test_a_webdav_lock_stops_changes_from_outside_webdav_and_says_who_holds_it(
        server: Any, operator: requests.Session, boot: dict[str, Any], db: Database) -> None:
    """The FUSE mount and the web app reach the store through the Host tree with no lock token:
    a WebDAV client's lock refuses their changes (Locked: 423 on the web, EBUSY in the mount;
    tests/rules runs the same rule on every surface) with a sentence naming the holder, while
    the holder goes on saving through WebDAV with its token."""
    dav = Dav(server, operator, boot)
    note, member, other = f"{dav.g}/word.md", f"{dav.g}/new.md", f"{dav.g}/other.md"
    assert dav.put(note, "draft").status_code == 201
    assert dav.put(other, "other").status_code == 201
    token = lock(dav, note)
    tree = HostTree(db, Door(db).principal_for_email(boot["email"]))  # type: ignore[arg-type]
    for change in (lambda: tree.write(note, b"from the mount"), lambda: tree.delete(note),
                   lambda: tree.move(note, f"{dav.g}/elsewhere.md"),
                   lambda: tree.move(note, note + "~"),         # an editor's rename-away save
                   lambda: tree.move(other, note), lambda: tree.copy(other, note)):
        with pytest.raises(Locked):
            change()
    with pytest.raises(Locked) as refused:
        tree.write(note, b"from the mount")
    assert refused.value.message.startswith(f"/{note} is locked by a WebDAV client of {boot['email']}")
    assert artifact(db, note)["content"] == "draft" and artifact(db, note)["version"] == 1
    assert artifact(db, other)["content"] == "other"
    assert dav.put(note, "final", If=f"({token})").status_code == 204
    # A folder locked with depth infinity: a new note in it too.
    assert dav.req("UNLOCK", note, headers={"Lock-Token": token}).status_code == 204
    folder_token = lock(dav, dav.g + "/", depth="infinity")
    with pytest.raises(Locked):
        tree.write(member, b"new")
    assert artifact(db, member) is None
    assert dav.req("UNLOCK", dav.g + "/", headers={"Lock-Token": folder_token}).status_code == 204
    tree.write(member, b"new")
    tree.write(note, b"after the lock")
    assert artifact(db, note)["content"] == "after the lock"


def test_a_folder_lock_of_depth_0_guards_its_members_list_from_the_tree_as_webdav_does(
        server: Any, operator: requests.Session, boot: dict[str, Any], db: Database) -> None:
    """RFC 4918 7.5 as WsgiDAV applies it to a request without the token: a depth-0 lock on a
    folder stops adding and removing members (create, delete, move away), not writing an existing
    member. The tree (the mount's, the web app's) applies the same rule, naming the folder."""
    dav = Dav(server, operator, boot)
    member = f"{dav.g}/member.md"
    assert dav.put(member, "m").status_code == 201
    token = lock(dav, dav.g + "/", depth="0")
    tree = HostTree(db, Door(db).principal_for_email(boot["email"]))  # type: ignore[arg-type]
    with pytest.raises(Locked) as refused:
        tree.write(f"{dav.g}/new.md", b"n")
    assert f"(its folder /{dav.g} is locked)" in refused.value.message
    for change in (lambda: tree.delete(member), lambda: tree.move(member, f"{dav.g}/renamed.md")):
        with pytest.raises(Locked):
            change()
    tree.write(member, b"changed in place")   # a member's content is not the folder's
    assert artifact(db, member)["content"] == "changed in place" and artifact(db, f"{dav.g}/new.md") is None
    # WebDAV without the token agrees on both counts.
    assert dav.put(f"{dav.g}/new.md", "n").status_code == 423
    assert dav.put(member, "again").status_code in (200, 204)
    assert dav.req("UNLOCK", dav.g + "/", headers={"Lock-Token": token}).status_code == 204
    tree.write(f"{dav.g}/new.md", b"n")


def test_a_lock_is_held_by_the_login_however_its_email_is_spelt(server: Any, boot: dict[str, Any],
                                                              db: Database) -> None:
    """Basic logins match the email without regard to case; the lock's holder was the email as
    the header spelt it, so "ADA@..." and "ada@..." were two holders: the same person could not
    unlock their own lock, and each spelling had a lock limit of its own."""
    shouted = Dav(server, server.session(basic=(boot["email"].upper(), boot["password"])), boot)
    plain = Dav(server, server.session(basic=(boot["email"].lower(), boot["password"])), boot)
    note = f"org/{boot['org_id']}/guilds/{boot['guild_id']}/spelt.md"
    assert plain.put(note, "text").status_code == 201
    token = lock(shouted, note)
    with db.connection() as conn:
        held = conn.execute("SELECT data->>'principal' AS p FROM path_leases WHERE token = %s",
                            (token.strip("<>"),)).fetchone()
    assert held["p"] == boot["email"]
    r = plain.put(note, "changed", If=f"({token})")
    assert r.status_code == 204, r.text
    r = plain.req("UNLOCK", note, headers={"Lock-Token": token})
    assert r.status_code == 204, r.text


def test_leases_taken_under_another_spelling_are_held_by_the_stored_email_after_the_upgrade(
        db: Database, boot: dict[str, Any]) -> None:
    """sql/153: a lease from before the holder was the stored email, held by the header's spelling,
    would refuse its own owner (named as stored now) until it expired."""
    from datetime import datetime, timedelta, timezone
    from pathlib import Path

    from store import locks as leases
    note = f"org/{boot['org_id']}/guilds/{boot['guild_id']}/old.md"
    with db.transaction() as conn:
        for token, who in (("opaquelocktoken:shouted", boot["email"].upper()), ("opaquelocktoken:nobody", "x@y.z")):
            leases.create(conn, token, note, {"depth": "0", "scope": "shared", "principal": who},
                          datetime.now(timezone.utc) + timedelta(hours=1))
    sql = (Path(__file__).resolve().parent.parent / "sql" / "153_lease_holders_as_stored.sql").read_text("utf-8")
    with db.transaction() as conn:
        conn.execute(sql)
        held = {r["token"]: r["p"] for r in conn.execute(
            "SELECT token, data->>'principal' AS p FROM path_leases WHERE path = %s", (note,))}
    assert held == {"opaquelocktoken:shouted": boot["email"], "opaquelocktoken:nobody": "x@y.z"}

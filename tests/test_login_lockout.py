"""Nobody elsewhere can lock the account's owner out, and the machine being slow does not refuse a
right password.

Wrong passwords are counted per account at each client address (the strict limit), per account
from all addresses together (a much higher ceiling, which an address that logged in to the account
passes) and per address (store.throttle). Requests here come from different loopback addresses
(the client socket bound to 127.0.0.x, which the gateway sees as REMOTE_ADDR).

Logins of the same password at once share one argon2 verification, the one already running
included (store.throttle.PasswordChecks); the verification is held open on an Event here (the
``held`` fixture, tests/conftest.py), so nothing depends on timing."""
from __future__ import annotations

import threading
from typing import Any

import pytest
import requests
from requests.adapters import HTTPAdapter

from store import access, admin
from store.errors import TooManyAttempts
from store import throttle as limits
from store.throttle import BUSY, LoginThrottle, PasswordChecks
from tests.conftest import HELD, wait_until

OWNER, ATTACKER = "127.0.0.1", "127.0.0.9"


class _FromAddress(HTTPAdapter):
    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["source_address"] = (self.address, 0)
        super().init_poolmanager(*args, **kwargs)


def session_from(address: str, auth: tuple[str, str] | None = None) -> requests.Session:
    """A requests session whose connections come from ``address`` (any 127.0.0.x is this host)."""
    s = requests.Session()
    s.mount("http://", _FromAddress(address))
    s.auth = auth
    return s


def web_login(s: requests.Session, url: str, email: str, password: str) -> requests.Response:
    return s.post(f"{url}/login", data={"email": email, "password": password}, allow_redirects=False, timeout=30)


def propfind(s: requests.Session, url: str) -> requests.Response:
    return s.request("PROPFIND", f"{url}/dav/", headers={"Depth": "0"}, timeout=30)


def assert_throttled(r: requests.Response, says: str) -> None:
    assert r.status_code == 429, (r.status_code, r.text[:300])
    assert 1 <= int(r.headers["Retry-After"]) <= 300
    assert says in r.text, r.text[:300]


def test_wrong_passwords_from_another_address_do_not_lock_the_owner_out(server, boot) -> None:
    """The reviewer's case: ten wrong passwords on the web form from 127.0.0.9 made the owner's
    verified WebDAV and API clients and a right web login at 127.0.0.1 answer 429 for 5 minutes."""
    url, email, password = server.url, boot["email"], boot["password"]
    assert server.gateway.login_watch.wait_live()
    note = f"{url}/dav/org/{boot['org_id']}/guilds/{boot['guild_id']}/mine.md"
    owner = session_from(OWNER, (email, password))   # the owner's WebDAV / API client, verified once
    assert owner.put(note, data=b"mine\n", timeout=30).status_code == 201
    assert propfind(owner, url).status_code == 207
    browser = session_from(OWNER)
    assert web_login(browser, url, email, password).status_code == 302

    attacker = session_from(ATTACKER)
    for _ in range(10):
        r = web_login(attacker, url, email, "a wrong guess")
        assert r.status_code == 401, (r.status_code, r.text[:300])
    # Guessing from there is throttled: the right password too (no answer tells the guesser when
    # a guess is right), on every front end, remembered by the door or not.
    assert_throttled(web_login(attacker, url, email, "another guess"), "too many failed logins for this account")
    assert_throttled(web_login(attacker, url, email, password), "too many failed logins for this account")
    attacker.auth = (email, password)
    assert_throttled(attacker.get(f"{url}/api/collections", timeout=30), "too many failed logins")
    assert_throttled(propfind(attacker, url), "too many failed logins")
    assert_throttled(attacker.get(note, timeout=30), "too many failed logins")

    # The owner, at their own address, is not refused: the remembered WebDAV client (PROPFIND, the
    # fast GET), the API with Basic, the web session, and a new web login with the password.
    assert propfind(owner, url).status_code == 207
    r = owner.get(note, timeout=30)
    assert r.status_code == 200 and r.content == b"mine\n"
    assert owner.get(f"{url}/api/collections", timeout=30).status_code == 200
    assert browser.get(f"{url}/databases", allow_redirects=False, timeout=30).status_code == 200
    fresh = session_from(OWNER)
    assert web_login(fresh, url, email, password).status_code == 302
    assert fresh.get(f"{url}/databases", allow_redirects=False, timeout=30).status_code == 200


def test_guessers_with_many_addresses_meet_the_accounts_ceiling_but_the_owners_address_passes(
        server, boot) -> None:
    """Limits made small: 3 failures per account at an address, 6 for the account in all."""
    server.gateway.door.throttle = LoginThrottle(account_limit=3, account_ceiling=6)
    url, email, password = server.url, boot["email"], boot["password"]
    owner = session_from(OWNER, (email, password))
    assert owner.get(f"{url}/api/collections", timeout=30).status_code == 200   # the owner's address

    for address in ("127.0.0.20", "127.0.0.21"):
        guesser = session_from(address, (email, "a wrong guess"))
        assert [guesser.get(f"{url}/api/collections", timeout=30).status_code for _ in range(3)] == [401] * 3
        assert_throttled(guesser.get(f"{url}/api/collections", timeout=30),
                         "too many failed logins for this account from this address")
    # Six failures from two addresses: a third address (the right password or not) is refused too.
    for address in ("127.0.0.22", "127.0.0.23"):
        for login in [(email, "a wrong guess"), (email, password)]:
            r = session_from(address, login).get(f"{url}/api/collections", timeout=30)
            assert_throttled(r, "too many failed logins for this account;")
            assert "API token" in r.json()["error"]
    # The owner's address logged in before: it is held to its own failures only.
    assert owner.get(f"{url}/api/collections", timeout=30).status_code == 200
    assert propfind(owner, url).status_code == 207
    assert web_login(session_from(OWNER), url, email, password).status_code == 302
    # A token is let in from anywhere.
    token = session_from("127.0.0.22", (email, boot["member_token"]))
    assert token.get(f"{url}/api/collections", timeout=30).status_code == 200


def test_an_address_known_to_an_account_passes_its_ceiling_for_a_while_only() -> None:
    password_keys = limits.password_keys
    now = [1000.0]
    throttle = LoginThrottle(account_limit=2, account_ceiling=4, address_limit=100, window=60, known_for=30,
                             clock=lambda: now[0])
    owner = password_keys("Ada@Example.com", "10.0.0.1")
    with throttle.attempt(owner):
        pass
    throttle.succeeded(owner)   # known to the account until 1030
    for address in ("10.0.0.7", "10.0.0.8"):
        for _ in range(2):
            with throttle.attempt(password_keys("ada@example.com", address)) as failed:
                failed()
        with pytest.raises(TooManyAttempts, match="for this account from this address"):
            with throttle.attempt(password_keys("ada@example.com", address)):
                pass
    with pytest.raises(TooManyAttempts, match="too many failed logins for this account;") as ceiling:
        with throttle.attempt(password_keys("ada@example.com", "10.0.0.9")):
            pass
    assert ceiling.value.retry_after == 60
    assert throttle.would_refuse(password_keys("ada@example.com", "10.0.0.9"))
    assert not throttle.would_refuse(owner)
    with throttle.attempt(owner):
        pass
    # Another account is not affected.
    assert not throttle.would_refuse(password_keys("bo@example.com", "10.0.0.9"))
    # Once it has not logged in for ``known_for``, the owner's address is one of many again.
    now[0] = 1031
    assert throttle.would_refuse(owner)
    now[0] = 1061   # the failures have left the window
    assert not throttle.would_refuse(password_keys("ada@example.com", "10.0.0.9"))
    # A caller with no address is never "known".
    throttle.succeeded(password_keys("ada@example.com", None))
    assert {account: list(addresses) for account, addresses in throttle._known.items()} == {
        "ada@example.com": ["10.0.0.1"]}


class _Live:
    """A LoginWatch that is up and has seen no change: the door's remembered logins stay valid."""

    def current(self) -> int:
        return 1


def remembering_door(throttle: LoginThrottle, *logins: tuple[str, str]) -> access.Door:
    """A door (no database: a remembered login makes no query) that has verified ``logins``."""
    door = access.Door(None, throttle=throttle, watch=_Live())  # type: ignore[arg-type]
    for email, password in logins:
        door._remembered.put(door._remembered.key("basic", email, password), 1, access.Principal("user", 1, email))
    return door


def fill_ceiling(throttle: LoginThrottle, email: str, per_address: int = 2) -> None:
    """Wrong passwords for ``email`` from two guessers' addresses, ``per_address`` from each."""
    for address in ("10.0.0.7", "10.0.0.8"):
        for _ in range(per_address):
            with throttle.attempt(limits.password_keys(email, address)) as failed:
                failed()


def test_one_accounts_logins_from_many_addresses_leave_other_accounts_known_addresses() -> None:
    """The review's case: remembered logins cost no password check, and each made its address
    known, in one table for every account; one account's logins from a thousand addresses of an
    IPv6 /64 pushed every other account's known addresses out of it, and a few guessers then
    locked those accounts' owners out through the ceiling. Each account now keeps its own, the
    16 most recent."""
    now = [1000.0]
    throttle = LoginThrottle(account_limit=2, account_ceiling=4, address_limit=100, max_keys=40,
                             clock=lambda: now[0])
    ada, bo = ("ada@example.com", "ada's password"), ("bo@example.com", "bo's password")
    door = remembering_door(throttle, ada, bo)
    assert door.remembered_basic(*bo, client="10.0.0.1") is not None   # bo's own address: known to bo

    sent = [f"2001:db8::{i:x}" for i in range(1000)]
    for address in sent:
        now[0] += 1
        assert door.remembered_basic(*ada, client=address) is not None

    fill_ceiling(throttle, bo[0])
    assert door.remembered_basic(*bo, client="10.0.0.9") is None          # bo's ceiling is full,
    assert door.remembered_basic(*bo, client="10.0.0.1") is not None      # and bo's address passes it
    with throttle.attempt(limits.password_keys(bo[0], "10.0.0.1")):
        pass
    # Ada's account passes its own ceiling from its 16 most recent addresses, not from older ones.
    fill_ceiling(throttle, ada[0])
    assert [door.remembered_basic(*ada, client=address) is not None for address in sent[-17:]] == [False] + [True] * 16


def test_accounts_least_recently_logged_in_to_go_first_and_a_remembered_login_renews_once_a_minute() -> None:
    """All accounts together keep at most ``max_keys`` known addresses: the account least
    recently logged in to goes whole, so an account's owner logging in keeps theirs; and a
    remembered login renews its address at most once a minute, not at each of a client's requests."""
    now = [1000.0]
    throttle = LoginThrottle(account_limit=2, account_ceiling=4, address_limit=100, max_keys=4, known_for=3600,
                             clock=lambda: now[0])
    bo = ("bo@example.com", "bo's password")
    others = [(f"u{i}@example.com", f"u{i}'s password") for i in range(8)]
    door = remembering_door(throttle, bo, *others)
    assert door.remembered_basic(*bo, client="10.0.0.1") is not None
    for login in others[:3]:
        now[0] += 1
        assert door.remembered_basic(*login, client="10.0.1.1") is not None
    now[0] += 30
    assert door.remembered_basic(*bo, client="10.0.0.1") is not None   # within the minute: not renewed
    assert throttle._known[bo[0]]["10.0.0.1"] == 1000 + 3600 and next(iter(throttle._known)) == bo[0]
    now[0] += 30
    assert door.remembered_basic(*bo, client="10.0.0.1") is not None   # a minute on: renewed, and last
    assert throttle._known[bo[0]]["10.0.0.1"] == now[0] + 3600 and list(throttle._known)[-1] == bo[0]
    for login in others[3:6]:   # three more accounts: the three least recently logged in to go
        now[0] += 1
        assert door.remembered_basic(*login, client="10.0.1.1") is not None
    assert sorted(throttle._known) == sorted([bo[0], *(email for email, _ in others[3:6])])
    fill_ceiling(throttle, bo[0])
    assert door.remembered_basic(*bo, client="10.0.0.1") is not None
    assert door.remembered_basic(*bo, client="10.0.0.9") is None


# --- the same password at once, on a slow machine ----------------------------------------------

def background(fn: Any, *args: Any) -> tuple[threading.Thread, list[Any]]:
    """``fn(*args)`` in a thread; its answer (or the exception it raised) lands in the list."""
    out: list[Any] = []

    def run() -> None:
        try:
            out.append(fn(*args))
        except Exception as exc:
            out.append(exc)
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


def test_logins_with_the_same_password_wait_for_the_verification_already_running(server, boot, held) -> None:
    """One slot (a 2-core machine with `--workers 2`), and a verification that takes as long as the
    test wants (argon2 on a loaded machine took 3 s, past the second a login waits for a slot): a
    client's first requests, at once, with the right password, on every front end, all get in on
    the one verification."""
    url = server.url
    admin.create_user(server.db, email="cy@example.com", password=HELD)
    admin.add_member(server.db, org_id=boot["org_id"], email="cy@example.com")
    login = ("cy@example.com", HELD)
    server.gateway.door.checks = checks = PasswordChecks(1)

    def api() -> int:
        return requests.get(f"{url}/api/collections", auth=login, timeout=60).status_code

    def dav() -> int:
        return requests.request("PROPFIND", f"{url}/dav/", auth=login, headers={"Depth": "0"},
                                timeout=60).status_code

    def web() -> int:
        return web_login(requests.Session(), url, *login).status_code

    first = background(api)
    assert held.entered.acquire(timeout=10)   # verifying, in the one slot, until released
    others = [background(fn) for fn in (api, dav, web)]

    def joined() -> int:
        return sum(c.joined for c in getattr(checks, "_running", {}).values())
    # Each of the three either waits for the running verification or has been answered.
    wait_until(lambda: joined() + sum(1 for t, _ in others if not t.is_alive()) == 3,
               "the three other logins joined the running verification (or were answered)")
    held.release.set()
    for thread, _ in [first, *others]:
        thread.join(30)
    assert [out for _, out in [first, *others]] == [[200], [200], [207], [302]]
    assert held.started == 1   # one verification for the four


def test_a_login_waits_for_a_slot_as_long_as_verifications_have_been_taking() -> None:
    """With no fixed wait at all (``wait=0``), a verification that took long (100 s by the clock
    given) makes the next login wait for its slot (at most MAX_CHECK_WAIT) instead of being
    refused: a slow machine is not a flood."""
    checks = PasswordChecks(1, waiting=1, wait=0)
    now = [0.0]
    checks.clock = lambda: now[0]

    def slow(stored: str, password: str) -> bool:
        now[0] += 100.0
        return True
    assert checks.verify("stored", "first", slow)

    entered, release = threading.Event(), threading.Event()

    def holding(stored: str, password: str) -> bool:
        entered.set()
        assert release.wait(60)
        return password == "bo's password"
    try:
        holder = background(checks.verify, "ada's hash", "ada's password", holding)
        assert entered.wait(10)
        waiter = background(checks.verify, "bo's hash", "bo's password", holding)

        def settled() -> bool:
            return checks._waiters == 1 or not waiter[0].is_alive()
        wait_until(settled, "bo's login waiting for the slot")
    finally:
        release.set()
    for thread, _ in (holder, waiter):
        thread.join(30)
    assert holder[1] == [False]
    assert waiter[1] == [True], waiter[1]
    # The excess is still refused at once: one waiting, one more is refused.
    release.clear()
    entered.clear()
    try:
        holder = background(checks.verify, "ada's hash", "ada's password", holding)
        assert entered.wait(10)
        waiter = background(checks.verify, "bo's hash", "bo's password", holding)
        wait_until(lambda: checks._waiters == 1, "bo's login waiting for the slot")
        with pytest.raises(TooManyAttempts) as refused:
            checks.verify("cy's hash", "cy's password", holding)
        assert refused.value.message == BUSY and refused.value.retry_after == 2
    finally:
        release.set()
    for thread, _ in (holder, waiter):
        thread.join(30)
    assert waiter[1] == [True]

"""A flood of password logins cannot take the process: at most a few argon2 verifications run at
once (store.throttle.PasswordChecks, as many as the cores), a password login that finds no slot
within a short wait is refused with 429, a sentence and Retry-After, and everything that needs no
verification (a token, a remembered login, /api/health) is answered meanwhile.

Each verification here is held open on an Event for as long as the test needs (the ``held``
fixture, tests/conftest.py: passwords starting "held"), so nothing depends on timing."""
from __future__ import annotations

import os
import threading
from typing import Any

import pytest
import requests

from store import access, admin
from store.errors import TooManyAttempts
from store.throttle import BUSY, PasswordChecks
from tests.conftest import HELD, wait_until

def background(fn: Any, *args: Any) -> tuple[threading.Thread, list[Any]]:
    out: list[Any] = []
    thread = threading.Thread(target=lambda: out.append(fn(*args)), daemon=True)
    thread.start()
    return thread, out


def api_status(url: str, login: tuple[str, str]) -> int:
    return requests.get(f"{url}/api/collections", auth=login, timeout=30).status_code


def assert_busy(r: requests.Response) -> None:
    assert r.status_code == 429, (r.status_code, r.text[:300])
    assert r.headers["Retry-After"] == "2"
    assert "the server is checking too many passwords just now; try again in a few seconds" in r.text


@pytest.fixture
def bo(server, boot) -> tuple[str, str]:
    """A second member whose password no process has verified yet."""
    admin.create_user(server.db, email="bo@example.com", password="bo's password")
    admin.add_member(server.db, org_id=boot["org_id"], email="bo@example.com")
    return ("bo@example.com", "bo's password")


def test_a_password_login_finding_every_slot_taken_is_refused_while_tokens_and_remembered_logins_pass(
        server, boot, bo, held) -> None:
    url, door = server.url, server.gateway.door
    assert server.gateway.login_watch.wait_live()
    remembered = (boot["email"], boot["password"])
    assert api_status(url, remembered) == 200   # verified once: remembered from now on
    token = boot["member_token"]

    door.checks = PasswordChecks(1, waiting=0)
    holder, holder_status = background(api_status, url, ("nobody@example.com", HELD))
    assert held.entered.acquire(timeout=10)   # the one slot is taken, and stays taken until release

    # A password that needs verifying is refused at once, on the API, on WebDAV and on the web app.
    assert_busy(requests.get(f"{url}/api/collections", auth=bo, timeout=10))
    dav = requests.request("PROPFIND", f"{url}/dav/", auth=bo, headers={"Depth": "0"}, timeout=10)
    assert_busy(dav)
    assert_busy(requests.post(f"{url}/login", data={"email": bo[0], "password": bo[1]}, allow_redirects=False,
                              timeout=10))
    # Nothing that needs no verification waits for a slot or is refused.
    assert requests.get(f"{url}/api/health", timeout=10).status_code == 200
    assert api_status(url, remembered) == 200
    assert requests.request("PROPFIND", f"{url}/dav/", auth=remembered, headers={"Depth": "0"},
                            timeout=10).status_code == 207
    assert api_status(url, (boot["email"], token)) == 200
    assert requests.get(f"{url}/api/collections", headers={"Authorization": f"Bearer {token}"},
                        timeout=10).status_code == 200
    assert requests.get(f"{url}/api/agents/{boot['agent_id']}/state",
                        headers={"Authorization": f"Bearer {boot['service_token']}"}, timeout=10).status_code == 200
    assert holder.is_alive() and held.started == 1   # all of that while the slot was held

    held.release.set()
    holder.join(10)
    assert holder_status == [401]
    assert api_status(url, bo) == 200   # a refusal for want of a slot was not a failed login
    assert held.started == 1


def test_a_login_waits_for_a_slot_a_short_while_and_the_excess_is_refused_at_once(server, boot, bo, held) -> None:
    url, door = server.url, server.gateway.door
    door.checks = checks = PasswordChecks(1, waiting=1, wait=30)
    holder, holder_status = background(api_status, url, ("nobody@example.com", HELD))
    assert held.entered.acquire(timeout=10)

    waiter, waiter_status = background(api_status, url, bo)   # queued for the slot
    wait_until(lambda: checks._waiters == 1, "bo's login waiting for the slot")
    cy = ("cy@example.com", "cy's password")
    assert_busy(requests.get(f"{url}/api/collections", auth=cy, timeout=10))   # no room to wait: at once
    assert waiter.is_alive() and holder.is_alive()

    held.release.set()   # the slot comes free: the login waiting for it is verified
    waiter.join(10)
    holder.join(10)
    assert waiter_status == [200] and holder_status == [401]

    # One that waits the whole wait without a slot is refused.
    held.release.clear()
    door.checks = PasswordChecks(1, waiting=1, wait=0.2)
    holder, holder_status = background(api_status, url, ("nobody@example.com", HELD))
    assert held.entered.acquire(timeout=10)
    assert_busy(requests.get(f"{url}/api/collections", auth=("dee@example.com", "dee's password"), timeout=10))
    assert holder.is_alive()
    held.release.set()
    holder.join(10)


def test_a_flood_of_password_logins_leaves_the_server_threads_to_other_requests(server, boot, held) -> None:
    """The server has 8 threads; 12 wrong-password logins arrive at once, every verification held:
    one runs, one waits, ten are refused at once, and other requests are answered meanwhile."""
    url, door = server.url, server.gateway.door
    door.checks = checks = PasswordChecks(1, waiting=1, wait=60)
    flood = [background(api_status, url, (f"flood{i}@example.com", f"held flood {i}")) for i in range(12)]
    assert held.entered.acquire(timeout=10)
    wait_until(lambda: checks._waiters == 1, "a second flood login waiting for the slot")
    wait_until(lambda: sum(1 for t, _ in flood if not t.is_alive()) == 10, "ten flood logins answered")
    assert sorted(s for _, out in flood for s in out) == [429] * 10

    token = boot["member_token"]
    assert requests.get(f"{url}/api/health", timeout=10).status_code == 200
    assert requests.get(f"{url}/api/collections", headers={"Authorization": f"Bearer {token}"},
                        timeout=10).status_code == 200
    assert held.started == 1 and sum(1 for t, _ in flood if t.is_alive()) == 2

    held.release.set()
    for thread, _ in flood:
        thread.join(10)
    assert sorted(s for _, out in flood for s in out) == [401] * 2 + [429] * 10


# --- PasswordChecks itself ---------------------------------------------------------------------

def test_at_most_slots_verifications_run_at_once() -> None:
    checks = PasswordChecks(2, waiting=2, wait=60)
    release, lock = threading.Event(), threading.Lock()
    running, most = [0], [0]

    def check(stored: str, password: str) -> bool:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        release.wait(60)
        with lock:
            running[0] -= 1
        return password.endswith("0")

    def verify(password: str) -> Any:
        try:
            return checks.verify("stored", password, check)
        except TooManyAttempts as exc:
            return exc
    threads = [background(verify, f"password {i}") for i in range(6)]
    wait_until(lambda: running[0] == 2 and checks._waiters == 2, "two verifying and two waiting")
    wait_until(lambda: sum(1 for t, _ in threads if not t.is_alive()) == 2, "two refused")
    refused = [out[0] for t, out in threads if not t.is_alive()]
    assert all(isinstance(r, TooManyAttempts) and r.message == BUSY and r.retry_after == 2 for r in refused)
    release.set()
    for thread, _ in threads:
        thread.join(10)
    answers = [out[0] for _, out in threads if not isinstance(out[0], TooManyAttempts)]
    assert len(answers) == 4 and most[0] == 2


def test_the_same_right_password_waiting_for_a_slot_is_verified_once() -> None:
    """A client opening several connections at once with the right password: one verification
    lets them all in, and they do not count against the logins that may wait. A wrong password
    is verified for each login all the same (the throttle counts one verification a failure)."""
    for password, answer, verified in [("right", True, 1), ("wrong", False, 6)]:
        checks = PasswordChecks(1, waiting=6, wait=60)
        release = threading.Event()
        calls: list[str] = []

        def check(stored: str, password: str) -> bool:
            calls.append(password)
            release.wait(60)
            return password == "right"
        holder = background(checks.verify, "stored", "other", check)
        wait_until(lambda: calls == ["other"], "the slot taken")
        same = [background(checks.verify, "stored", password, check) for _ in range(6)]
        wait_until(lambda: checks._waiters == 1 and [q.joined for q in checks._queued.values()] == [5],
                   "the first one queued and the five others waiting for its answer")
        release.set()
        for thread, _ in [holder, *same]:
            thread.join(10)
        assert holder[1] == [False] and [out for _, out in same] == [[answer]] * 6
        assert calls == ["other"] + [password] * verified


def test_by_default_there_is_a_slot_per_core() -> None:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert PasswordChecks().slots == cores and PasswordChecks().waiting == cores
    assert access._CHECKS.slots == cores

"""Failed-login throttling for the door: per account and per client address, in this process.

Each key (an account's email, a client's address) keeps the times of its recent failures in a
sliding window. A key with ``limit`` failures in the window is refused with ``TooManyAttempts``
before any password is checked, so a refusal costs a dictionary lookup, not an argon2
verification (~85 ms of CPU). Once a key has failures, attempts being verified right now count
too, so parallel guessers cannot all slip past a nearly full window at once (the very first wave
is bounded by the server's worker threads).

Why in the process and not in PostgreSQL: the throttle exists to keep each gateway's CPU for real
requests and to slow guessing to a few tries a minute. A table would cost a write per failed login
(itself a lever for a flood) and a read per login. With N gateways behind a balancer a guesser gets
N times the budget, which still bounds guessing to a handful per minute per account; restarting a
gateway forgets its counts, which an attacker cannot trigger.

The throttle is per account and per address, so a flood of guesses for many accounts from many
addresses passes it; ``PasswordChecks`` bounds what such a flood can cost: at most a few argon2
verifications at once in the process, and a login that cannot have one within a second is refused
(TooManyAttempts), so the rest of the process (token logins, remembered logins, every other
request) is not queued behind it.
"""
from __future__ import annotations

import hashlib
import math
import os
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from store.errors import TooManyAttempts

Key = tuple[str, str]  # (kind, value): ("account", "ada@example.com"), ("address", "10.0.0.7")

ACCOUNT_LIMIT = 10      # failed password logins per account per window
ADDRESS_LIMIT = 30      # failed logins (passwords or tokens) per client address per window
WINDOW = 300.0          # seconds
MAX_KEYS = 100_000      # memory bound: ~100 bytes a key plus its failure times
CHECK_WAIT = 1.0        # seconds a password login may wait for a verification slot
BUSY_RETRY_AFTER = 2    # seconds a login refused for want of a slot is told to wait
BUSY = ("the server is checking too many passwords just now; try again in a few seconds, or log in with"
        " an API token, which needs no password check")


@dataclass
class _Count:
    failures: deque[float] = field(default_factory=deque)
    pending: int = 0


class LoginThrottle:
    """Counts failed logins per key and refuses keys that reached their limit."""

    def __init__(self, *, account_limit: int = ACCOUNT_LIMIT, address_limit: int = ADDRESS_LIMIT,
                 window: float = WINDOW, max_keys: int = MAX_KEYS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = {"account": account_limit, "address": address_limit}
        self.window, self.max_keys, self.clock = window, max_keys, clock
        self._counts: dict[Key, _Count] = {}
        self._lock = threading.Lock()

    @contextmanager
    def attempt(self, keys: Sequence[Key]) -> Iterator[Callable[[], None]]:
        """Reserve one attempt on every key (TooManyAttempts if any is full) for the duration of
        the block; the block calls the yielded function when the credentials were wrong. An
        exception inside (the store unreachable) is not a failed login."""
        failed = []
        with self._lock:
            now = self.clock()
            self._refuse_if_full(keys, now, pending=True)
            for key in keys:
                self._count(key).pending += 1
        try:
            yield lambda: failed.append(True)
        finally:
            with self._lock:
                now = self.clock()
                for key in keys:
                    count = self._count(key)
                    count.pending = max(0, count.pending - 1)
                    if failed:
                        count.failures.append(now)

    def would_refuse(self, keys: Sequence[Key]) -> bool:
        """Whether ``attempt`` would refuse these keys now; reserves and counts nothing (for a
        login remembered by the door, which must still be refused while its keys are full)."""
        with self._lock:
            try:
                self._refuse_if_full(keys, self.clock(), pending=False)
            except TooManyAttempts:
                return True
        return False

    def failed_cheaply(self, keys: Sequence[Key]) -> None:
        """A failure that cost nothing to find (an unknown token): refused with TooManyAttempts if
        a key is already full, else counted."""
        with self._lock:
            now = self.clock()
            self._refuse_if_full(keys, now, pending=False)
            for key in keys:
                self._count(key).failures.append(now)

    def _refuse_if_full(self, keys: Sequence[Key], now: float, *, pending: bool) -> None:
        for kind, value in keys:
            count = self._counts.get((kind, value))
            if count is None:
                continue
            self._expire(count, now)
            # Attempts in flight count once the key has failures: a guesser's parallel wave is cut
            # at the limit, while a client verifying the right password on several connections at
            # once is not refused.
            used = len(count.failures) + (count.pending if pending and count.failures else 0)
            if used >= self.limits[kind]:
                # The window frees a slot when its oldest failure leaves it.
                wait = count.failures[0] + self.window - now if count.failures else 1.0
                retry_after = max(1, math.ceil(wait))
                if kind == "account":
                    message = (f"too many failed logins for this account; try again in {retry_after} seconds,"
                               " or log in with an API token instead of the password")
                else:
                    message = f"too many failed logins from this address; try again in {retry_after} seconds"
                raise TooManyAttempts(message, retry_after)

    def _expire(self, count: _Count, now: float) -> None:
        horizon = now - self.window
        while count.failures and count.failures[0] <= horizon:
            count.failures.popleft()

    def _count(self, key: Key) -> _Count:
        count = self._counts.get(key)
        if count is None:
            if len(self._counts) >= self.max_keys:
                self._shrink()
            count = self._counts[key] = _Count()
        return count

    def _shrink(self) -> None:
        """Drop keys with nothing left in the window; if that is not enough, the oldest half
        (dicts keep insertion order), so memory stays bounded under a flood of new keys."""
        now = self.clock()
        for key in list(self._counts):
            count = self._counts[key]
            self._expire(count, now)
            if not count.failures and not count.pending:
                del self._counts[key]
        if len(self._counts) >= self.max_keys:
            for key in list(self._counts)[: len(self._counts) // 2]:
                if not self._counts[key].pending:
                    del self._counts[key]


def cores() -> int:
    """The number of cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass
class _Check:
    """One verification waiting for a slot, and what the logins of the same password learn from it."""
    done: threading.Event = field(default_factory=threading.Event)
    result: bool = False
    busy: bool = False
    joined: int = 0   # logins of the same password waiting for this answer


class PasswordChecks:
    """At most ``slots`` password verifications at once in this process.

    Why the number of cores: an argon2 verification (argon2-cffi's defaults) is nothing but CPU,
    85 ms of it or more (its four lanes run on threads of their own), outside the GIL, and 64 MiB
    of memory. With more running at once than there are cores none finishes sooner: they only
    share the cores (so every other request of the process, which needs a core too, waits behind
    them) and hold 64 MiB each. 40 threads sending wrong passwords for random emails from many
    addresses (which the per-account and per-address throttle lets through) made a health check
    take 2.6-10 s and added 1 GB.

    A verification that finds every slot taken waits for one, at most ``wait`` seconds, and only
    ``waiting`` of them wait at once (first come, first served); any other is refused at once with
    TooManyAttempts (BUSY, with Retry-After). A thread waiting for a slot is a thread the process's
    other requests do not have: with the excess refused at once, a request queued behind a flood
    reaches a thread within about one verification's time. The same password against the same
    stored hash already waiting for a slot (a client opening several connections at once with the
    right password) waits for that verification's answer instead of for a slot of its own: a right
    password is let in on it; a wrong one is then verified on its own, as every failed login always
    was (one verification for each, which the throttle's accounting assumes).

    Logins that need no verification (API tokens, logins the door remembers or has verified
    recently) never come here."""

    def __init__(self, slots: int | None = None, *, wait: float = CHECK_WAIT, waiting: int | None = None) -> None:
        self.slots = max(1, slots if slots is not None else cores())
        self.wait = wait
        self.waiting = self.slots if waiting is None else max(0, waiting)
        self._free = threading.Semaphore(self.slots)
        self._lock = threading.Lock()
        self._waiters = 0
        self._queued: dict[bytes, _Check] = {}
        self._salt = secrets.token_bytes(16)

    def verify(self, stored: str, password: str, check: Callable[[str, str], bool], *, join: bool = True) -> bool:
        """``check(stored, password)`` in a slot, or the answer of the same verification queued
        already when that says the password is right; TooManyAttempts when no slot comes within
        the wait. (``join=False``: not the latter.)"""
        with self._lock:   # (a free slot goes to those waiting for one first)
            now = not self._waiters and self._free.acquire(blocking=False)
        if now:
            try:
                return check(stored, password)
            finally:
                self._free.release()
        key = hashlib.sha256(self._salt + stored.encode() + b"\0" + password.encode()).digest()
        with self._lock:
            queued = self._queued.get(key)
            if join and queued is not None:
                queued.joined += 1
            else:
                if self._waiters >= self.waiting:
                    raise TooManyAttempts(BUSY, BUSY_RETRY_AFTER)
                self._waiters += 1
                mine = _Check()
                if queued is None:   # the same password arriving now may wait for its answer
                    self._queued[key] = mine
                queued = None
        if queued is not None:
            # That verification ends (an answer or a refusal) within ``wait`` and its own time.
            if not queued.done.wait(self.wait + 60) or queued.busy:
                raise TooManyAttempts(BUSY, BUSY_RETRY_AFTER)
            if queued.result:
                return True
            # A wrong password is verified on its own, as every failed login always was.
            return self.verify(stored, password, check, join=False)
        try:
            try:
                got = self._free.acquire(timeout=self.wait)
            finally:
                with self._lock:
                    self._waiters -= 1
            if not got:
                raise TooManyAttempts(BUSY, BUSY_RETRY_AFTER)
            try:
                mine.result = check(stored, password)
            finally:
                self._free.release()
        except BaseException:
            mine.busy = True   # (those waiting for its answer are refused too, and may try again)
            raise
        finally:
            with self._lock:
                if self._queued.get(key) is mine:
                    del self._queued[key]
            mine.done.set()
        return mine.result

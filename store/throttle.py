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
"""
from __future__ import annotations

import math
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

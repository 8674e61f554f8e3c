"""Failed-login throttling for the door: per account and client address, per account, and per
client address, in this process.

Each key keeps the times of its recent failures in a sliding window. A key with its limit of
failures in the window is refused with ``TooManyAttempts`` before any password is checked, so a
refusal costs a dictionary lookup, not an argon2 verification (~85 ms of CPU). Once a key has
failures, attempts being verified right now count too, so parallel guessers cannot all slip past a
nearly full window at once (the very first wave is bounded by the server's worker threads).

A password login has three keys (``password_keys``):

- ("login", account and address): ``ACCOUNT_LIMIT`` (10). The strict limit a guesser meets. It is
  per address so that failures somewhere else cannot lock the account's owner out: ten wrong
  passwords sent from one address used to refuse the owner's right password, remembered WebDAV
  client and web login from every other address for five minutes, again at every repetition.
- ("account", account): ``ACCOUNT_CEILING`` (50), all addresses together. What bounds a guesser
  with many addresses: at most 50 guesses per account per window in this process, however many
  addresses send them (and 5 addresses at least, each refused after 10). While it is full, password
  logins for the account are refused, except from an address that has logged in to the account
  with the right password within ``KNOWN_FOR`` (``succeeded``): a guesser cannot make its address
  known without the password, so the owner's own addresses (their remembered clients, their next
  login there) stay open, and at a known address only that address's own failures count.
  Known addresses are kept per account, at most ``KNOWN_PER_ACCOUNT`` (16) each, the least
  recently logged in from dropped first: one account's logins from many addresses (an IPv6 /64,
  a remembered login costing nothing) can only push out that account's own. All accounts together
  keep at most ``max_keys`` known addresses, by dropping whole the account least recently logged
  in to: pushing out another account's needs more accounts with their passwords than
  ``max_keys`` / 16, each logged in to more recently than that account, whose own next login puts
  it last again. A login the door remembers renews its address at most once every
  ``KNOWN_REFRESH`` (a minute), so a Basic client's every request changes nothing.
- ("address", address): ``ADDRESS_LIMIT`` (30), all accounts together, tokens too.

Why in the process and not in PostgreSQL: the throttle exists to keep each gateway's CPU for real
requests and to slow guessing to a few tries a minute. A table would cost a write per failed login
(itself a lever for a flood) and a read per login. With N gateways behind a balancer a guesser gets
N times the budget, which still bounds guessing to a handful per minute per account; restarting a
gateway forgets its counts, which an attacker cannot trigger.

The throttle is per account and per address, so a flood of guesses for many accounts from many
addresses passes it; ``PasswordChecks`` bounds what such a flood can cost: at most a few argon2
verifications at once in the process, and a login that cannot have one within a second (longer when
verifications have been taking longer: a loaded machine) is refused (TooManyAttempts), so the rest
of the process (token logins, remembered logins, every other request) is not queued behind it.
"""
from __future__ import annotations

import hashlib
import math
import os
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from store.errors import TooManyAttempts

Key = tuple[str, str]  # (kind, value): ("account", "ada@example.com"), ("address", "10.0.0.7"),
# ("login", "ada@example.com\0" "10.0.0.7"): the account at one address

ACCOUNT_LIMIT = 10      # failed password logins per account from one client address per window
ACCOUNT_CEILING = 50    # failed password logins per account from all addresses together per window
ADDRESS_LIMIT = 30      # failed logins (passwords or tokens) per client address per window
WINDOW = 300.0          # seconds
KNOWN_FOR = 30 * 86400.0  # an address that logged in to an account passes its ceiling this long
KNOWN_PER_ACCOUNT = 16  # addresses known to one account at most (the least recently logged in from go)
KNOWN_REFRESH = 60.0    # seconds: a remembered login renews its address's standing at most this often
MAX_KEYS = 100_000      # memory bound: ~100 bytes a key plus its failure times
CHECK_WAIT = 1.0        # seconds a password login may wait for a verification slot (at least)
MAX_CHECK_WAIT = 10.0   # ... and at most, when verifications have been taking long (a loaded machine)
BUSY_RETRY_AFTER = 2    # seconds a login refused for want of a slot is told to wait
BUSY = ("the server is checking too many passwords just now; try again in a few seconds, or log in with"
        " an API token, which needs no password check")


def password_keys(email: str, client: str | None) -> list[Key]:
    """The keys a password login for ``email`` from ``client`` counts against: the account at that
    address (the strict limit), the account from everywhere (the ceiling) and the address. Without
    an address (a caller that knows none) the account at "no address" is one key, as before."""
    account = email.lower()
    return [("login", f"{account}\0{client or ''}"), ("account", account),
            *([("address", client)] if client else [])]


@dataclass
class _Count:
    failures: deque[float] = field(default_factory=deque)
    pending: int = 0


class LoginThrottle:
    """Counts failed logins per key and refuses keys that reached their limit. An "account" key
    is not refused together with a "login" key (the same account at one address) that ``succeeded``
    within ``known_for``: see the module's docstring."""

    def __init__(self, *, account_limit: int = ACCOUNT_LIMIT, address_limit: int = ADDRESS_LIMIT,
                 account_ceiling: int = ACCOUNT_CEILING, window: float = WINDOW, known_for: float = KNOWN_FOR,
                 max_keys: int = MAX_KEYS, known_per_account: int = KNOWN_PER_ACCOUNT,
                 known_refresh: float = KNOWN_REFRESH, clock: Callable[[], float] = time.monotonic) -> None:
        self.limits = {"login": account_limit, "account": account_ceiling, "address": address_limit}
        self.window, self.known_for, self.max_keys, self.clock = window, known_for, max_keys, clock
        self._counts: dict[Key, _Count] = {}
        self.known_per_account, self.known_refresh = known_per_account, known_refresh
        # account -> address -> until when it passes the account's ceiling; in both, the least
        # recently logged in (to, from) first. ``_known_total``: the addresses, all accounts together.
        self._known: OrderedDict[str, OrderedDict[str, float]] = OrderedDict()
        self._known_total = 0
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
        login remembered by the door, which must still be refused while its keys are full: the
        right password sent by a guesser finds it remembered too)."""
        with self._lock:
            try:
                self._refuse_if_full(keys, self.clock(), pending=False)
            except TooManyAttempts:
                return True
        return False

    def succeeded(self, keys: Sequence[Key]) -> None:
        """The right password was given for these keys: the address is known to the account (it
        passes the account's ceiling) for ``known_for`` from now."""
        logins = _logins(keys)
        if not logins:
            return
        with self._lock:
            now = self.clock()
            for account, address in logins:
                self._know(account, address, now)

    def admit_remembered(self, keys: Sequence[Key]) -> bool:
        """For a login the door remembers (its password was verified in this process): whether it
        may pass now (``would_refuse``'s answer, turned round), and if so its address is known to
        the account again, as ``succeeded`` makes it, though only once ``known_refresh`` has passed
        since that was last done: one lock acquisition, as ``would_refuse`` took, and the tables
        change at most once a minute per account and address, not at every request."""
        logins = _logins(keys)
        with self._lock:
            now = self.clock()
            try:
                self._refuse_if_full(keys, now, pending=False)
            except TooManyAttempts:
                return False
            for account, address in logins:
                until = self._known.get(account, _NONE_KNOWN).get(address)
                if until is None or until - self.known_for + self.known_refresh <= now:
                    self._know(account, address, now)
        return True

    def failed_cheaply(self, keys: Sequence[Key]) -> None:
        """A failure that cost nothing to find (an unknown token): refused with TooManyAttempts if
        a key is already full, else counted."""
        with self._lock:
            now = self.clock()
            self._refuse_if_full(keys, now, pending=False)
            for key in keys:
                self._count(key).failures.append(now)

    def _refuse_if_full(self, keys: Sequence[Key], now: float, *, pending: bool) -> None:
        # An address that logged in to the account is held to its own failures (the "login" key),
        # not to those of every address together.
        known = any(kind == "login" and self._is_known(value, now) for kind, value in keys)
        for kind, value in keys:
            if known and kind == "account":
                continue
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
                if kind == "login":
                    message = (f"too many failed logins for this account from this address; try again in"
                               f" {retry_after} seconds, or log in with an API token instead of the password")
                elif kind == "account":
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

    def _is_known(self, login: str, now: float) -> bool:
        account, _, address = login.partition("\0")
        return self._known.get(account, _NONE_KNOWN).get(address, 0.0) > now

    def _know(self, account: str, address: str, now: float) -> None:
        """``address`` passes ``account``'s ceiling until ``now + known_for``; it and the account
        become the most recently logged in. The account's oldest addresses beyond
        ``known_per_account`` (and its expired ones) go, then, while all accounts together hold more
        than ``max_keys``, the accounts least recently logged in to, whole: never this one."""
        addresses = self._known.get(account)
        if addresses is None:
            addresses = self._known[account] = OrderedDict()
        else:
            self._known.move_to_end(account)
        if addresses.pop(address, None) is None:
            self._known_total += 1
        addresses[address] = now + self.known_for
        # (each account's addresses are in the order they expire in: the oldest first)
        while len(addresses) > 1 and (len(addresses) > self.known_per_account
                                      or next(iter(addresses.values())) <= now):
            addresses.popitem(last=False)
            self._known_total -= 1
        while self._known_total > self.max_keys and len(self._known) > 1:
            _, dropped = self._known.popitem(last=False)
            self._known_total -= len(dropped)


_NONE_KNOWN: dict[str, float] = {}   # (an account with no known address; never written)


def _logins(keys: Sequence[Key]) -> list[tuple[str, str]]:
    """The (account, address) of the "login" keys among ``keys`` that have an address."""
    pairs = [value.partition("\0") for kind, value in keys if kind == "login"]
    return [(account, address) for account, _, address in pairs if address]


def cores() -> int:
    """The number of cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass
class _Check:
    """One verification, running or waiting for a slot, and what the logins of the same password
    learn from it."""
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

    A verification that finds every slot taken waits for one, and only ``waiting`` of them wait at
    once (first come, first served); any other is refused at once with TooManyAttempts (BUSY, with
    Retry-After). A thread waiting for a slot is a thread the process's other requests do not have:
    with the excess refused at once, a request queued behind a flood reaches a thread within about
    one verification's time. It waits at most ``wait`` seconds, or twice as long as verifications
    have lately been taking when that is longer, up to ``MAX_CHECK_WAIT``: with no more waiting
    than there are slots, each waiter has its slot when one verification ends, and on a loaded
    machine where argon2 took 3 s a fixed second refused right passwords only for being slow (the
    number waiting is what protects the process, not how long they wait).

    The same password against the same stored hash already being verified, running in a slot or
    waiting for one (a client opening several connections at once with the right password, a
    browser's and a WebDAV client's first requests), waits for that verification's answer instead
    of for a slot of its own: a right password is let in on it; a wrong one is then verified on its
    own, as every failed login always was (one verification for each, which the throttle's
    accounting assumes). (When only a waiting one could be joined, the logins arriving while the
    first ran waited a second for a slot and, argon2 taking longer on a loaded machine, were refused.)

    Logins that need no verification (API tokens, logins the door remembers or has verified
    recently) never come here."""

    def __init__(self, slots: int | None = None, *, wait: float = CHECK_WAIT, waiting: int | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.slots = max(1, slots if slots is not None else cores())
        self.wait = wait
        self.waiting = self.slots if waiting is None else max(0, waiting)
        self.clock = clock
        self._free = threading.Semaphore(self.slots)
        self._lock = threading.Lock()
        self._waiters = 0
        self._queued: dict[bytes, _Check] = {}    # waiting for a slot
        self._running: dict[bytes, _Check] = {}   # in a slot
        self._took = 0.0   # how long verifications have lately been taking (the slowest, halved at each)
        self._salt = secrets.token_bytes(16)

    def slot_wait(self) -> float:
        """How long a verification may wait for a slot now."""
        return max(self.wait, min(MAX_CHECK_WAIT, 2 * self._took))

    def verify(self, stored: str, password: str, check: Callable[[str, str], bool], *, join: bool = True) -> bool:
        """``check(stored, password)`` in a slot, or the answer of the same verification running or
        queued already when that says the password is right; TooManyAttempts when no slot comes
        within the wait. (``join=False``: not the latter.)"""
        key = hashlib.sha256(self._salt + stored.encode() + b"\0" + password.encode()).digest()
        with self._lock:
            ahead = (self._running.get(key) or self._queued.get(key)) if join else None
            if ahead is not None:
                ahead.joined += 1
            else:
                # (a free slot goes to those waiting for one first)
                now = not self._waiters and self._free.acquire(blocking=False)
                if not now:
                    if self._waiters >= self.waiting:
                        raise TooManyAttempts(BUSY, BUSY_RETRY_AFTER)
                    self._waiters += 1
                mine = _Check()
                # The same password arriving now may wait for its answer (unless one is there).
                (self._running if now else self._queued).setdefault(key, mine)
        if ahead is not None:
            # That verification ends (an answer or a refusal) within its wait and its own time.
            if not ahead.done.wait(MAX_CHECK_WAIT + 60) or ahead.busy:
                raise TooManyAttempts(BUSY, BUSY_RETRY_AFTER)
            if ahead.result:
                return True
            # A wrong password is verified on its own, as every failed login always was.
            return self.verify(stored, password, check, join=False)
        try:
            if not now:
                got = False
                try:
                    got = self._free.acquire(timeout=self.slot_wait())
                finally:
                    with self._lock:
                        self._waiters -= 1
                        if got and self._queued.get(key) is mine:
                            del self._queued[key]
                            self._running.setdefault(key, mine)
                if not got:
                    raise TooManyAttempts(BUSY, BUSY_RETRY_AFTER)
            try:
                started = self.clock()
                mine.result = check(stored, password)
                took = self.clock() - started
                with self._lock:
                    self._took = max(took, self._took / 2)
            finally:
                self._free.release()
        except BaseException:
            mine.busy = True   # (those waiting for its answer are refused too, and may try again)
            raise
        finally:
            with self._lock:
                for table in (self._running, self._queued):
                    if table.get(key) is mine:
                        del table[key]
            mine.done.set()
        return mine.result

"""Who is at the door, and who a change is attributed to.

A ``Principal`` is an authenticated caller: a member user (password or member token) or an
organisation's service token (the orchestrator). An ``Actor`` is what provenance records. Passwords
are argon2id hashes; tokens are 32 random bytes stored as SHA-256 (see sql/001_core.sql for why).
Secrets are compared in constant time and never logged or returned after creation.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import Literal

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from store.db import Conn, Database
from store.errors import NotFound
from store.login_watch import LoginWatch
from store.throttle import Key, LoginThrottle, PasswordChecks, password_keys

ActorType = Literal["user", "agent", "run", "system"]

_hasher = PasswordHasher()
# A hash to verify against when the email is unknown, so that a wrong email and a wrong password
# take the same time.
_DUMMY_HASH = _hasher.hash("not a password")
TOKEN_PREFIX = "hf_"
# The slots every door of this process verifies passwords in (store.throttle.PasswordChecks: as
# many as the cores), so the bound holds for the process however many doors it has.
_CHECKS = PasswordChecks()
# Where front ends leave the authenticated principal in a WSGI environ (for the access log).
PRINCIPAL_KEY = "hostfinder.principal"


@dataclass(frozen=True)
class Actor:
    """Who a change is attributed to: a user, an agent acting outside a run, a run's tool call, or
    the system (the demo seed, migrations)."""

    type: ActorType
    id: int | None
    name: str
    run_id: int | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None


SYSTEM = Actor("system", None, "system")


@dataclass(frozen=True)
class Principal:
    """An authenticated caller. ``org_ids`` are the organisations it may see at all; anything of
    another organisation is answered as not found."""

    kind: Literal["user", "service"]
    user_id: int | None
    name: str
    org_ids: frozenset[int] = field(default_factory=frozenset)
    # The API token this caller logged in with (None for a password): a web session started with
    # a token ends when the token is revoked.
    token_id: int | None = None

    @property
    def actor(self) -> Actor:
        return Actor("user", self.user_id, self.name) if self.kind == "user" else Actor("system", None, self.name)

    def require_org(self, org_id: int, what: str = "organisation") -> None:
        """NotFound unless this caller belongs to ``org_id``: ids of other organisations reveal nothing."""
        if org_id not in self.org_ids:
            raise NotFound(f"unknown {what}")


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def new_token() -> tuple[str, bytes, str]:
    """A fresh token: (the secret shown once, its stored hash, a short display prefix)."""
    secret = TOKEN_PREFIX + secrets.token_urlsafe(32)
    return secret, token_hash(secret), secret[:10]


def token_hash(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


class _VerifiedCache:
    """Recently verified passwords, so that a WebDAV client sending Basic on every request pays
    for one argon2 verification, not one per request. Keys are SHA-256 digests of the credentials
    salted with a per-process secret; nothing reversible is kept.

    An entry is only a hint: it remembers which user and which stored hash the password was
    verified against, and every use re-reads that user's row (one indexed query, as a token
    login costs). A changed password (another hash), a deleted user or a removed membership
    therefore takes effect on the very next request in every gateway process, with no message
    between processes to lose."""

    def __init__(self, ttl: float = 3600.0, size: int = 4096) -> None:
        self.ttl, self.size = ttl, size
        self._salt = secrets.token_bytes(16)
        self._items: dict[bytes, tuple[float, int, str]] = {}
        self._lock = threading.Lock()

    def _key(self, email: str, secret: str) -> bytes:
        return hashlib.sha256(self._salt + email.lower().encode() + b"\0" + secret.encode()).digest()

    def get(self, email: str, secret: str) -> tuple[int, str] | None:
        """(user id, the password hash it was verified against), or None."""
        key = self._key(email, secret)
        with self._lock:
            hit = self._items.get(key)
            if hit and hit[0] > time.monotonic():
                return hit[1], hit[2]
            self._items.pop(key, None)
        return None

    def put(self, email: str, secret: str, user_id: int, password_hash: str) -> None:
        with self._lock:
            if len(self._items) >= self.size:
                self._items.clear()
            self._items[self._key(email, secret)] = (time.monotonic() + self.ttl, user_id, password_hash)

    def drop(self, email: str, secret: str) -> None:
        with self._lock:
            self._items.pop(self._key(email, secret), None)


class _RememberedLogins:
    """Logins verified by a query, reusable without one while the process's LoginWatch
    generation has not moved (store/login_watch.py: any change that can end a login moves it, in
    every process). Keys are salted SHA-256 digests of the credentials, as in _VerifiedCache."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._salt = secrets.token_bytes(16)
        self._items: dict[bytes, tuple[int, Principal]] = {}
        self._lock = threading.Lock()

    def key(self, kind: str, *parts: str) -> bytes:
        return hashlib.sha256(self._salt + kind.encode() + b"\0" + b"\0".join(
            p.encode("utf-8") for p in parts)).digest()

    def get(self, key: bytes, generation: int | None) -> Principal | None:
        if generation is None:
            return None
        with self._lock:
            hit = self._items.get(key)
        return hit[1] if hit is not None and hit[0] == generation else None

    def put(self, key: bytes, generation: int | None, principal: Principal) -> None:
        if generation is None:
            return
        with self._lock:
            if len(self._items) >= self.size:
                self._items.clear()
            self._items[key] = (generation, principal)


# The user and their current memberships in one query: every login reads them afresh.
_USER = ("SELECT u.id, u.email, u.password_hash,"
         " ARRAY(SELECT m.org_id FROM memberships m WHERE m.user_id = u.id) AS org_ids FROM users u")


def _login_user(conn: Conn, email: str) -> dict | None:
    """The user a login's email names: the email apart from case, as Python folds it, which is
    also how the login limit counts an account ("account", email.lower()). PostgreSQL's lower()
    folds more (a dotted capital İ to a plain i), so "mİni@x" found mini@x, and each such
    spelling was an account of its own to the limit: those spellings name nobody."""
    user = conn.execute(_USER + " WHERE lower(u.email) = lower(%s)", (email,)).fetchone()
    return user if user is not None and user["email"].lower() == email.lower() else None


class Door:
    """Checks credentials against the users, memberships and tokens tables, and throttles failed
    logins (store.throttle) before they cost anything.

    ``client`` is the caller's network address (REMOTE_ADDR) where the front end knows it. A
    password login is refused with TooManyAttempts, before the password is checked, while the
    account has too many recent failures from this address, or from all addresses together (its
    ceiling, which an address that logged in to the account with the right password passes), or
    while the address has too many failures for any account (store.throttle.password_keys). So a
    guesser elsewhere cannot lock the owner out of their own addresses: neither a login remembered
    there nor a new one there. A token login is never refused when the token is right (tokens
    cannot be guessed, and so a password guesser cannot lock the real user out of their token), and
    a wrong token counts against its address.

    With a ``watch``, a login verified once (by query, and argon2 for a password) is remembered
    until PostgreSQL announces a change that could end it (sql/060): a remembered login costs no
    query. Without a watch, or while it is down, every login reads the user's current rows.

    Password verifications (argon2) run in one of ``checks``' slots, as many as the machine has
    cores (store.throttle.PasswordChecks): a password login that cannot have one within its wait
    (a second, or twice as long as verifications have lately been taking when that is longer, at
    most 10 s: PasswordChecks.slot_wait) is refused with TooManyAttempts ("the server is checking
    too many passwords just now"). A token, a remembered login and a password verified recently
    need no slot and are never refused so."""

    def __init__(self, db: Database, *, throttle: LoginThrottle | None = None,
                 watch: LoginWatch | None = None, checks: PasswordChecks | None = None) -> None:
        """``watch``: the process's follower of login changes (store/login_watch.py). With it, a
        login verified once is reused without a query until anything that could end it changes;
        without it (or while it is down) every login reads the user's current rows. ``checks``:
        the slots password verifications run in (by default the process's, as many as the cores)."""
        self.db = db
        self.throttle = throttle or LoginThrottle()
        self.checks = checks or _CHECKS
        self.watch = watch
        self._cache = _VerifiedCache()
        self._remembered = _RememberedLogins()

    def _generation(self) -> int | None:
        return self.watch.current() if self.watch is not None else None

    def remembered_basic(self, email: str, secret: str, *, client: str | None = None) -> Principal | None:
        """The principal of a Basic login this process verified and that nothing has ended since,
        at no query and no throttle accounting; None means "ask ``basic``" (unknown, changed,
        wrong, or the account or address is being throttled, which ``basic`` answers)."""
        if not self._remembered.size or self.watch is None:
            return None
        principal = self._remembered.get(self._remembered.key("basic", email.lower(), secret), self._generation())
        if principal is None:
            return None
        if secret.startswith(TOKEN_PREFIX):
            return None if self.throttle.would_refuse(_address_keys(client)) else principal
        # Refused only for failures at this address, or for the account's ceiling from an address
        # that has not logged in to it (the right password a guesser sends is remembered too).
        # Let in, the address is known to the account again (renewed at most once a minute).
        return principal if self.throttle.admit_remembered(password_keys(email, client)) else None

    def basic(self, email: str, secret: str, *, client: str | None = None) -> Principal | None:
        """Email with a password (every organisation of the user) or with one of that user's
        member tokens (the token's organisation)."""
        if not _plausible(email) or not _plausible(secret):
            return None
        address = _address_keys(client)
        key = self._remembered.key("basic", email.lower(), secret)
        generation = self._generation()   # taken before any query: see store/login_watch.py
        if secret.startswith(TOKEN_PREFIX):
            if (known := self._remembered.get(key, generation)) is not None:
                return known
            with self.db.connection() as conn:
                row = self._token_row(conn, secret)
                user = _login_user(conn, email)
                if row and user and row["kind"] == "member" and row["user_id"] == user["id"]:
                    principal = _user_principal(user, token=row)
                    self._remembered.put(key, generation, principal)
                    return principal
            self.throttle.failed_cheaply(address)
            return None
        keys = password_keys(email, client)
        with self.throttle.attempt(keys) as failed:
            principal = self._remembered.get(key, generation)
            if principal is None:
                principal = self._password_login(email, secret)
                if principal is None:
                    failed()
                    return None
                self._remembered.put(key, generation, principal)
        self.throttle.succeeded(keys)   # this address now passes the account's ceiling
        return principal

    def _password_login(self, email: str, password: str) -> Principal | None:
        cached = self._cache.get(email, password)
        with self.db.connection() as conn:
            user = _login_user(conn, email)
        if cached is not None:
            if user and (user["id"], user["password_hash"]) == cached:
                return _user_principal(user)
            self._cache.drop(email, password)  # the password was changed (or the user deleted)
        stored = (user or {}).get("password_hash") or _DUMMY_HASH
        # In a slot (TooManyAttempts when none comes within PasswordChecks.slot_wait: a second,
        # longer when verifications have lately been slow, at most 10 s), for unknown emails too:
        # they cost the same argon2 verification, so that a wrong email and a wrong password
        # take the same time.
        if not (self.checks.verify(stored, password, _verify) and user and user["password_hash"]):
            return None
        self._cache.put(email, password, user["id"], user["password_hash"])
        return _user_principal(user)

    def bearer(self, secret: str, *, client: str | None = None) -> Principal | None:
        """A member token (acts as its user in the token's organisation) or a service token (acts
        for its organisation)."""
        if not _plausible(secret):
            return None
        key = self._remembered.key("bearer", secret)
        generation = self._generation()
        if (known := self._remembered.get(key, generation)) is not None:
            return known
        with self.db.connection() as conn:
            row = self._token_row(conn, secret)
            if row is not None and row["kind"] == "service":
                principal = Principal("service", None, f"service token {row['prefix']}…",
                                      frozenset({row["org_id"]}), token_id=row["id"])
                self._remembered.put(key, generation, principal)
                return principal
            if row is not None:
                user = conn.execute(_USER + " WHERE u.id = %s", (row["user_id"],)).fetchone()
                principal = _user_principal(user, token=row)
                self._remembered.put(key, generation, principal)
                return principal
        self.throttle.failed_cheaply(_address_keys(client))
        return None

    def _token_row(self, conn: Conn, secret: str) -> dict | None:
        digest = token_hash(secret)
        row = conn.execute(
            "SELECT id, org_id, kind, user_id, prefix, token_hash FROM api_tokens"
            " WHERE token_hash = %s AND revoked_at IS NULL", (digest,)).fetchone()
        if row is None or not hmac.compare_digest(bytes(row["token_hash"]), digest):
            return None
        return row

    def principal_for_email(self, email: str) -> Principal | None:
        """The user with this email as a principal, without credentials: for a process the
        operator starts on the store's own machine (`hostfinder mount --user`), where holding the
        database URL already grants everything. None for an unknown email."""
        with self.db.connection() as conn:
            user = _login_user(conn, email)
            return _user_principal(user) if user else None


def _user_principal(user: dict, *, token: dict | None = None) -> Principal:
    """The user as a caller. With a member token, only in the token's organisation: a token is
    created, listed and revoked per organisation (and ends with the membership there), so it
    must not reach the user's other organisations, which could neither see nor revoke it."""
    if token is None:
        return Principal("user", user["id"], user["email"], frozenset(user["org_ids"]))
    return Principal("user", user["id"], user["email"], frozenset(user["org_ids"]) & {token["org_id"]},
                     token_id=token["id"])


def _address_keys(client: str | None) -> list[Key]:
    return [("address", client)] if client else []


def _plausible(text: str) -> bool:
    """Credentials that could exist at all: bounded, no NUL, valid Unicode. Anything else is a
    wrong login (401), not a server error."""
    if not text or len(text) > 1024 or "\0" in text:
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _verify(stored: str, password: str) -> bool:
    try:
        return _hasher.verify(stored, password)
    except (VerificationError, InvalidHashError):
        return False

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

ActorType = Literal["user", "agent", "run", "system"]

_hasher = PasswordHasher()
# A hash to verify against when the email is unknown, so that a wrong email and a wrong password
# take the same time.
_DUMMY_HASH = _hasher.hash("not a password")
TOKEN_PREFIX = "hf_"
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
    """Recently verified Basic credentials, so that a WebDAV client sending Basic on every request
    pays for one argon2 verification a minute, not one per request. Keys are SHA-256 digests of the
    credentials salted with a per-process secret; nothing reversible is kept."""

    def __init__(self, ttl: float = 60.0, size: int = 1024) -> None:
        self.ttl, self.size = ttl, size
        self._salt = secrets.token_bytes(16)
        self._items: dict[bytes, tuple[float, Principal]] = {}
        self._lock = threading.Lock()

    def _key(self, email: str, secret: str) -> bytes:
        return hashlib.sha256(self._salt + email.lower().encode() + b"\0" + secret.encode()).digest()

    def get(self, email: str, secret: str) -> Principal | None:
        key = self._key(email, secret)
        with self._lock:
            hit = self._items.get(key)
            if hit and hit[0] > time.monotonic():
                return hit[1]
            self._items.pop(key, None)
        return None

    def put(self, email: str, secret: str, principal: Principal) -> None:
        with self._lock:
            if len(self._items) >= self.size:
                self._items.clear()
            self._items[self._key(email, secret)] = (time.monotonic() + self.ttl, principal)


class Door:
    """Checks credentials against the users, memberships and tokens tables."""

    def __init__(self, db: Database, *, cache_ttl: float = 60.0) -> None:
        self.db = db
        self._cache = _VerifiedCache(cache_ttl)

    def basic(self, email: str, secret: str) -> Principal | None:
        """Email with a password or with one of that user's member tokens."""
        if not _plausible(email) or not _plausible(secret):
            return None
        cached = self._cache.get(email, secret)
        if cached is not None:
            return cached
        with self.db.connection() as conn:
            user = conn.execute("SELECT id, email, password_hash FROM users WHERE lower(email) = lower(%s)",
                                (email,)).fetchone()
            principal = None
            if secret.startswith(TOKEN_PREFIX):
                row = self._token_row(conn, secret)
                if row and user and row["kind"] == "member" and row["user_id"] == user["id"]:
                    principal = self._user_principal(conn, user)
            else:
                stored = (user or {}).get("password_hash") or _DUMMY_HASH
                if _verify(stored, secret) and user and user["password_hash"]:
                    principal = self._user_principal(conn, user)
        if principal is not None:
            self._cache.put(email, secret, principal)
        return principal

    def bearer(self, secret: str) -> Principal | None:
        """A member token (acts as its user) or a service token (acts for its organisation)."""
        if not _plausible(secret):
            return None
        with self.db.connection() as conn:
            row = self._token_row(conn, secret)
            if row is None:
                return None
            if row["kind"] == "service":
                return Principal("service", None, f"service token {row['prefix']}…", frozenset({row["org_id"]}))
            user = conn.execute("SELECT id, email FROM users WHERE id = %s", (row["user_id"],)).fetchone()
            return self._user_principal(conn, user)

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
            user = conn.execute("SELECT id, email FROM users WHERE lower(email) = lower(%s)", (email,)).fetchone()
            return self._user_principal(conn, user) if user else None

    @staticmethod
    def _user_principal(conn: Conn, user: dict) -> Principal:
        orgs = conn.execute("SELECT org_id FROM memberships WHERE user_id = %s", (user["id"],)).fetchall()
        return Principal("user", user["id"], user["email"], frozenset(r["org_id"] for r in orgs))


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

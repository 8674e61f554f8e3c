"""The web app's login sessions, kept in PostgreSQL so every gateway process shares them.

The cookie carries a random secret; the table holds its SHA-256 (as api_tokens do). Each lookup
joins the user's CURRENT memberships and, for a token login, checks the token is still live: a
removed membership, a revoked token or a logout ends access at once on every process, with no
cache to wait for. Sessions slide: each use (at most once a minute) pushes the expiry to
IDLE_LIMIT from now, never past ABSOLUTE_LIMIT after the login.
"""
from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from store.access import Principal
from store.db import Conn, Database

IDLE_LIMIT = timedelta(hours=12)
ABSOLUTE_LIMIT = timedelta(days=7)
# last_seen_at is written at most this often, so reading a page is not a write every time.
TOUCH_EVERY = timedelta(minutes=1)


@dataclass(frozen=True)
class WebSession:
    """A live session: who, the organisation in view, and the CSRF secret for unsafe requests."""

    id: int
    principal: Principal
    org_id: int
    csrf_token: str
    # (id, name) of every organisation the user belongs to, for the org switcher.
    orgs: tuple[tuple[int, str], ...] = ()


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


def create(db: Database, principal: Principal) -> str:
    """A new session for ``principal`` (just checked by the Door); returns the cookie secret. A
    login with an API token is tied to that token's row (``principal.token_id``), so revoking the
    token ends the session too."""
    secret = secrets.token_urlsafe(32)
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO web_sessions (token_hash, user_id, api_token_id, org_id, csrf_token, expires_at)"
            " VALUES (%s, %s, %s, %s, %s, now() + %s)",
            (_digest(secret), principal.user_id, principal.token_id, min(principal.org_ids, default=None),
             secrets.token_urlsafe(32), IDLE_LIMIT))
        # Expired sessions of anyone go when someone logs in: no sweeper process needed.
        conn.execute("DELETE FROM web_sessions WHERE expires_at < now()")
    return secret


# A session begun with a member token sees the token's organisation only, as the token does
# (store.access._user_principal).
_TOKENS_ORG = ("(s.api_token_id IS NULL OR m.org_id = (SELECT t.org_id FROM api_tokens t"
               " WHERE t.id = s.api_token_id))")


def lookup(db: Database, secret: str | None) -> WebSession | None:
    """The live session for a cookie secret, with the user's current organisations; None when the
    secret is unknown, expired, its token revoked, or the user belongs to no organisation any more."""
    if not secret or len(secret) > 200:
        return None
    with db.connection() as conn:
        row = conn.execute(
            f"""SELECT s.id, s.user_id, s.org_id, s.csrf_token, s.api_token_id, u.email,
                      s.last_seen_at < now() - %s AS stale,
                      ARRAY(SELECT m.org_id FROM memberships m WHERE m.user_id = s.user_id AND {_TOKENS_ORG}
                             ORDER BY m.org_id) AS org_ids,
                      ARRAY(SELECT o.name FROM memberships m JOIN organisations o ON o.id = m.org_id
                             WHERE m.user_id = s.user_id AND {_TOKENS_ORG} ORDER BY m.org_id) AS org_names
                 FROM web_sessions s JOIN users u ON u.id = s.user_id
                WHERE s.token_hash = %s AND s.expires_at > now()
                  AND (s.api_token_id IS NULL OR EXISTS (
                        SELECT 1 FROM api_tokens t WHERE t.id = s.api_token_id AND t.revoked_at IS NULL))""",
            (TOUCH_EVERY, _digest(secret))).fetchone()
        if row is None or not row["org_ids"]:
            return None
        if row["stale"]:
            conn.execute("UPDATE web_sessions SET last_seen_at = now(),"
                         " expires_at = least(now() + %s, created_at + %s) WHERE id = %s",
                         (IDLE_LIMIT, ABSOLUTE_LIMIT, row["id"]))
    org_ids = row["org_ids"]
    org_id = row["org_id"] if row["org_id"] in org_ids else org_ids[0]
    principal = Principal("user", row["user_id"], row["email"], frozenset(org_ids))
    return WebSession(row["id"], principal, org_id, row["csrf_token"], tuple(zip(org_ids, row["org_names"])))


def switch_org(db: Database, session: WebSession, org_id: int) -> None:
    """Show ``org_id`` from now on; NotFound unless the user is a member of it."""
    session.principal.require_org(org_id)
    with db.connection() as conn:
        conn.execute("UPDATE web_sessions SET org_id = %s WHERE id = %s", (org_id, session.id))


def end_for_user(conn: Conn, user_id: int) -> None:
    """Every session of a user ends (their password changed): call inside that change's transaction."""
    conn.execute("DELETE FROM web_sessions WHERE user_id = %s", (user_id,))


def end(db: Database, secret: str | None) -> None:
    """Log out: the row goes, so the cookie is worthless on every process."""
    if secret:
        with db.connection() as conn:
            conn.execute("DELETE FROM web_sessions WHERE token_hash = %s", (_digest(secret),))

"""Path leases: protocol-neutral locks on Host tree paths, shared by every gateway process.

A lease is a token on a path with a depth (0 or infinity), an expiry and the front end's own data
(WebDAV keeps scope, type, owner XML and principal there). Expired leases are invisible and purged
lazily. The Host tree clears a node's leases when the node is deleted or moved away, and refuses
to change a leased path for every caller that holds no token (the FUSE mount, the web app):
WebDAV's own requests are checked by WsgiDAV against the tokens they send.
"""
from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from store.db import Conn, Database, like_escape
from store.errors import Locked

Lease = dict[str, Any]


def _like_prefix(path: str) -> str:
    """Every path below ``path``, as a LIKE pattern."""
    return like_escape(path) + "/%"


def _ancestors(path: str) -> list[str]:
    parts = path.split("/") if path else []
    return ["/".join(parts[:i]) for i in range(len(parts))]


def _row(r: dict) -> Lease:
    return {**r["data"], "token": r["token"], "path": r["path"], "expires_at": r["expires_at"]}


def get(conn: Conn, token: str) -> Lease | None:
    r = conn.execute("SELECT token, path, data, expires_at FROM path_leases WHERE token = %s AND expires_at > now()",
                     (token,)).fetchone()
    return _row(r) if r else None


def create(conn: Conn, token: str, path: str, data: dict[str, Any], expires_at: datetime) -> Lease:
    r = conn.execute("""INSERT INTO path_leases (token, path, data, expires_at) VALUES (%s, %s, %s, %s)
                        RETURNING token, path, data, expires_at""", (token, path, Jsonb(data), expires_at)).fetchone()
    return _row(r)


def refresh(conn: Conn, token: str, expires_at: datetime, data: dict[str, Any] | None = None) -> Lease | None:
    r = conn.execute("""UPDATE path_leases SET expires_at = %s, data = coalesce(%s, data)
                        WHERE token = %s AND expires_at > now() RETURNING token, path, data, expires_at""",
                     (expires_at, Jsonb(data) if data is not None else None, token)).fetchone()
    return _row(r) if r else None


def delete(conn: Conn, token: str) -> bool:
    return conn.execute("DELETE FROM path_leases WHERE token = %s", (token,)).rowcount > 0


def covering(conn: Conn, path: str, *, include_root: bool = True, include_children: bool = False) -> list[Lease]:
    """Live leases on ``path`` (include_root), on its ancestors with depth infinity, and on paths
    below it (include_children), in one query."""
    ancestors = _ancestors(path)
    rows = conn.execute(
        """SELECT token, path, data, expires_at FROM path_leases
           WHERE expires_at > now()
             AND ((%s AND path = %s)
                  OR (path = ANY(%s) AND data->>'depth' = 'infinity')
                  OR (%s AND path LIKE %s))
           ORDER BY created_at""",
        (include_root, path, ancestors, include_children, _like_prefix(path) if path else "%")).fetchall()
    return [_row(r) for r in rows]


# Who holds a lease that covers a path (a lease on it, or on a folder above it with depth
# infinity, as covering() reads them), or NULL: a select-list item a write adds to its own
# statement (store.storage), so that honouring leases costs no round trip of its own.
# Parameters: %(path)s and %(path_ancestors)s (ancestors()).
LEASED_BY_SQL = """(SELECT coalesce(l.data->>'principal', 'another client') FROM path_leases l
                     WHERE l.expires_at > now()
                       AND (l.path = %(path)s
                            OR (l.path = ANY(%(path_ancestors)s::text[]) AND l.data->>'depth' = 'infinity'))
                     LIMIT 1)"""


def ancestors(path: str) -> list[str]:
    """The folders above ``path`` whose depth-infinity leases cover it (LEASED_BY_SQL)."""
    return _ancestors(path)


def locked(path: str, holder: str) -> Locked:
    """The one sentence for a change of a path someone else holds a lease on."""
    return Locked(f"/{path} is locked by a WebDAV client of {holder}, which has it open for editing; "
                  "save your change from that client, or try again once it has closed the file "
                  "(its lock then ends)")


def refuse_if_leased(conn: Conn, path: str) -> None:
    """Raise ``locked`` while a live lease covers ``path``. For callers without lease tokens."""
    held = covering(conn, path)
    if held:
        raise locked(path, held[0].get("principal") or "another client")


def under(conn: Conn, folder: str) -> list[Lease]:
    """Every live lease on the folder, its ancestors or anything below it: what a listing of the
    folder needs, in one query."""
    return covering(conn, folder, include_root=True, include_children=True)


def clear(conn: Conn, path: str) -> int:
    """Drop the leases on ``path`` and below it (the node went away)."""
    return conn.execute("DELETE FROM path_leases WHERE path = %s OR path LIKE %s",
                        (path, _like_prefix(path))).rowcount


def clear_all(conn: Conn) -> int:
    """Drop every lease of the store (WebDAV's lock storage ``clear``)."""
    return conn.execute("DELETE FROM path_leases").rowcount


# The advisory lock key under which leases are granted ("DAVLOCK").
_GRANT_KEY = 0x4441564C4F434B


@contextmanager
def one_grant_at_a_time(db: Database) -> Iterator[None]:
    """Hold the store-wide grant lock: a front end deciding whether a new lease conflicts with the
    live ones reads and writes under it, so two gateway processes cannot both grant conflicting
    leases in the same moment. Held on a connection of its own, for the decision only."""
    with db.connection() as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_GRANT_KEY,))
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_GRANT_KEY,))


def purge(conn: Conn) -> int:
    return conn.execute("DELETE FROM path_leases WHERE expires_at <= now()").rowcount

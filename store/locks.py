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
from datetime import datetime, timezone
from typing import Any

from psycopg.types.json import Jsonb

from store.db import Conn, Database, like_escape
from store.errors import LimitReached, Locked, TooLarge
from store.properties import MAX_VALUE_BYTES

Lease = dict[str, Any]

# A lease's owner (WebDAV's <D:owner> XML, as stored) is capped as a dead property's value is, and
# for the same reason: every lock-aware request reads the live leases with their data, and a
# listing shows each one's owner (lockdiscovery). Uncapped, 40 locks of 1 MB owners made every
# request of every member take a second and a folder's allprop listing 100 MB.
MAX_OWNER_BYTES = MAX_VALUE_BYTES
# Live leases one holder (a login) may hold at once. Clients lock the files they have open: an
# editor one or a few, a sync client a folder at a time; a thousand is far beyond any of them, and
# it bounds what one member can add to the leases every lock-aware request reads (with the owner
# cap: at most about 4 MB per member). Over it, LimitReached, the store's class for a count cap:
# WebDAV answers 507 Insufficient Storage (dav_provider/errors.py; RFC 4918 11.5: the server cannot
# store what the request needs), not 423 or 409, which say this file is locked or in conflict and
# send a client to wait or merge, nor 403, which says this login may never lock it.
MAX_LIVE_PER_HOLDER = 1000


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


def check_owner(owner: str) -> None:
    """Refuse an owner over MAX_OWNER_BYTES, before anything is read or written."""
    size = len(owner.encode("utf-8", "surrogatepass"))
    if size > MAX_OWNER_BYTES:
        raise TooLarge(f"the lock's owner is {size} bytes; a lock's owner is at most {MAX_OWNER_BYTES} bytes. "
                       "Name the owner with something short, such as a name, an email address or a URL. "
                       "No lock was taken")


def check_holder(conn: Conn, holder: str | None) -> None:
    """Refuse a new lease to a holder who already holds MAX_LIVE_PER_HOLDER live ones. Two grants
    for one holder at once are serialised (the count and the insert in one transaction), so they
    cannot both pass the count."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('path_leases'), hashtext(coalesce(%s, '')))", (holder,))
    held = conn.execute("""SELECT count(*) AS n FROM path_leases
                           WHERE expires_at > now() AND data->>'principal' IS NOT DISTINCT FROM %s""",
                        (holder,)).fetchone()["n"]
    if held >= MAX_LIVE_PER_HOLDER:
        who = holder or "a client without a login"
        raise LimitReached(f"{who} already holds {held} live locks, the most one login may hold at once "
                           f"({MAX_LIVE_PER_HOLDER}); unlock files no longer being edited (closing them in "
                           "their editor does, or the locks expire) before locking another. No lock was taken")


def create(conn: Conn, token: str, path: str, data: dict[str, Any], expires_at: datetime) -> Lease:
    """A new lease; ``data['owner']`` is capped (MAX_OWNER_BYTES) and ``data['principal']``, its
    holder, may hold at most MAX_LIVE_PER_HOLDER live leases: both refused before anything is stored."""
    check_owner(str(data.get("owner") or ""))
    check_holder(conn, data.get("principal"))
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


def covering(conn: Conn, path: str, *, include_root: bool = True, include_children: bool = False,
             owners: bool = True) -> list[Lease]:
    """Live leases on ``path`` (include_root), on its ancestors with depth infinity, and on paths
    below it (include_children), in one query. ``owners=False`` leaves each lease's owner out (see
    ``owners``): up to MAX_OWNER_BYTES each, they are most of the leases' bytes, and most requests
    that read the leases only ask which paths they cover."""
    ancestors = _ancestors(path)
    rows = conn.execute(
        f"""SELECT token, path, {'data' if owners else "data - 'owner' AS data"}, expires_at FROM path_leases
           WHERE expires_at > now()
             AND ((%s AND path = %s)
                  OR (path = ANY(%s) AND data->>'depth' = 'infinity')
                  OR (%s AND path LIKE %s))
           ORDER BY created_at""",
        (include_root, path, ancestors, include_children, _like_prefix(path) if path else "%")).fetchall()
    return [_row(r) for r in rows]


# The lease that stops a change of %(path)s by a caller holding no lease token, as JSON (holder,
# root, until), or NULL: WebDAV's rules (RFC 4918 7.4 and 7.5, as WsgiDAV applies them to a
# request without the token) — a lease on the path itself; on a folder above it with depth
# infinity; on its own folder, whatever the depth, when the change adds or removes a member of
# that folder (%(membership)s: a delete or a move; or a write where no file is there yet, a
# create). One SQL expression, so a write adds it to its own statement (store.storage) and
# honouring leases costs that write no round trip; refuse_if_leased() asks it alone.
# covering() spells the first two rules too, for WebDAV's lock storage, which needs every
# covering lease with its data rather than the one that stops a change.
# Parameters: %(path)s and those of lease_params().
LEASE_SQL = """(SELECT jsonb_build_object('holder', coalesce(l.data->>'principal', 'another client'),
                                          'root', l.path, 'until', l.expires_at)
                  FROM path_leases l
                 WHERE l.expires_at > now()
                   AND (l.path = %(path)s
                        OR (l.path = ANY(%(path_ancestors)s::text[]) AND l.data->>'depth' = 'infinity')
                        OR (l.path = %(path_parent)s
                            AND (%(membership)s OR NOT EXISTS (SELECT 1 FROM artifacts x
                                                               WHERE x.display_path = %(path)s
                                                                 AND x.deleted_at IS NULL))))
                 ORDER BY l.path = %(path)s DESC, l.created_at
                 LIMIT 1)"""


def lease_params(path: str, *, membership: bool = False) -> dict[str, Any]:
    """LEASE_SQL's parameters besides %(path)s."""
    ancestors = _ancestors(path)
    return {"path_ancestors": ancestors, "path_parent": ancestors[-1] if ancestors else "",
            "membership": membership}


def locked(path: str, lease: dict[str, Any]) -> Locked:
    """The one sentence for a change of ``path`` that ``lease`` (a LEASE_SQL row) stops."""
    until = datetime.fromisoformat(lease["until"]).astimezone(timezone.utc)
    through = "" if lease["root"] == path else f" (its folder /{lease['root']} is locked)"
    return Locked(f"/{path} is locked{through} by a WebDAV client of {lease['holder']} until "
                  f"{until:%Y-%m-%d %H:%M} UTC: save your change from that client, or try again once it "
                  "unlocks (closing the file does; an administrator can end an abandoned lock with "
                  "'hostfinder admin lock remove')")


def refuse_if_leased(conn: Conn, path: str, *, membership: bool = False) -> None:
    """Raise ``locked`` while a lease stops a change of ``path`` (LEASE_SQL); ``membership``: the
    change adds or removes the file (a delete, a move). For callers holding no lease token."""
    row = conn.execute(f"SELECT {LEASE_SQL} AS lease", {"path": path, **lease_params(path, membership=membership)}
                       ).fetchone()
    if row["lease"] is not None:
        raise locked(path, row["lease"])


def under(conn: Conn, folder: str, *, owners: bool = True) -> list[Lease]:
    """Every live lease on the folder, its ancestors or anything below it: what a listing of the
    folder needs, in one query (``owners``: as ``covering``)."""
    return covering(conn, folder, include_root=True, include_children=True, owners=owners)


def owners(conn: Conn, tokens: list[str]) -> dict[str, str]:
    """{token: owner} of the live leases among ``tokens``: the owners ``covering(owners=False)``
    left out, read when a lock is shown (lockdiscovery)."""
    rows = conn.execute("SELECT token, coalesce(data->>'owner', '') AS owner FROM path_leases WHERE token = ANY(%s)",
                        (tokens,)).fetchall()
    return {r["token"]: r["owner"] for r in rows}


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

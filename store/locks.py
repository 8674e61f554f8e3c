"""Path leases: protocol-neutral locks on Host tree paths, shared by every gateway process.

A lease is a token on a path with a depth (0 or infinity), an expiry and the front end's own data
(WebDAV keeps scope, type, owner XML and principal there). Expired leases are invisible and purged
lazily. The Host tree clears a node's leases when the node is deleted or moved away, and refuses
to change a leased path for every caller that holds no token (the FUSE mount, the web app):
WebDAV's own requests are checked by WsgiDAV against the tokens they send.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from typing import Any

from psycopg.types.json import Jsonb

from store.db import Conn, Database, compact
from store.errors import LimitReached, Locked, TooLarge
from store.paths import ancestors
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


def _below_range(folder: str) -> tuple[str, str]:
    """(low, high): the paths strictly below ``folder`` (not the root "": below it is every other
    path) are those from low (included) to high (excluded) in byte order, the order of
    path_leases_path's text_pattern_ops (~>=~, ~<~). Unlike LIKE with a bound pattern, that range
    stays an index condition in a prepared statement's generic plan."""
    return folder + "/", folder + "0"   # ('0' is the byte after '/')


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
    # (= or IS NULL, not IS NOT DISTINCT FROM, which no index answers: path_leases_holder, sql/152)
    whose = "data->>'principal' IS NULL" if holder is None else "data->>'principal' = %s"
    held = conn.execute(f"SELECT count(*) AS n FROM path_leases WHERE expires_at > now() AND {whose}",
                        () if holder is None else (holder,)).fetchone()["n"]
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


# The live leases near one request (``near``): on given paths (whatever their depth), strictly
# below given folders, on the direct members of given folders. Each part is an index condition:
# on path_leases_path (= ANY, and the range of ``_below_range``, which stays one in a prepared
# statement's generic plan, where LIKE with a bound pattern does not) or on path_leases_folder
# (sql/150: a lease's folder, the path up to its last '/'; a folder's members are not a range of
# paths, its descendants are), so what the query reads is what it returns, however many leases
# lie elsewhere in the store.
_NEAR_ROWS = """
    SELECT l.token, l.path, {data}, l.expires_at, l.created_at FROM path_leases l
     WHERE l.path = ANY(%(paths)s::text[]) AND l.expires_at > now()
    UNION ALL
    SELECT l.token, l.path, {data}, l.expires_at, l.created_at FROM path_leases l
     WHERE left(l.path, -strpos(reverse(l.path), '/')) = ANY(%(children)s::text[]) AND l.path <> ''
       AND l.expires_at > now()"""
# The leases strictly below one folder (one per folder: a join over a list of ranges is planned as a
# scan of the whole table in a generic plan, where a range of parameters stays an index condition).
_BELOW_ROWS = """
    UNION ALL
    SELECT l.token, l.path, {data}, l.expires_at, l.created_at FROM path_leases l
     WHERE l.path ~>=~ %(low{i})s AND l.path ~<~ %(high{i})s AND l.expires_at > now()"""
_ALL_ROWS = """
    SELECT l.token, l.path, {data}, l.expires_at, l.created_at FROM path_leases l WHERE l.expires_at > now()"""
# One row (token NULL) when a live lease lies on the folder %(scope)s, above it or below it.
_SCOPE_PROBE = """
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL
     WHERE EXISTS (SELECT 1 FROM path_leases s WHERE s.path = ANY(%(scope_paths)s::text[]) AND s.expires_at > now())
        OR EXISTS (SELECT 1 FROM path_leases s WHERE s.path ~>=~ %(scope_low)s AND s.path ~<~ %(scope_high)s
                                                 AND s.expires_at > now())"""
# One row (token NULL) when a live lease lies anywhere.
_ANY_PROBE = """
    UNION ALL
    SELECT NULL, NULL, NULL, NULL, NULL WHERE EXISTS (SELECT 1 FROM path_leases s WHERE s.expires_at > now())"""


@functools.cache
def _near_statement(whole: bool, folders: int, probe: str, owners: bool) -> str:
    """``near``'s statement: every lease (``whole``), or those of its paths, of its ``folders``
    folders' descendants and of its folders' members."""
    data = "l.data" if owners else "l.data - 'owner' AS data"
    rows = _ALL_ROWS.format(data=data) if whole else _NEAR_ROWS.format(data=data) + "".join(
        _BELOW_ROWS.format(data=data, i=i) for i in range(folders))
    return compact(rows + {"": "", "scope": _SCOPE_PROBE, "any": _ANY_PROBE}[probe])


def _within(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder``, a folder above it or a path below it."""
    return folder == "" or path == "" or path == folder or path.startswith(folder + "/") \
        or folder.startswith(path + "/")


def near(conn: Conn, *, paths: Iterable[str] = (), below: Iterable[str] = (), children: Iterable[str] = (),
         scope: str | None = None, owners: bool = True) -> tuple[list[Lease], bool | None]:
    """The live leases on ``paths`` (any depth), strictly below each folder of ``below`` ("": the
    root, every lease) and on the direct members of each folder of ``children``, in one indexed
    query, each lease once, in the order they were granted. ``owners=False`` leaves each lease's
    owner out: up to MAX_OWNER_BYTES each, they are most of the leases' bytes, and most requests
    that read the leases only ask which paths they cover (``owners`` reads them when shown). With
    ``scope`` (a folder; "": the root): also whether any live lease lies on it, on a folder above
    it or below it (else None), so a caller may remember that nothing there is locked. Only what is
    asked is read: the leases elsewhere, however many, cost this query nothing."""
    paths, below, children = list(dict.fromkeys(paths)), list(dict.fromkeys(below)), list(dict.fromkeys(children))
    whole = "" in below
    probe = "" if scope is None or whole else "any" if scope == "" else "scope"
    params: dict[str, Any] = {}
    if not whole:
        params.update(paths=paths, children=children)
        for i, folder in enumerate(below):
            params[f"low{i}"], params[f"high{i}"] = _below_range(folder)
    if probe == "scope":
        scope_low, scope_high = _below_range(scope)  # type: ignore[arg-type]
        params.update(scope_paths=[*ancestors(scope), scope], scope_low=scope_low, scope_high=scope_high)  # type: ignore[arg-type]
    found: dict[str, dict] = {}
    probed = False
    for r in conn.execute(_near_statement(whole, 0 if whole else len(below), probe, owners), params).fetchall():
        if r["token"] is None:
            probed = True
        else:
            found.setdefault(r["token"], r)
    rows = sorted(found.values(), key=lambda r: r["created_at"])
    if whole and scope is not None:
        probed = any(_within(r["path"], scope) for r in rows)
    return [_row(r) for r in rows], (None if scope is None else probed)


# The lease that stops a change of %(path)s by a caller holding no lease token, as JSON (holder,
# root, until), or NULL: WebDAV's rules (RFC 4918 7.4 and 7.5, as WsgiDAV applies them to a
# request without the token) — a lease on the path itself; on a folder above it with depth
# infinity; on its own folder, whatever the depth, when the change adds or removes a member of
# that folder (%(membership)s: a delete or a move; or a write where no file is there yet, a
# create). One SQL expression, so a write adds it to its own statement (store.storage) and
# honouring leases costs that write no round trip; refuse_if_leased() asks it alone.
# WebDAV's lock storage reads the leases near a request with their data instead (``near``), and
# WsgiDAV applies these rules to them.
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
    above = ancestors(path)
    return {"path_ancestors": above, "path_parent": above[-1] if above else "",
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


def under(conn: Conn, folder: str) -> list[Lease]:
    """Every live lease on ``folder``, below it, or on a folder above it with depth infinity (every
    lease for ""): the locks that stop a change there, as `hostfinder admin lock list` shows them."""
    above = ancestors(folder)
    leases, _ = near(conn, paths=[*above, folder] if folder else [], below=[folder])
    return [lease for lease in leases if lease["path"] not in above or lease.get("depth") == "infinity"]


def owners(conn: Conn, tokens: list[str]) -> dict[str, str]:
    """{token: owner} of the live leases among ``tokens``: the owners ``near(owners=False)`` left
    out, read when a lock is shown (lockdiscovery)."""
    rows = conn.execute("SELECT token, coalesce(data->>'owner', '') AS owner FROM path_leases WHERE token = ANY(%s)",
                        (tokens,)).fetchall()
    return {r["token"]: r["owner"] for r in rows}


def clear(conn: Conn, path: str) -> int:
    """Drop the leases on ``path`` and below it (the node went away)."""
    return conn.execute("DELETE FROM path_leases WHERE path = %s OR (path ~>=~ %s AND path ~<~ %s)",
                        (path, *_below_range(path))).rowcount


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

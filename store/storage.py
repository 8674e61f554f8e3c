"""The storage every artifact family shares: the artifacts table's rows under the owner cap.

Notes, scripts and memory are rows of one table with one life: created under the per-owner cap
(one statement: the owner's counter row, sql/011, and the insert), updated to a new version under
the row lock (optionally only at an expected version), soft-deleted, and relocated (a rename that
keeps the row). The family modules (store.notes, store.scripts, store.memory) add their rules on
top; every function here takes the caller's connection, inside its transaction.

One cap for every write: MAX_CONTENT_BYTES, and one sentence for it (``too_large``).
"""
from __future__ import annotations

import functools
import re
from typing import Any

from store import locks, scratch
from store.access import Actor
from store.db import Conn, compact, on_constraint
from store.errors import AlreadyExists, Invalid, LimitReached, NotFound, PreconditionFailed, TooLarge
from store.paths import owner_prefix
from store.provenance import actor_params, announce, change_cte, notify_change, record_change

MAX_CONTENT_BYTES = 262_144  # 256 KB of UTF-8 per write
OWNER_CAP = 10_000           # live artifacts per owner, records excepted

NOTE_COLUMNS = ("id, org_id, display_path, level, key, version, created_at, updated_at, "
                "created_by, updated_by")

on_constraint("artifacts_guild_id_org_id_fkey",
              lambda d: NotFound("unknown guild: no guild of that organisation has that id"))
on_constraint("artifacts_agent_id_org_id_fkey",
              lambda d: NotFound("unknown agent: no agent of that organisation has that id"))
on_constraint("artifacts_org_id_fkey", lambda d: NotFound("unknown organisation"))


def _path_taken(diag: Any) -> AlreadyExists:
    # Reached when a move or rename lands on a path that another transaction created after the
    # move looked (the creates themselves use ON CONFLICT and never get here).
    m = re.search(r"\(display_path\)=\((.*)\) already exists", diag.message_detail or "")
    what = m.group(1) if m else "the destination"
    return AlreadyExists(f"{what} was created by another change at the same moment; read the folder again, "
                         "then retry with overwriting allowed or choose another name")


on_constraint("artifacts_live_path", _path_taken)


# ---------------------------------------------------------------------------------------------
# Shared rules


def locked_version(conn: Conn, path: str) -> int | None:
    """The version of the live artifact at ``path`` (None: none), its row locked until the
    transaction ends, so a condition checked against it holds for the write that follows."""
    row = conn.execute("SELECT version FROM artifacts WHERE display_path = %s AND deleted_at IS NULL FOR UPDATE",
                       (path,)).fetchone()
    return row["version"] if row else None


def lock_live(conn: Conn, paths: list[str]) -> None:
    """Lock the live artifacts at ``paths`` until the transaction ends, all at once and in one
    order (their ids), before the caller reads any of them: what it reads then includes every
    write committed before it, and two transactions that each need the other's rows (a move of A
    over B and one of B over A) queue instead of deadlocking."""
    conn.execute("SELECT 1 FROM artifacts WHERE display_path = ANY(%s) AND deleted_at IS NULL ORDER BY id FOR UPDATE",
                 (paths,))


def refuse_new_name(conn: Conn, path: str, problem: str | None) -> None:
    """Invalid with ``problem`` (store.paths.new_note_problem, side_name_problem) when there is
    one and no live artifact holds ``path`` yet: such a name may not be given to a new note or
    script, while one written before the rule may still be saved. The query runs only then."""
    if problem is not None and conn.execute("SELECT 1 FROM artifacts WHERE display_path = %s"
                                            " AND deleted_at IS NULL", (path,)).fetchone() is None:
        raise Invalid(problem, [problem])


def check_content(content: object, what: str = "content") -> str:
    """``content`` if it can be stored: text, no NUL, valid Unicode, at most 262 144 bytes."""
    if not isinstance(content, str):
        msg = f"{what} must be text (a JSON string)"
        raise Invalid(msg, [msg])
    if "\x00" in content:
        msg = f"{what} contains a NUL character (\\u0000), which text cannot hold; remove it"
        raise Invalid(msg, [msg])
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError:
        msg = f"{what} is not valid Unicode (it holds a lone surrogate); send UTF-8 text"
        raise Invalid(msg, [msg]) from None
    if size > MAX_CONTENT_BYTES:
        raise too_large(what, size)
    return content


def too_large(what: str, size: int) -> TooLarge:
    """The one sentence for a write over the cap, whichever way it arrived (a tool, a file)."""
    return TooLarge(f"{what} is {size:,} bytes; a write holds at most {MAX_CONTENT_BYTES:,} bytes "
                    "(256 KB) of UTF-8: split it into several smaller files")


def owner_columns(level: str, owner_id: int | None) -> tuple[int | None, int | None]:
    """(guild_id, agent_id) for an owner."""
    if level == "agent":
        return None, owner_id
    if level == "guild":
        return owner_id, None
    return None, None


def owner_where(level: str) -> str:
    """The WHERE fragment naming one owner's rows (parameters %(guild_id)s, %(agent_id)s), after
    ``org_id = %(org_id)s``. Every column of the artifacts_live_owner index prefix is fixed, so a
    listing reads that owner's index range and nothing of the organisation's other owners (a
    ``guild_id IS NOT DISTINCT FROM`` is not indexable and read every guild's notes)."""
    return {"agent": "level = 'agent' AND guild_id IS NULL AND agent_id = %(agent_id)s",
            "guild": "level = 'guild' AND guild_id = %(guild_id)s AND agent_id IS NULL",
            "org": "level = 'org' AND guild_id IS NULL AND agent_id IS NULL"}[level]


def owner_key(level: str, owner_id: int | None) -> int:
    """The owner's id in owner_counts: the guild or agent id, 0 for the organisation."""
    return 0 if level == "org" else int(owner_id or 0)


# The owner's counter row (sql/011_owner_counts.sql), locked: creates and moves into one owner queue
# here, and a transaction that waited reads the count its predecessor left.
_LOCK_OWNER_COUNT = """SELECT live FROM owner_counts
                        WHERE org_id = %(org_id)s AND level = %(level)s AND owner_id = %(owner)s FOR UPDATE"""

_INSERT_UNDER_CAP = f"""
    WITH n AS ({_LOCK_OWNER_COUNT}),
         ins AS (
           INSERT INTO artifacts (org_id, kind, level, guild_id, agent_id, key, display_path,
                                  content, content_json, created_by, updated_by, created_at, updated_at)
           SELECT %(org_id)s, %(kind)s, %(level)s, %(guild_id)s, %(agent_id)s, %(key)s,
                  %(path)s, %(content)s, %(json)s::jsonb, %(by)s, %(by)s, t.at, t.at
             FROM (SELECT clock_timestamp() AS at) AS t
            WHERE coalesce((SELECT live FROM n), 0) < %(cap)s
           ON CONFLICT (display_path) WHERE deleted_at IS NULL DO NOTHING
           RETURNING {{columns}})
    SELECT coalesce((SELECT live FROM n), 0) AS owner_count, ins.* FROM (VALUES (1)) AS v LEFT JOIN ins ON true"""


def limit_reached(display_path: str, count: int, *, org_id: int, level: str, owner_id: int | None) -> LimitReached:
    # The cap counts the owner's notes, scripts and memory together, so the sentence names the
    # owner's folder (org/1/agents/3/), not the file's (org/1/agents/3/scripts/ holds only scripts).
    where = owner_prefix(org_id, level, owner_id)  # type: ignore[arg-type]
    return LimitReached(f"cannot create {display_path}: {where} already holds {count:,} live files, "
                        f"the limit is {OWNER_CAP:,} per owner; delete files that are no longer needed, "
                        "or write into an existing one")


def insert_artifact(conn: Conn, *, kind: str, org_id: int, level: str, owner_id: int | None, key: str,
                    display_path: str, content: str, actor: Actor,
                    content_json: str | None = None, columns: str = NOTE_COLUMNS) -> dict | None:
    """Create a live artifact under the per-owner cap, or None if a live row took the path first.

    One statement whatever the owner holds: it locks the owner's counter row and inserts only
    below the cap; the trigger of sql/011_owner_counts.sql adds the new row to the count in the
    same transaction. Without a counter row the owner holds nothing yet (the first insert makes
    it), so there is nothing to race for until the cap is near."""
    guild_id, agent_id = owner_columns(level, owner_id)
    row = conn.execute(
        _INSERT_UNDER_CAP.format(columns=columns),
        {"org_id": org_id, "kind": kind, "level": level, "guild_id": guild_id, "agent_id": agent_id,
         "owner": owner_key(level, owner_id), "key": key, "path": display_path, "content": content,
         "json": content_json, "by": actor.name, "cap": OWNER_CAP}).fetchone()
    if row["id"] is None and row["owner_count"] >= OWNER_CAP:
        raise limit_reached(display_path, row["owner_count"], org_id=org_id, level=level, owner_id=owner_id)
    if row["id"] is None:
        return None
    row.pop("owner_count")
    return row


class Hidden(Exception):
    """A write with ``hidden_for`` found the path hidden from that user by a rename-away save
    (store.scratch) and wrote nothing: the Host tree writes it as the hidden file's next version.
    Control flow between this module and store.host, never seen by a front end."""


@functools.lru_cache(maxsize=None)
def _update_sql(kind: str, *, guarded: bool = False) -> str:
    """Update the live ``kind`` row at the path, or, when there is none, create it under the
    owner's cap: one statement (one round trip) for a create as for an update. The owner's counter
    row is locked only when there is nothing to update, so writes to existing files of one folder
    do not queue on it. The written row's provenance row and change event are part of the same
    statement (store.provenance.change_cte), so an overwrite is one round trip in all. Columns:
    current_version (None: nothing there), owner_count, created, change_id, hidden, and the
    written row (id None: nothing written). ``guarded`` (the Host tree's and the web app's
    writes): nothing is written while the path is hidden from user %(hidden_for)s (hidden is then
    true), nor while %(honour_leases)s and a lease stops the change (store.locks.LEASE_SQL; lease
    then describes it). The raised version is what makes a note's search vector stale, and what
    queues the note for the indexer (a trigger, sql/156)."""
    hidden = scratch.hidden_sql("%(hidden_for)s", "%(path)s") if guarded else "false"
    lease = f"CASE WHEN %(honour_leases)s THEN {locks.LEASE_SQL} END" if guarded else "NULL::jsonb"
    return compact(f"""
        WITH h AS (SELECT g.*, g.hidden OR g.lease IS NOT NULL AS hold
                     FROM (SELECT {hidden} AS hidden, {lease} AS lease) AS g),
             cur AS (SELECT id, version FROM artifacts
                      WHERE display_path = %(path)s AND deleted_at IS NULL AND kind = '{kind}'
                        AND NOT (SELECT hold FROM h)
                      FOR UPDATE),
             upd AS (UPDATE artifacts a
                        SET content = %(content)s, version = a.version + 1,
                            updated_at = clock_timestamp(), updated_by = %(by)s
                       FROM cur
                      WHERE a.id = cur.id AND %(may_update)s
                        AND (%(if_version)s::int IS NULL OR cur.version = %(if_version)s::int)
                      RETURNING {', '.join('a.' + c.strip() for c in NOTE_COLUMNS.split(','))}),
             n AS (SELECT live FROM owner_counts
                    WHERE org_id = %(org_id)s AND level = %(level)s AND owner_id = %(owner)s
                      AND %(may_create)s AND NOT EXISTS (SELECT 1 FROM cur) AND NOT (SELECT hold FROM h)
                      FOR UPDATE),
             ins AS (INSERT INTO artifacts (org_id, kind, level, guild_id, agent_id, key, display_path,
                                            content, created_by, updated_by, created_at, updated_at)
                     SELECT %(org_id)s, '{kind}', %(level)s, %(guild_id)s, %(agent_id)s, %(key)s,
                            %(path)s, %(content)s, %(by)s, %(by)s, t.at, t.at
                       FROM (SELECT clock_timestamp() AS at) AS t
                      WHERE %(may_create)s AND NOT EXISTS (SELECT 1 FROM cur) AND NOT (SELECT hold FROM h)
                        AND coalesce((SELECT live FROM n), 0) < %(cap)s
                     ON CONFLICT (display_path) WHERE deleted_at IS NULL DO NOTHING
                     RETURNING {NOTE_COLUMNS}),
             w AS (SELECT false AS created, * FROM upd UNION ALL SELECT true, * FROM ins),
             change AS ({change_cte("(SELECT org_id, display_path, CASE WHEN created THEN 'create' ELSE 'update' END"
                                    " AS operation, version FROM w) AS written")})
        SELECT (SELECT version FROM cur) AS current_version, (SELECT hidden FROM h) AS hidden,
               (SELECT lease FROM h) AS lease,
               coalesce((SELECT live FROM n), 0) AS owner_count, (SELECT id FROM change) AS change_id,
               {notify_change("change")} AS notified, w.*
          FROM (VALUES (1)) AS v LEFT JOIN w ON true""")


def save_artifact(conn: Conn, *, kind: str, org_id: int, level: str, owner_id: int | None, key: str,
                  display_path: str, content: str, actor: Actor, if_version: int | None = None,
                  create_only: bool = False, hidden_for: int | None = None,
                  honour_leases: bool = False) -> tuple[dict, bool]:
    """Create or update one artifact with its provenance row and event: (row, created).
    Concurrent writers of one path each get their own version (the row lock orders them); a
    create that loses a race becomes an update.

    ``if_version`` is checked in the locked UPDATE, so of two writers holding the same version
    one wins and the other gets PreconditionFailed. ``if_version=0`` means "it does not exist
    yet": a create only, and a create that loses the race is PreconditionFailed, not an update.
    Each attempt is one statement (_update_sql); a second runs only after losing a create race.
    ``hidden_for`` (a user id): raise Hidden, writing nothing, while that user's rename-away save
    hides the path. ``honour_leases`` (a caller holding no lease tokens: the FUSE mount, the web
    app): raise Locked, writing nothing, while a WebDAV client's lease stops the change."""
    guarded = hidden_for is not None or honour_leases
    sql = _update_sql(kind, guarded=guarded)
    guild_id, agent_id = owner_columns(level, owner_id)
    params = {"hidden_for": hidden_for, "path": display_path, "content": content, "by": actor.name, "may_update": not create_only,
              "if_version": if_version, "may_create": not if_version, "org_id": org_id, "level": level,
              "owner": owner_key(level, owner_id), "guild_id": guild_id, "agent_id": agent_id, "key": key,
              "cap": OWNER_CAP, "honour_leases": honour_leases,
              **(locks.lease_params(display_path) if guarded else {}), **actor_params(actor)}
    for _ in range(2):
        row = conn.execute(sql, params).fetchone()
        current, count, created = row.pop("current_version"), row.pop("owner_count"), row.pop("created")
        change_id = row.pop("change_id")
        row.pop("notified")
        lease = row.pop("lease")
        if lease is not None:
            raise locks.locked(display_path, lease)
        if row.pop("hidden"):
            raise Hidden(display_path)
        if row["id"] is not None:
            announce(org_id=org_id, display_path=display_path, operation="create" if created else "update",
                     version=row["version"], change_id=change_id)
            return row, bool(created)
        if current is not None:
            if create_only:
                raise AlreadyExists(f"{display_path} already exists (version {current}); "
                                    "write without create-only to replace it, or choose another name")
            if if_version == 0:
                raise PreconditionFailed(f"{display_path} already exists (version {current}), and this write "
                                         "expected no file there; read it first and apply your change to it")
            raise PreconditionFailed(f"{display_path} is at version {current}, not {if_version}: "
                                     "it changed since it was read; read it again and reapply the change")
        if if_version:
            raise PreconditionFailed(f"{display_path} does not exist, so version {if_version} cannot match; "
                                     "write without a version to create it")
        if count >= OWNER_CAP:
            raise limit_reached(display_path, count, org_id=org_id, level=level, owner_id=owner_id)
        # Nothing was there, and a concurrent create took the path first: update it instead.
    raise PreconditionFailed(f"{display_path} changed while it was being written; try again")


def soft_delete_artifact(conn: Conn, *, org_id: int, path: str, kind: str, actor: Actor) -> int | None:
    """Soft-delete the live artifact of ``kind`` at ``path`` with its provenance row; its last
    version, or None when there is none. Shared by notes and scripts."""
    row = conn.execute("UPDATE artifacts SET deleted_at = clock_timestamp(), updated_by = %s"
                       " WHERE display_path = %s AND deleted_at IS NULL AND kind = %s RETURNING version",
                       (actor.name, path, kind)).fetchone()
    if row is None:
        return None
    record_change(conn, org_id=org_id, display_path=path, operation="delete", version=row["version"], actor=actor)
    return row["version"]


def retire(conn: Conn, row_id: int, actor: Actor) -> None:
    """Soft-delete a replaced artifact (no-op when the caller already did)."""
    conn.execute("UPDATE artifacts SET deleted_at = clock_timestamp(), updated_by = %s"
                 " WHERE id = %s AND deleted_at IS NULL", (actor.name, row_id))


def relocate_artifact(conn: Conn, row_id: int, *, org_id: int, src: str, dst: str, key: str,
                      replaced_id: int | None, actor: Actor, level: str | None = None,
                      guild_id: int | None = None, agent_id: int | None = None) -> dict:
    """Give the (locked) artifact ``row_id`` the path ``dst``: it keeps its row, so its identity and
    history, and its version goes up by one. ``replaced_id`` is a live artifact at ``dst`` that the
    caller has decided to replace; ``level`` and the owner ids move a note between levels.
    Provenance: 'move' on the old path, 'create' or 'update' on the new one, naming the old."""
    if replaced_id is not None:
        retire(conn, replaced_id, actor)
    row = conn.execute(
        f"""UPDATE artifacts SET key = %s, display_path = %s, level = coalesce(%s, level),
                   guild_id = CASE WHEN %s::text IS NULL THEN guild_id ELSE %s END,
                   agent_id = CASE WHEN %s::text IS NULL THEN agent_id ELSE %s END,
                   version = version + 1, updated_at = clock_timestamp(), updated_by = %s
             WHERE id = %s RETURNING {NOTE_COLUMNS}""",
        (key, dst, level, level, guild_id, level, agent_id, actor.name, row_id)).fetchone()
    record_change(conn, org_id=org_id, display_path=src, operation="move", version=row["version"], actor=actor)
    record_change(conn, org_id=org_id, display_path=dst, operation="update" if replaced_id else "create",
                  version=row["version"], actor=actor, moved_from=src)
    return row

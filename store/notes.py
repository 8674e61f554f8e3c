"""Notes: every rule of a note's life, for the agent tools and the Host tree alike.

The Host tree (WebDAV, FUSE) performs operator edits through the functions below, and the agent
tools (bottom of the module) add the agent's grants on top, so a rule lives here once. Each
function takes a connection inside the caller's transaction and an explicit ``Actor``; it writes
the file_changes row and the NOTIFY (store.provenance.record_change) in that transaction.

``level`` is "agent", "guild" or "org"; ``owner_id`` is the agent id, the guild id, or None.

    get_note(conn, org_id, level, owner_id, key) -> dict | None
        the live note: id, display_path, level, key, content, version, created_at, updated_at,
        created_by, updated_by. One query.
    list_notes(conn, org_id, level, owner_id) -> list[dict]
        one owner's live notes in key order, without content; ``size`` is octet_length(content).
    list_org_notes(conn, org_id) -> list[dict]
        every live note of the organisation, every level and owner, in one query (the notes
        browser's scopes side by side): as list_notes, plus guild_id and agent_id.
    write_note(conn, org_id, level, owner_id, key, content, actor, *, if_version=None,
               create_only=False) -> dict
        create (version 1) or update (version + 1). Checks the key (one .md name, no '/'), the
        reserved agent-root keys (task.md, memory.md), 256 KB (262 144 bytes of UTF-8), and 10 000
        live artifacts per owner. if_version that no longer holds -> PreconditionFailed;
        create_only on an existing note -> AlreadyExists. Returns the note without content.
    delete_note(conn, org_id, level, owner_id, key, actor) -> dict
        soft delete; refused with Embedded (naming every embedding task) while a live task embeds it.
    move_note(conn, src, dst, actor, *, replace) -> dict
        src and dst are (org_id, level, owner_id, key). The row keeps its id and its version goes
        up by one; the embed rule applies to the source (and to a replaced destination).
        Provenance: 'move' on the old path, 'create' (or 'update' when it replaced a note) on the
        new one.

Shared with store.memory and store.scripts: ``check_content`` (the size cap and text rules),
``insert_artifact`` (the create path with the per-owner cap) and ``OWNER_CAP``.
"""
from __future__ import annotations

import functools
import re
from datetime import datetime
from typing import Any, NamedTuple

from store import embeds, note_search
from store.access import Actor
from store.agents import Agent, AgentCall
from store.db import Conn, Database, on_constraint
from store.errors import (AlreadyExists, Embedded, Forbidden, Invalid, LimitReached, NotFound,
                          PreconditionFailed, TooLarge)
from store.paths import LEVELS, RESERVED_AGENT_KEYS, Level, Target, check_note_key, key_problem, nfc, note_path, parse
from store.provenance import record_change
from store.tools import Arg, tool

MAX_CONTENT_BYTES = 262_144  # 256 KB of UTF-8 per write
OWNER_CAP = 10_000           # live artifacts per owner, records excepted



class NoteRef(NamedTuple):
    """One note's place: (org_id, level, owner_id, key); a plain 4-tuple works where one is asked."""
    org_id: int
    level: Level
    owner_id: int | None
    key: str

    @property
    def path(self) -> str:
        return note_path(self.org_id, self.level, self.owner_id, self.key)


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


def level_problem(level: object) -> str | None:
    if level in LEVELS:
        return None
    return f"level {level!r} is not one of agent, guild, org"


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


def _owner_key(level: str, owner_id: int | None) -> int:
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
                  %(path)s, %(content)s, %(json)s::jsonb, %(by)s, %(by)s, clock_timestamp(), clock_timestamp()
            WHERE coalesce((SELECT live FROM n), 0) < %(cap)s
           ON CONFLICT (display_path) WHERE deleted_at IS NULL DO NOTHING
           RETURNING {{columns}})
    SELECT coalesce((SELECT live FROM n), 0) AS owner_count, ins.* FROM (VALUES (1)) AS v LEFT JOIN ins ON true"""


def _limit_reached(display_path: str, count: int) -> LimitReached:
    where = display_path.rsplit("/", 1)[0] + "/"
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
         "owner": _owner_key(level, owner_id), "key": key, "path": display_path, "content": content,
         "json": content_json, "by": actor.name, "cap": OWNER_CAP}).fetchone()
    if row["id"] is None and row["owner_count"] >= OWNER_CAP:
        raise _limit_reached(display_path, row["owner_count"])
    if row["id"] is None:
        return None
    row.pop("owner_count")
    return row


@functools.lru_cache(maxsize=None)
def _update_sql(kind: str, set_extra: str = "") -> str:
    """Update the live ``kind`` row at the path, or, when there is none, create it under the
    owner's cap: one statement (one round trip) for a create as for an update. The owner's counter
    row is locked only when there is nothing to update, so writes to existing files of one folder
    do not queue on it. Columns: current_version (None: nothing there), owner_count, created, and
    the written row (id None: nothing written)."""
    return f"""
        WITH cur AS (SELECT id, version FROM artifacts
                      WHERE display_path = %(path)s AND deleted_at IS NULL AND kind = '{kind}'
                      FOR UPDATE),
             upd AS (UPDATE artifacts a
                        SET content = %(content)s, version = a.version + 1,
                            updated_at = clock_timestamp(), updated_by = %(by)s {set_extra}
                       FROM cur
                      WHERE a.id = cur.id AND %(may_update)s
                        AND (%(if_version)s::int IS NULL OR cur.version = %(if_version)s::int)
                      RETURNING {', '.join('a.' + c.strip() for c in NOTE_COLUMNS.split(','))}),
             n AS (SELECT live FROM owner_counts
                    WHERE org_id = %(org_id)s AND level = %(level)s AND owner_id = %(owner)s
                      AND %(may_create)s AND NOT EXISTS (SELECT 1 FROM cur)
                      FOR UPDATE),
             ins AS (INSERT INTO artifacts (org_id, kind, level, guild_id, agent_id, key, display_path,
                                            content, created_by, updated_by, created_at, updated_at)
                     SELECT %(org_id)s, '{kind}', %(level)s, %(guild_id)s, %(agent_id)s, %(key)s,
                            %(path)s, %(content)s, %(by)s, %(by)s, clock_timestamp(), clock_timestamp()
                      WHERE %(may_create)s AND NOT EXISTS (SELECT 1 FROM cur)
                        AND coalesce((SELECT live FROM n), 0) < %(cap)s
                     ON CONFLICT (display_path) WHERE deleted_at IS NULL DO NOTHING
                     RETURNING {NOTE_COLUMNS})
        SELECT (SELECT version FROM cur) AS current_version,
               coalesce((SELECT live FROM n), 0) AS owner_count, w.*
          FROM (VALUES (1)) AS v
          LEFT JOIN (SELECT false AS created, * FROM upd UNION ALL SELECT true, * FROM ins) AS w ON true"""


_UPDATE_NOTE = _update_sql("note")


def save_artifact(conn: Conn, *, kind: str, org_id: int, level: str, owner_id: int | None, key: str,
                  display_path: str, content: str, actor: Actor, if_version: int | None = None,
                  create_only: bool = False, update_sql: str | None = None) -> tuple[dict, bool]:
    """Create or update one artifact: (row, created). Concurrent writers of one path each get
    their own version (the row lock orders them); a create that loses a race becomes an update.

    ``if_version`` is checked in the locked UPDATE, so of two writers holding the same version
    one wins and the other gets PreconditionFailed. ``if_version=0`` means "it does not exist
    yet": a create only, and a create that loses the race is PreconditionFailed, not an update.
    Each attempt is one statement (_update_sql); a second runs only after losing a create race."""
    sql = update_sql or _update_sql(kind)
    guild_id, agent_id = owner_columns(level, owner_id)
    params = {"path": display_path, "content": content, "by": actor.name, "may_update": not create_only,
              "if_version": if_version, "may_create": not if_version, "org_id": org_id, "level": level,
              "owner": _owner_key(level, owner_id), "guild_id": guild_id, "agent_id": agent_id, "key": key,
              "cap": OWNER_CAP}
    for _ in range(2):
        row = conn.execute(sql, params).fetchone()
        current, count, created = row.pop("current_version"), row.pop("owner_count"), row.pop("created")
        if row["id"] is not None:
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
            raise _limit_reached(display_path, count)
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


def _retire(conn: Conn, row_id: int, actor: Actor) -> None:
    """Soft-delete a replaced artifact (no-op when the caller already did)."""
    conn.execute("UPDATE artifacts SET deleted_at = clock_timestamp(), updated_by = %s"
                 " WHERE id = %s AND deleted_at IS NULL", (actor.name, row_id))


def relocate_artifact(conn: Conn, row_id: int, *, org_id: int, src: str, dst: str, key: str,
                      replaced_id: int | None, actor: Actor, level: str | None = None,
                      guild_id: int | None = None, agent_id: int | None = None) -> dict:
    """Give the (locked) artifact ``row_id`` the path ``dst``: it keeps its row, so its identity and
    history, and its version goes up by one. ``replaced_id`` is a live artifact at ``dst`` that the
    caller has decided to replace; ``level`` and the owner ids move a note between levels.
    Provenance: 'move' on the old path, 'create' or 'update' on the new one."""
    if replaced_id is not None:
        _retire(conn, replaced_id, actor)
    row = conn.execute(
        f"""UPDATE artifacts SET key = %s, display_path = %s, level = coalesce(%s, level),
                   guild_id = CASE WHEN %s::text IS NULL THEN guild_id ELSE %s END,
                   agent_id = CASE WHEN %s::text IS NULL THEN agent_id ELSE %s END,
                   version = version + 1, updated_at = clock_timestamp(), updated_by = %s
             WHERE id = %s RETURNING {NOTE_COLUMNS}""",
        (key, dst, level, level, guild_id, level, agent_id, actor.name, row_id)).fetchone()
    record_change(conn, org_id=org_id, display_path=src, operation="move", version=row["version"], actor=actor)
    record_change(conn, org_id=org_id, display_path=dst, operation="update" if replaced_id else "create",
                  version=row["version"], actor=actor)
    return row


# ---------------------------------------------------------------------------------------------
# The store API (the Host tree and the tools)


def _ref(org_id: int, level: str, owner_id: int | None, key: str) -> tuple[str, str]:
    """(NFC key, display path) after the key and level rules."""
    problem = level_problem(level)
    if problem:
        raise Invalid(problem, [problem])
    key = check_note_key(key, level)  # type: ignore[arg-type]
    return key, note_path(org_id, level, owner_id, key)  # type: ignore[arg-type]


def get_note(conn: Conn, org_id: int, level: str, owner_id: int | None, key: str) -> dict | None:
    """The live note, with content, or None."""
    path = note_path(org_id, level, owner_id, nfc(key))  # type: ignore[arg-type]
    return conn.execute(f"SELECT {NOTE_COLUMNS}, content FROM artifacts"
                        " WHERE display_path = %s AND deleted_at IS NULL AND kind = 'note'",
                        (path,)).fetchone()


def list_notes(conn: Conn, org_id: int, level: str, owner_id: int | None) -> list[dict]:
    """One owner's live notes in key order, without content; ``size`` in bytes."""
    guild_id, agent_id = owner_columns(level, owner_id)
    return conn.execute(
        f"""SELECT {NOTE_COLUMNS}, octet_length(content) AS size FROM artifacts
             WHERE org_id = %(org_id)s AND {owner_where(level)} AND kind = 'note' AND deleted_at IS NULL
             ORDER BY key""", {"org_id": org_id, "guild_id": guild_id, "agent_id": agent_id}).fetchall()


def list_org_notes(conn: Conn, org_id: int) -> list[dict]:
    """Every live note of the organisation (all levels and owners), without content, ordered by
    level, owner and key; one query on the live-owner index."""
    return conn.execute(
        f"""SELECT {NOTE_COLUMNS}, guild_id, agent_id, octet_length(content) AS size FROM artifacts
             WHERE org_id = %s AND kind = 'note' AND deleted_at IS NULL
             ORDER BY level, guild_id, agent_id, key""", (org_id,)).fetchall()


def write_note(conn: Conn, org_id: int, level: str, owner_id: int | None, key: str, content: str,
               actor: Actor, *, if_version: int | None = None, create_only: bool = False) -> dict:
    """Create or update a note (see the module docstring); returns it without content."""
    key, path = _ref(org_id, level, owner_id, key)
    check_content(content)
    row, created = save_artifact(conn, kind="note", org_id=org_id, level=level, owner_id=owner_id, key=key,
                                 display_path=path, content=content, actor=actor, if_version=if_version,
                                 create_only=create_only, update_sql=_UPDATE_NOTE)
    record_change(conn, org_id=org_id, display_path=path, operation="create" if created else "update",
                  version=row["version"], actor=actor)
    return row


def _refuse_if_embedded(conn: Conn, path: str, verb: str) -> None:
    tasks = embeds.embedding_tasks(conn, path)
    if tasks:
        names = ", ".join(tasks)
        raise Embedded(f"cannot {verb} {path}: the task {names} embeds it (![[{path}]]); "
                       "remove the embed from the task first, then try again", tasks)


def delete_note(conn: Conn, org_id: int, level: str, owner_id: int | None, key: str, actor: Actor) -> dict:
    """Soft-delete a live note; refused while a live task embeds it. Returns {deleted: path}."""
    problem = level_problem(level)
    if problem:
        raise Invalid(problem, [problem])
    path = note_path(org_id, level, owner_id, nfc(key))  # type: ignore[arg-type]
    embeds.lock_for_removal(conn, [path])
    _refuse_if_embedded(conn, path, "delete")
    if soft_delete_artifact(conn, org_id=org_id, path=path, kind="note", actor=actor) is None:
        raise NotFound(f"unknown note {path}: there is no live note with that display path")
    return {"deleted": path}


def move_note(conn: Conn, src: NoteRef, dst: NoteRef, actor: Actor, *, replace: bool) -> dict:
    """Move (rename) a note, keeping its row and bumping its version; returns it without content."""
    s_org, s_level, s_owner, s_key = src
    d_org, d_level, d_owner, d_key = dst
    problem = level_problem(s_level)
    if problem:
        raise Invalid(problem, [problem])
    s_path = note_path(s_org, s_level, s_owner, nfc(s_key))  # type: ignore[arg-type]
    if s_level == "agent" and nfc(s_key) in RESERVED_AGENT_KEYS:
        raise Forbidden(f"cannot move {s_path}: {nfc(s_key)} is reserved at the agent root and cannot be "
                        "moved; copy its content to a note instead")
    d_key, d_path = _ref(d_org, d_level, d_owner, d_key)
    if s_org != d_org:
        msg = f"cannot move {s_path} to {d_path}: a note stays in its organisation"
        raise Invalid(msg, [msg])
    embeds.lock_for_removal(conn, [s_path, d_path] if replace else [s_path])
    _refuse_if_embedded(conn, s_path, "move")
    rows = conn.execute("SELECT id, display_path, version FROM artifacts WHERE display_path = ANY(%s)"
                        " AND deleted_at IS NULL AND kind = 'note' ORDER BY id FOR UPDATE",
                        ([s_path, d_path],)).fetchall()
    by_path = {r["display_path"]: r for r in rows}
    if s_path not in by_path:
        raise NotFound(f"unknown note {s_path}: there is no live note with that display path")
    if s_path == d_path:
        return get_note(conn, s_org, s_level, s_owner, s_key) or {}
    replaced = by_path.get(d_path)
    if replaced is not None:
        if not replace:
            raise AlreadyExists(f"cannot move {s_path} to {d_path}: {d_path} already exists; "
                                "allow overwriting, or choose another name")
        _refuse_if_embedded(conn, d_path, "replace")
    d_guild, d_agent = owner_columns(d_level, d_owner)
    changes_owner = (s_level, s_owner) != (d_level, d_owner)
    if changes_owner:
        # Both owners' counter rows, in one fixed order, before either count changes: two moves in
        # opposite directions at once then queue instead of deadlocking (artifact rows first, then
        # counters, as a delete takes them).
        counted = conn.execute(
            """SELECT level, owner_id, live FROM owner_counts
                WHERE org_id = %s AND (level, owner_id) IN ((%s, %s), (%s, %s))
                ORDER BY level, owner_id FOR UPDATE""",
            (d_org, s_level, _owner_key(s_level, s_owner), d_level, _owner_key(d_level, d_owner))).fetchall()
        live = {(r["level"], r["owner_id"]): r["live"] for r in counted}
    if replaced is not None:
        _retire(conn, replaced["id"], actor)  # the move takes its place
    if changes_owner:
        n = live.get((d_level, _owner_key(d_level, d_owner)), 0) - (1 if replaced is not None else 0)
        if n >= OWNER_CAP:
            raise LimitReached(f"cannot move {s_path} to {d_path}: the destination already holds {n:,} live "
                               f"files, the limit is {OWNER_CAP:,} per owner; delete files there first")
    return relocate_artifact(conn, by_path[s_path]["id"], org_id=s_org, src=s_path, dst=d_path, key=d_key,
                             replaced_id=replaced["id"] if replaced else None, actor=actor,
                             level=d_level, guild_id=d_guild, agent_id=d_agent)


# ---------------------------------------------------------------------------------------------
# The agent tools


def iso(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


def note_result(row: dict, *, content: bool = True) -> dict[str, Any]:
    out = {"display_path": row["display_path"], "level": row["level"], "key": row["key"]}
    if content:
        out["content"] = row["content"] or ""
    out.update(version=row["version"], created_at=iso(row["created_at"]), updated_at=iso(row["updated_at"]),
               updated_by=row["updated_by"])
    return out


def owner_for(agent: Agent, level: str) -> int | None:
    return agent.id if level == "agent" else agent.guild_id if level == "guild" else None


def require_reach(agent: Agent, level: str, need: str, asked: str) -> None:
    """Forbidden unless the agent's grants allow ``need`` (read/write) on its own ``level``."""
    if level == "agent":
        return
    flag = f"{need}_{level}"
    if not agent.grants()[flag]:
        where = f"its guild's notes (guild {agent.guild_id})" if level == "guild" else "organisation notes"
        other = ("agent-level notes (level agent) are always readable and writable"
                 if need == "write" else "its own agent-level notes are always readable")
        raise Forbidden(f"{asked} refused: this agent may not {need} {where}; that needs the {flag} "
                        f"grant, which the operator has not given it. {other[0].upper() + other[1:]}")


def _target_for(call: AgentCall, path: object, tool_name: str) -> Target:
    """Parse a path a tool was given and apply the family and reach rules shared by note_get and
    note_delete. Returns a note target the agent may reach at the guild/org grant level."""
    target = parse(path)
    agent = call.agent
    asked = f"{tool_name} {target.path if target.family != 'record' else path}"
    if target.org_id != agent.org_id or target.family == "history":
        raise NotFound(f"unknown path {path}: no note, task, memory, script or record has that display path")
    if target.family in ("collection", "record"):
        if tool_name == "note_get":
            msg = (f"{asked} refused: {path} is a {target.family}, not a note; read records with "
                   f"record_search (words in the values) or record_list (collection {target.name!r})")
        elif target.family == "record":
            msg = (f"{asked} refused: {path} is a record of collection {target.name!r}, not a note; "
                   f"remove it with record_remove (collection {target.name!r}, id {target.record_id})")
        else:
            msg = (f"{asked} refused: {path} is a collection, not a note; collections are managed by the "
                   "operator, and agents cannot delete them")
        raise Invalid(msg, [msg])
    if target.family == "script":
        tool = "script_get" if tool_name == "note_get" else "script_delete"
        msg = f"{asked} refused: {path} is a script, not a note; use {tool} with name {target.name!r}"
        raise Invalid(msg, [msg])
    if target.family in ("task", "memory"):
        if target.family == "task":
            why = "the standing task belongs to the operator and arrives in State; it is not a note"
        elif tool_name == "note_get":
            why = "memory is not a note; read it with memory_get"
        else:
            why = "memory is never deleted; rewrite it with memory_write"
        msg = f"{asked} refused: {why}"
        raise Invalid(msg, [msg])
    problem = check_key_of(target)
    if problem:
        raise Invalid(f"{asked} refused: {problem}", [problem])
    if target.level == "agent" and target.owner_id != agent.id:
        raise Forbidden(f"{asked} refused: agent-level notes belong to their agent, and this is agent "
                        f"{target.owner_id}'s; this agent reaches its own (org/{agent.org_id}/agents/{agent.id}/…), "
                        "its guild's and the organisation's notes")
    if target.level == "guild" and target.owner_id != agent.guild_id:
        raise Forbidden(f"{asked} refused: guild-level notes are read only by the guild's own agents, and this "
                        f"agent is in guild {agent.guild_id}; share across teams with an organisation note "
                        "or a collection")
    return target


def check_key_of(target: Target) -> str | None:
    try:
        check_note_key(target.name, target.level)
    except Invalid as exc:
        return exc.message
    return None


@tool("note_get", "Read one note by its display path.", path=Arg("string", required=True))
def note_get(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    target = _target_for(call, args["path"], "note_get")
    require_reach(call.agent, target.level, "read", f"note_get {target.path}")
    with db.connection() as conn:
        row = get_note(conn, target.org_id, target.level, target.owner_id, target.name)
    if row is None:
        raise NotFound(f"unknown note {target.path}: there is no live note with that display path; "
                       "note_find searches the notes this agent can read")
    return note_result(row)


@tool("note_write", "Create or replace a note at a level (agent, guild or org) under a key (a .md file name).",
      level=Arg("string", required=True), key=Arg("string", required=True), content=Arg("string", required=True))
def note_write(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    level, key = args["level"], args["key"]
    problems = [p for p in (level_problem(level),) if p]
    if level in LEVELS:
        try:
            check_note_key(key, level)
        except Invalid as exc:
            problems.append(exc.message)
    elif (kp := key_problem(key)):
        problems.append(kp)
    if problems:
        raise Invalid(f"note_write {level}/{key} refused\n" + "\n".join(f"- {p}" for p in problems), problems)
    require_reach(call.agent, level, "write", f"note_write {level} {key}")
    agent = call.agent
    with db.transaction() as conn:
        row = write_note(conn, agent.org_id, level, owner_for(agent, level), key, args["content"], call.actor)
    return note_result(row, content=False)


@tool("note_delete", "Delete one note by its display path.", path=Arg("string", required=True))
def note_delete(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    target = _target_for(call, args["path"], "note_delete")
    require_reach(call.agent, target.level, "write", f"note_delete {target.path}")
    with db.transaction() as conn:
        return delete_note(conn, target.org_id, target.level, target.owner_id, target.name, call.actor)


@tool("note_find", "Search the notes this agent can read (words, \"a phrase\", OR, -exclude).",
      query=Arg("string", required=True), level=Arg("string"), limit=Arg("integer"))
def note_find(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    agent = call.agent
    query, level, limit = args["query"], args.get("level"), args.get("limit", note_search.DEFAULT_LIMIT)
    problems = []
    if not query.strip() or "\x00" in query:
        problems.append("query: give one or more words to search for, such as pricing OR \"launch plan\"")
    if level is not None and (p := level_problem(level)):
        problems.append(f"level: {p}; leave it out to search every level this agent reads")
    if not 1 <= limit <= note_search.MAX_LIMIT:
        problems.append(f"limit: {limit} is outside 1..{note_search.MAX_LIMIT}; the default is "
                        f"{note_search.DEFAULT_LIMIT}")
    if problems:
        raise Invalid("note_find arguments rejected\n" + "\n".join(f"- {p}" for p in problems), problems)
    if level is not None:
        require_reach(agent, level, "read", f"note_find at level {level}")
    levels = [level] if level else [lv for lv in LEVELS if lv == "agent" or agent.grants()[f"read_{lv}"]]
    with db.connection() as conn:
        rows = note_search.find_notes(conn, agent, query, levels=levels, limit=limit)
    return {"notes": [{"display_path": r["display_path"], "level": r["level"], "key": r["key"],
                       "snippet": r["snippet"], "version": r["version"], "updated_at": iso(r["updated_at"])}
                      for r in rows]}


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
    count_notes(conn, org_id, level, owner_id, *, find="") -> int
        how many live notes one owner has (whose key holds ``find``, any case).
    page_notes(conn, org_id, level, owner_id, *, find="", order="name", limit, offset=0, total=None)
        one page of them (as list_notes), by key or by last change, newest first.
    first_notes(conn, org_id, *, guild_ids, agent_ids, limit, find="", in_path=False) -> list[dict]
        for the organisation and each of the guilds and agents named, in one query: its count of
        live notes (matching ``find``) and its first ``limit`` of them by key (the notes browser's
        overview, the task editor's Insert box).
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

The storage notes share with scripts and memory (the owner cap, versioned update, soft delete,
relocation, the 256 KB cap) is store.storage's.
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from store import embeds, note_search
from store.access import Actor
from store.agents import Agent, AgentCall
from store.db import Conn, Database, compact
from store.errors import AlreadyExists, Embedded, Forbidden, Invalid, LimitReached, NotFound, rejected
from store.paths import (LEVELS, RESERVED_AGENT_KEYS, Level, Target, check_note_key, key_problem, nfc, note_path,
                         new_note_problem, parse, refuse_name)
from store.storage import (NOTE_COLUMNS, OWNER_CAP, check_content, owner_columns, owner_key, refuse_new_name,
                           retire, owner_where, relocate_artifact, save_artifact, soft_delete_artifact)
from store.tools import Arg, tool
from store.values import shown


class NoteRef(NamedTuple):
    """One note's place: (org_id, level, owner_id, key); a plain 4-tuple works where one is asked."""
    org_id: int
    level: Level
    owner_id: int | None
    key: str

    @property
    def path(self) -> str:
        return note_path(self.org_id, self.level, self.owner_id, self.key)


def level_problem(level: object) -> str | None:
    if level in LEVELS:
        return None
    return f"level {shown(level)} is not one of agent, guild, org"


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


# The notes browser's orders. By name: the owner's range of artifacts_live_owner holds its keys
# in order, so a page reads its rows and no others; the index's columns are named before key (an
# owner's guild_id or agent_id IS NULL is no equality, and with key alone PostgreSQL sorted the
# owner's every note). By last change, newest first: no index has it, so a top-N sort of the
# owner's notes (at most OWNER_CAP).
NOTE_ORDERS = {"name": "level, guild_id, agent_id, kind, key", "changed": "updated_at DESC, key"}
# The same orders backwards: a page in the list's second half is read from its end (the index
# backwards, a top-N sort of fewer rows), so the last page costs what the first does.
_BACKWARDS = {"name": "level DESC, guild_id DESC, agent_id DESC, kind DESC, key DESC",
              "changed": "updated_at, key DESC"}


def _find_sql(find: bool, column: str = "key") -> str:
    """The condition a find (%(find)s) adds: ``column`` holds its text, apart from case (strpos, so
    % and _ are plain characters). The key is in the live-owner index: a count reads no table row."""
    return f" AND strpos(lower({column}), lower(%(find)s)) > 0" if find else ""


def count_notes(conn: Conn, org_id: int, level: str, owner_id: int | None, *, find: str = "") -> int:
    """How many live notes one owner has, or how many of them have ``find`` in their key (any case);
    an index-only count on artifacts_live_owner."""
    guild_id, agent_id = owner_columns(level, owner_id)
    return conn.execute(
        f"""SELECT count(*) AS n FROM artifacts
             WHERE org_id = %(org_id)s AND {owner_where(level)} AND kind = 'note' AND deleted_at IS NULL"""
        + _find_sql(bool(find)), {"org_id": org_id, "guild_id": guild_id, "agent_id": agent_id,
                            "find": nfc(find)}).fetchone()["n"]


def page_notes(conn: Conn, org_id: int, level: str, owner_id: int | None, *, find: str = "",
               order: str = "name", limit: int, offset: int = 0, total: int | None = None) -> list[dict]:
    """One page of an owner's live notes (as list_notes), those with ``find`` in their key (any
    case) only when it is given: by key (``order`` name) or by last change, newest first
    (changed). ``total``, the count of the notes listed (count_notes), lets a page nearer the
    end be read from the end."""
    guild_id, agent_id = owner_columns(level, owner_id)
    sql = (f"""SELECT {NOTE_COLUMNS}, octet_length(content) AS size FROM artifacts
                WHERE org_id = %(org_id)s AND {owner_where(level)} AND kind = 'note' AND deleted_at IS NULL"""
           + _find_sql(bool(find)) + " ORDER BY {} LIMIT %(limit)s OFFSET %(offset)s")
    params = {"org_id": org_id, "guild_id": guild_id, "agent_id": agent_id, "find": nfc(find),
              "limit": limit, "offset": offset}
    if total is None or 2 * offset + limit <= total:
        return conn.execute(sql.format(NOTE_ORDERS[order]), params).fetchall()
    end = min(total, offset + limit)
    if end <= offset:
        return []
    rows = conn.execute(sql.format(_BACKWARDS[order]), {**params, "limit": end - offset,
                                                         "offset": total - end}).fetchall()
    return rows[::-1]


# Each level's owners, and the condition naming one of them in artifacts_live_owner's terms.
_OWNERS = {"org": ("NULL::bigint", "(VALUES (1)) AS o(one)", "a.guild_id IS NULL AND a.agent_id IS NULL"),
           "guild": ("o.id", "unnest(%(guild_ids)s::bigint[]) AS o(id)", "a.guild_id = o.id AND a.agent_id IS NULL"),
           "agent": ("o.id", "unnest(%(agent_ids)s::bigint[]) AS o(id)", "a.guild_id IS NULL AND a.agent_id = o.id")}
_NOTE_COLUMNS_A = ", ".join("a." + col.strip() for col in NOTE_COLUMNS.split(","))


@functools.cache
def _first_notes_sql(find: bool, in_path: bool) -> str:
    """first_notes' statement: for each owner a count and its first notes by key, each a LATERAL
    subquery on that owner's range of artifacts_live_owner. (One owner per level is named by
    equality on every column of the index's prefix: NULLs are spelled out per level, not compared.)"""
    match = _find_sql(find, "a.display_path" if in_path else "a.key")
    parts = []
    for level, (owner, owners, columns) in _OWNERS.items():
        where = (f"a.org_id = %(org_id)s AND a.level = '{level}' AND {columns} AND a.kind = 'note'"
                 f" AND a.deleted_at IS NULL{match}")
        parts.append(f"""
            SELECT '{level}' AS owner_level, {owner} AS owner_id, c.n AS owner_count, p.*
              FROM {owners}
             CROSS JOIN LATERAL (SELECT count(*) AS n FROM artifacts a WHERE {where}) c
              LEFT JOIN LATERAL (SELECT {_NOTE_COLUMNS_A}, octet_length(a.content) AS size
                                   FROM artifacts a WHERE {where}
                                  ORDER BY a.guild_id, a.agent_id, a.key LIMIT %(limit)s) p ON true""")
    # (UNION ALL promises no order: the few rows it returns are put in key order again.)
    return compact(" UNION ALL ".join(parts) + " ORDER BY key")


def first_notes(conn: Conn, org_id: int, *, guild_ids: Sequence[int], agent_ids: Sequence[int], limit: int,
                find: str = "", in_path: bool = False) -> list[dict]:
    """The organisation's, each guild's and each agent's live notes, in one query that reads only
    what it returns: per owner {level, owner_id, count, notes}, ``count`` its live notes and
    ``notes`` the first ``limit`` of them by key (as list_notes). With ``find``, only notes whose
    key (``in_path``: display path) holds it, apart from case. In the order org, ``guild_ids``,
    ``agent_ids``."""
    rows = conn.execute(_first_notes_sql(bool(find), in_path),
                        {"org_id": org_id, "guild_ids": list(guild_ids), "agent_ids": list(agent_ids),
                         "limit": limit, "find": nfc(find)}).fetchall()
    out: dict[tuple[str, int | None], dict[str, Any]] = {
        ("org", None): {"level": "org", "owner_id": None, "count": 0, "notes": []},
        **{("guild", g): {"level": "guild", "owner_id": g, "count": 0, "notes": []} for g in guild_ids},
        **{("agent", a): {"level": "agent", "owner_id": a, "count": 0, "notes": []} for a in agent_ids}}
    for r in rows:
        owner = out[(r.pop("owner_level"), r.pop("owner_id"))]
        owner["count"] = r.pop("owner_count")
        if r["id"] is not None:
            owner["notes"].append(r)
    return list(out.values())


def write_note(conn: Conn, org_id: int, level: str, owner_id: int | None, key: str, content: str,
               actor: Actor, *, if_version: int | None = None, create_only: bool = False,
               hidden_for: int | None = None, honour_leases: bool = False) -> dict:
    """Create or update a note (see the module docstring); returns it without content.
    ``hidden_for``, ``honour_leases``: as store.storage.save_artifact."""
    key, path = _ref(org_id, level, owner_id, key)
    check_content(content)
    refuse_new_name(conn, path, new_note_problem(key, level))  # type: ignore[arg-type]
    row, _ = save_artifact(conn, kind="note", org_id=org_id, level=level, owner_id=owner_id, key=key,
                                 display_path=path, content=content, actor=actor, if_version=if_version,
                                 create_only=create_only, hidden_for=hidden_for, honour_leases=honour_leases)
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
    """Move (rename) a note within its organisation, keeping its row and bumping its version;
    returns it without content. (The tree refuses a move across organisations before this.)"""
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
    refuse_name(new_note_problem(d_key, d_level))  # type: ignore[arg-type]
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
            (d_org, s_level, owner_key(s_level, s_owner), d_level, owner_key(d_level, d_owner))).fetchall()
        live = {(r["level"], r["owner_id"]): r["live"] for r in counted}
    if replaced is not None:
        retire(conn, replaced["id"], actor)  # the move takes its place
    if changes_owner:
        n = live.get((d_level, owner_key(d_level, d_owner)), 0) - (1 if replaced is not None else 0)
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


def _owner_in_org(db: Database, level: Level, owner_id: int, org_id: int) -> bool:
    """Whether agent or guild ``owner_id`` (by ``level``) is one of organisation ``org_id``'s."""
    statement = ("SELECT 1 FROM agents WHERE id = %s AND org_id = %s" if level == "agent"
                 else "SELECT 1 FROM guilds WHERE id = %s AND org_id = %s")
    with db.connection() as conn:
        return conn.execute(statement, (owner_id, org_id)).fetchone() is not None


def _target_for(db: Database, call: AgentCall, path: object, tool_name: str) -> Target:
    """Parse a path a tool was given and apply the family and reach rules shared by note_get and
    note_delete. Returns a note target the agent may reach at the guild/org grant level."""
    target = parse(path)
    agent = call.agent
    asked = f"{tool_name} {target.path if target.family != 'record' else path}"
    unknown = f"unknown path {path}: no note, task, memory, script or record has that display path"
    if target.org_id != agent.org_id or target.family == "history":
        raise NotFound(unknown)
    # An agent or guild id that is not one of this organisation's (another organisation's, or
    # none at all) names nothing, as it does on every other front end: 404, not "this is agent
    # N's". Looked up only when the id is not the caller's own agent or guild, so the common
    # path costs no query; another agent or guild of the same organisation is refused below.
    own = agent.id if target.level == "agent" else agent.guild_id if target.level == "guild" else None
    if (target.owner_id is not None and target.owner_id != own
            and not _owner_in_org(db, target.level, target.owner_id, agent.org_id)):
        raise NotFound(unknown)
    if target.family in ("collection", "record"):
        if tool_name == "note_get":
            msg = (f"{asked} refused: {path} is a {target.family}, not a note; read records with "
                   f"record_search (words in the values) or record_list (collection {shown(target.name)})")
        elif target.family == "record":
            msg = (f"{asked} refused: {path} is a record of collection {shown(target.name)}, not a note; "
                   f"remove it with record_remove (collection {shown(target.name)}, id {target.record_id})")
        else:
            msg = (f"{asked} refused: {path} is a collection, not a note; collections are managed by the "
                   "operator, and agents cannot delete them")
        raise Invalid(msg, [msg])
    if target.family == "script":
        tool = "script_get" if tool_name == "note_get" else "script_delete"
        msg = f"{asked} refused: {path} is a script, not a note; use {tool} with name {shown(target.name)}"
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
        raise Forbidden(f"{asked} refused: a guild's notes are reached (read, written or deleted) only by "
                        f"its own agents, and this agent is in guild {agent.guild_id}; share across teams "
                        "with an organisation note or a collection")
    return target


def check_key_of(target: Target) -> str | None:
    try:
        check_note_key(target.name, target.level)
    except Invalid as exc:
        return exc.message
    return None


@tool("note_get", "Read one note by its display path.", path=Arg("string", required=True))
def note_get(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    target = _target_for(db, call, args["path"], "note_get")
    require_reach(call.agent, target.level, "read", f"note_get {target.path}")
    with db.connection() as conn:
        row = get_note(conn, target.org_id, target.level, target.owner_id, target.name)
    if row is None:
        raise NotFound(f"unknown note {target.path}: there is no live note with that display path; "
                       "note_find searches the notes this agent can read")
    return note_result(row)


# What an agent is told a reserved agent-root key is for: only what a tool caller can do about it.
_RESERVED_FOR_AGENTS = {
    "memory.md": "this agent's memory, which is not a note: replace it with memory_write {content} "
                 "and read it with memory_get",
    "task.md": "the agent's standing task, which the operator sets and which arrives in State; an agent "
               "does not write it",
}


@tool("note_write", "Create or replace a note at a level (agent, guild or org) under a key (a .md file name).",
      level=Arg("string", required=True, check=level_problem), key=Arg("string", required=True, check=key_problem),
      content=Arg("string", required=True))
def note_write(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    level, key = args["level"], args["key"]   # (a level and a key: their Arg checks ran with the types)
    if level == "agent" and (reserved := _RESERVED_FOR_AGENTS.get(nfc(key))):
        # Said to the agent in its own terms: the shared sentence (check_note_key) is the
        # operator's, naming the file in the agent's folder, a way a tool caller has not.
        msg = (f"the key {nfc(key)!r} is reserved at the agent root ({' and '.join(sorted(RESERVED_AGENT_KEYS))}) "
               f"for {reserved}; for a note, choose another key")
        raise rejected(f"note_write {level}/{key} refused", [msg])
    try:
        check_note_key(key, level)   # what is left: a key reserved at this level (memory.md, task.md)
    except Invalid as exc:
        raise rejected(f"note_write {level}/{key} refused", [exc.message]) from None
    require_reach(call.agent, level, "write", f"note_write {level} {key}")
    agent = call.agent
    with db.transaction() as conn:
        row = write_note(conn, agent.org_id, level, owner_for(agent, level), key, args["content"], call.actor)
    return note_result(row, content=False)


@tool("note_delete", "Delete one note by its display path.", path=Arg("string", required=True))
def note_delete(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    target = _target_for(db, call, args["path"], "note_delete")
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
    elif len(query) > note_search.MAX_QUERY:
        problems.append(f"query: {len(query)} characters long; at most {note_search.MAX_QUERY} are allowed")
    if level is not None and (p := level_problem(level)):
        problems.append(f"level: {p}; leave it out to search every level this agent reads")
    if not 1 <= limit <= note_search.MAX_LIMIT:
        problems.append(f"limit: {limit} is outside 1..{note_search.MAX_LIMIT}; the default is "
                        f"{note_search.DEFAULT_LIMIT}")
    if problems:
        raise rejected("note_find arguments rejected", problems)
    if level is not None:
        require_reach(agent, level, "read", f"note_find at level {level}")
    levels = [level] if level else [lv for lv in LEVELS if lv == "agent" or agent.grants()[f"read_{lv}"]]
    with db.connection() as conn:
        rows = note_search.find_notes(conn, agent, query, levels=levels, limit=limit)
    return {"notes": [{"display_path": r["display_path"], "level": r["level"], "key": r["key"],
                       "snippet": r["snippet"], "version": r["version"], "updated_at": iso(r["updated_at"])}
                      for r in rows]}


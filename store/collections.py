"""Collections as the operator manages them: create, alter (name, purpose, columns, scope), delete,
list with counts, and the grants that say which guilds and agents reach each table.

Agents never create, alter or delete a table; every function here acts for an organisation member
(a ``Principal``) and answers another organisation's ids as unknown. Each write is one transaction
with its provenance row on the collection's display path. What an agent may do with a table is
answered by store.grants (effective = agent row ?? guild base); this module only edits the rows.

A task may embed a table (``![[org/<org_id>/collections/<name>]]``): as for a note, a delete or a
rename (the name is in the display path) is refused with Embedded while a live task embeds it,
under store.embeds' exclusive lock on the path; a change of purpose, columns or scope (not in the
path) never is.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from psycopg import sql
from psycopg.errors import Diagnostic

from store import db as store_db
from store import embeds, orgs
from store.access import Actor, Principal
from store.columns import Column, apply_schema_change, column_problems, columns_json, stored_columns
from store.db import Conn, Database
from store.errors import AlreadyExists, Embedded, Invalid, LimitReached, NotFound, PreconditionFailed, rejected
from store.grants import COLLECTION_COLUMNS, Collection
from store.paths import COLLECTION_NAME, collection_path, is_id, nfc
from store.provenance import append_changes, record_change
from store.records import remove_all
from store.values import NUL_PROBLEM, shown

MAX_COLLECTIONS = 100
MAX_PURPOSE = 400
GUILD_MODES = ("read", "write")
AGENT_MODES = ("read", "write", "none")
_CREATE_FIELDS = ("name", "purpose", "columns", "guild_id")


def _name_taken(name: str) -> AlreadyExists:
    return AlreadyExists(f"a collection named {name} already exists in this organisation: names are unique "
                         "across the organisation whatever the table's scope; choose another name")


def _taken_from_diag(diag: Diagnostic) -> AlreadyExists:
    detail = diag.message_detail or ""
    name = detail.rsplit(", ", 1)[-1].split(")", 1)[0] if "=(" in detail else "that name"
    return _name_taken(name)


# A race past the pre-check (two creates of one name) still reads as the same sentence.
store_db.on_constraint("artifact_collections_live_name", _taken_from_diag)


# --- reading --------------------------------------------------------------------------------------

def _row(conn: Conn, collection_id: object, *, lock: bool = False) -> dict[str, Any] | None:
    if not is_id(collection_id):
        return None
    return conn.execute(
        f"SELECT {COLLECTION_COLUMNS} FROM artifact_collections c WHERE c.id = %s AND c.deleted_at IS NULL"
        + (" FOR UPDATE" if lock else ""), (collection_id,)).fetchone()


def get_collection(conn: Conn, org_id: int, collection_id: object, *, lock: bool = False) -> Collection:
    """The live collection ``collection_id`` of organisation ``org_id``; NotFound otherwise (another
    organisation's id reads exactly like one that does not exist). ``lock`` takes its row lock."""
    row = _row(conn, collection_id, lock=lock)
    if row is None or row["org_id"] != org_id:
        raise NotFound(f"unknown collection {collection_id}")
    return Collection.from_row(row)


def collection_for_member(conn: Conn, principal: Principal, collection_id: object, *,
                          lock: bool = False) -> Collection:
    """The live collection if the member's organisations include its own; NotFound otherwise."""
    row = _row(conn, collection_id, lock=lock)
    if row is None or row["org_id"] not in principal.org_ids:
        raise NotFound(f"unknown collection {collection_id}")
    return Collection.from_row(row)


def deleted_collection(conn: Conn, principal: Principal, collection_id: object) -> dict[str, Any] | None:
    """The deleted collection ``collection_id`` of the member's organisations, with who deleted it:
    {name, org_id, deleted_at, actor_name}; None when no such collection was deleted there (live,
    never made, or another organisation's: ids reveal nothing). The deletion is the first 'delete'
    row on the collection's path from its deleted_at on (written in the delete's transaction, by
    the clock, so at or after the transaction's now()), not a later one of a table that took the
    name since."""
    if not is_id(collection_id):
        return None
    return conn.execute(
        """SELECT c.name, c.org_id, c.deleted_at, fc.actor_name
             FROM artifact_collections c
             LEFT JOIN LATERAL (
                  SELECT actor_name FROM file_changes
                   WHERE display_path = 'org/' || c.org_id || '/collections/' || c.name
                     AND operation = 'delete' AND created_at >= c.deleted_at
                   ORDER BY id LIMIT 1) fc ON true
            WHERE c.id = %s AND c.deleted_at IS NOT NULL AND c.org_id = ANY(%s)""",
        (collection_id, list(principal.org_ids))).fetchone()


def record_counts(conn: Conn, collection_ids: list[int]) -> dict[int, int]:
    """Live records per collection, in one grouped query."""
    rows = conn.execute(
        """SELECT collection_id, count(*) AS n FROM artifacts
            WHERE kind = 'object' AND deleted_at IS NULL AND collection_id = ANY(%s)
            GROUP BY collection_id""", (collection_ids,)).fetchall()
    return {r["collection_id"]: r["n"] for r in rows}


def collection_json(c: Collection, *, count: int | None = None) -> dict[str, Any]:
    """A collection as the API returns it."""
    out: dict[str, Any] = {
        "id": c.id, "name": c.name, "purpose": c.purpose, "scope": c.scope, "guild_id": c.guild_id,
        "display_path": c.display_path, "columns": c.columns, "next_id": c.next_id,
        "created_at": c.created_at.isoformat() if c.created_at else None,
        "updated_at": c.updated_at.isoformat() if c.updated_at else None}
    if count is not None:
        out["count"] = count
    return out


def list_collections(conn: Conn, principal: Principal, org_id: int) -> list[dict[str, Any]]:
    """Every live collection of the organisation with its record count, by name."""
    principal.require_org(org_id)
    rows = conn.execute(f"SELECT {COLLECTION_COLUMNS} FROM artifact_collections c"
                        " WHERE c.org_id = %s AND c.deleted_at IS NULL ORDER BY c.name", (org_id,)).fetchall()
    counts = record_counts(conn, [r["id"] for r in rows])
    return [collection_json(Collection.from_row(r), count=counts.get(r["id"], 0)) for r in rows]


def access_list(conn: Conn, c: Collection) -> dict[str, list[dict[str, Any]]]:
    """Who reaches the table: guilds (the owner's base for a guild table, else the guild rows) and
    agent rows, each with its mode."""
    if c.guild_id is not None:
        guilds = conn.execute("SELECT id AS guild_id, name, 'write' AS mode, true AS own FROM guilds WHERE id = %s",
                              (c.guild_id,)).fetchall()
    else:
        guilds = conn.execute(
            """SELECT g.id AS guild_id, g.name, ca.mode, false AS own FROM collection_access ca
                 JOIN guilds g ON g.id = ca.guild_id WHERE ca.collection_id = %s ORDER BY g.name, g.id""",
            (c.id,)).fetchall()
    agents = conn.execute(
        """SELECT a.id AS agent_id, a.name, a.guild_id, ca.mode FROM collection_access ca
             JOIN agents a ON a.id = ca.agent_id WHERE ca.collection_id = %s ORDER BY a.name, a.id""",
        (c.id,)).fetchall()
    return {"guilds": guilds, "agents": agents}


def describe_collection(conn: Conn, principal: Principal, collection_id: object) -> dict[str, Any]:
    """The collection, its count and its access_list."""
    c = collection_for_member(conn, principal, collection_id)
    return {**collection_json(c, count=record_counts(conn, [c.id]).get(c.id, 0)),
            "access_list": access_list(conn, c), "etag": collection_etag(c)}


# --- checking operator input --------------------------------------------------------------------

def _unknown_fields(body: Mapping[str, Any], allowed: tuple[str, ...]) -> list[str]:
    return [f'unknown field "{k}"; a collection takes {", ".join(allowed)}' for k in body if k not in allowed]


def _name_problem(name: object) -> str | None:
    if name is None:
        return 'name is required, such as "leads"'
    if not isinstance(name, str) or not COLLECTION_NAME.fullmatch(name):
        shown = f'"{name}"' if isinstance(name, str) else repr(name)
        return (f"name {shown} is not a collection name: start with a lowercase letter, then lowercase "
                "letters, digits, _ or -, at most 63 characters (^[a-z][a-z0-9_-]{0,62}$)")
    return None


def _purpose_problem(purpose: object) -> str | None:
    if purpose is None or (isinstance(purpose, str) and not purpose.strip()):
        return f"purpose is required: a sentence, at most {MAX_PURPOSE} characters, saying what the table is for"
    if not isinstance(purpose, str):
        return f"purpose must be a string; got {shown(purpose)}"
    if len(purpose) > MAX_PURPOSE:
        return f"purpose is {len(purpose)} characters; at most {MAX_PURPOSE} are allowed"
    if "\x00" in purpose:
        return f"purpose {NUL_PROBLEM}"
    return None


def _guild_problem(guild_id: object) -> str | None:
    if guild_id is None or is_id(guild_id):
        return None
    return f"guild_id must be a guild's id, or null for an organisation table; got {shown(guild_id)}"


def _rejected(problems: list[str]) -> Invalid:
    return rejected("collection rejected:", problems)


def _missing_guild(conn: Conn, org_id: int, guild_id: object) -> str | None:
    """The problem line of a guild_id (of a well-formed body) that names no guild of the
    organisation; another organisation's guild reads the same, so ids reveal nothing."""
    if not is_id(guild_id):
        return None  # null, or already reported by _guild_problem
    if conn.execute("SELECT 1 FROM guilds WHERE id = %s AND org_id = %s", (guild_id, org_id)).fetchone() is None:
        return (f"guild_id {guild_id} is not a guild of this organisation; give one of its guilds' ids, "
                "or null for an organisation table")
    return None


def _check_name_free(conn: Conn, org_id: int, name: str, *, except_id: int | None = None) -> None:
    row = conn.execute("SELECT id FROM artifact_collections WHERE org_id = %s AND name = %s AND deleted_at IS NULL",
                       (org_id, name)).fetchone()
    if row is not None and row["id"] != except_id:
        raise _name_taken(name)


# --- writing --------------------------------------------------------------------------------------

def create_collection(db: Database, principal: Principal, org_id: int, body: Mapping[str, Any]) -> Collection:
    """Create a table from {name, purpose, columns, guild_id?}. Every problem of the definition at
    once (422); a name taken at the organisation is 409; the 101st live table is refused."""
    principal.require_org(org_id)
    if not isinstance(body, Mapping):
        raise _rejected(["body: expected a JSON object {name, purpose, columns, guild_id?}"])
    problems = _unknown_fields(body, _CREATE_FIELDS)
    problems += [p for p in (_name_problem(body.get("name")), _purpose_problem(body.get("purpose")),
                             _guild_problem(body.get("guild_id"))) if p]
    columns, column_issues = column_problems(body.get("columns"))
    problems += column_issues
    name, guild_id = body.get("name"), body.get("guild_id")
    with db.transaction() as conn:
        # One create at a time per organisation, so the cap and the name check cannot be raced.
        conn.execute("SELECT id FROM organisations WHERE id = %s FOR UPDATE", (org_id,))
        if p := _missing_guild(conn, org_id, guild_id):
            problems.append(p)
        if problems:
            raise _rejected(problems)
        live = conn.execute("SELECT count(*) AS n FROM artifact_collections WHERE org_id = %s AND deleted_at IS NULL",
                            (org_id,)).fetchone()["n"]
        if live >= MAX_COLLECTIONS:
            raise LimitReached(f"this organisation already has {live} live collections, the most it can hold "
                               f"({MAX_COLLECTIONS}); delete one it no longer needs before creating {name}",
                               [f"collections: {live} of {MAX_COLLECTIONS}"])
        _check_name_free(conn, org_id, name)
        row = conn.execute(
            f"""INSERT INTO artifact_collections AS c (org_id, guild_id, name, purpose, columns)
                VALUES (%s, %s, %s, %s, %s::jsonb) RETURNING {COLLECTION_COLUMNS}""",
            (org_id, guild_id, name, nfc(body["purpose"]), _jsonb(columns_json(columns)))).fetchone()
        c = Collection.from_row(row)
        record_change(conn, org_id=org_id, display_path=c.display_path, operation="create", version=None,
                      actor=principal.actor)
        return c


def _jsonb(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def collection_etag(c: Collection) -> str:
    """The version of the table's definition, for If-Match on a change: it moves on every change."""
    stamp = c.updated_at.timestamp() if c.updated_at else 0
    return f'"c{c.id}-{int(stamp * 1_000_000)}"'


def alter_collection(db: Database, principal: Principal, collection_id: object,
                     body: Mapping[str, Any], *, if_match: str | None = None) -> Collection:
    """Apply {name?, purpose?, columns?, guild_id?} in one transaction with the records. The row is
    locked first, so two operators changing one table serialise and each change is checked against
    the columns the other left (an unknown rename_from is then a 422, never a lost move). A columns
    editor that sends the list it loaded should send ``if_match`` (the etag it loaded): a list built
    on a schema someone else has since changed would otherwise read as removing their columns."""
    if not isinstance(body, Mapping):
        raise _rejected(["body: expected a JSON object {name?, purpose?, columns?, guild_id?}"])
    problems = _unknown_fields(body, _CREATE_FIELDS)
    if "name" in body and (p := _name_problem(body["name"])):
        problems.append(p)
    if "purpose" in body and (p := _purpose_problem(body["purpose"])):
        problems.append(p)
    if "guild_id" in body and (p := _guild_problem(body["guild_id"])):
        problems.append(p)
    with db.transaction() as conn:
        c = collection_for_member(conn, principal, collection_id, lock=True)
        if if_match is not None and if_match.strip() not in ("*", collection_etag(c)):
            raise PreconditionFailed(
                f"collection {c.name} changed since you loaded it (its etag is now {collection_etag(c)}); "
                "reload its columns, apply your change to them and send it again")
        old = stored_columns(c.columns)
        new: list[Column] | None = None
        if "columns" in body:
            new, column_issues = column_problems(body["columns"], previous=old)
            problems += column_issues
        if "guild_id" in body and (p := _missing_guild(conn, c.org_id, body["guild_id"])):
            problems.append(p)
        if problems:
            raise _rejected(problems)
        if "name" in body and collection_path(c.org_id, body["name"]) != c.display_path:
            # (The scope is not in the display path: a move to a guild or to the organisation
            # leaves every embed of the table working, and is never refused for one.)
            _refuse_if_embedded(conn, c, rename_to=body["name"])
        actor = principal.actor
        if "guild_id" in body and body["guild_id"] != c.guild_id:
            _move(conn, c, body["guild_id"])
        if "name" in body and body["name"] != c.name:
            _rename(conn, c, body["name"], actor)
        if new is not None and (columns_json(new) != c.columns or any(col.rename_from for col in new)):
            apply_schema_change(conn, c.id, old, new, actor)
        name, purpose = body.get("name", c.name), nfc(body.get("purpose", c.purpose))
        columns = columns_json(new) if new is not None else c.columns
        guild_id = body["guild_id"] if "guild_id" in body else c.guild_id
        if (name, purpose, columns, guild_id) == (c.name, c.purpose, c.columns, c.guild_id) and not (
                new is not None and any(col.rename_from for col in new)):
            # Nothing changes: no write, and the etag stays, so an editor that loaded the table
            # before this request does not meet a 412 for a change that never happened.
            return c
        row = conn.execute(
            f"""UPDATE artifact_collections c SET name = %s, purpose = %s, columns = %s::jsonb, guild_id = %s,
                       updated_at = now()
                 WHERE id = %s RETURNING {COLLECTION_COLUMNS}""",
            (name, purpose, _jsonb(columns), guild_id, c.id)).fetchone()
        changed = Collection.from_row(row)
        if (changed.purpose, changed.columns, changed.guild_id) != (c.purpose, c.columns, c.guild_id):
            record_change(conn, org_id=c.org_id, display_path=changed.display_path, operation="update",
                          version=None, actor=actor)
        return changed


def _refuse_if_embedded(conn: Conn, c: Collection, *, rename_to: str | None = None) -> None:
    """Embedded when a live task embeds the table (``![[org/<org_id>/collections/<name>]]``): a
    delete or a rename would leave that embed finding nothing, as the Host refuses for a note.
    The exclusive embed lock on the table's path comes first, in the caller's transaction (which
    holds the table's row lock, so its name cannot change meanwhile): a task save embedding the
    path takes it shared (store.tasks), so a save committed a moment earlier is seen here, and
    one arriving now waits until this transaction ends."""
    path = c.display_path
    embeds.lock_for_removal(conn, [path])
    tasks = embeds.embedding_tasks(conn, path)
    if not tasks:
        return
    who = f"the task {tasks[0]} embeds" if len(tasks) == 1 else f"the tasks {', '.join(tasks)} embed"
    if rename_to is None:
        raise Embedded(f"cannot delete the collection {c.name}: {who} it (![[{path}]]); remove the embed "
                       "from the task first, then try again", tasks)
    new_path = collection_path(c.org_id, rename_to)
    raise Embedded(f"cannot rename the collection {c.name} to {rename_to}: {who} it (![[{path}]]), which "
                   "would then find nothing; remove the embed from the task first, then try again (and embed "
                   f"![[{new_path}]] after the rename)", tasks)


def _rename(conn: Conn, c: Collection, name: str, actor: Actor) -> None:
    """A new name moves every live record's display path with it, and each record's history says
    so as a note move does: 'move' on its old path, 'create' on its new one, at its version (its
    body does not change). One statement moves them and appends their rows."""
    _check_name_free(conn, c.org_id, name, except_id=c.id)
    insert, params = append_changes("moved_rows", actor)
    conn.execute(
        f"""WITH moved AS (
              UPDATE artifacts a SET display_path = %s || '/' || a.key
                FROM artifacts b
               WHERE b.id = a.id AND a.collection_id = %s AND a.kind = 'object' AND a.deleted_at IS NULL
           RETURNING a.org_id, b.display_path AS old_path, a.display_path AS new_path, a.version),
            moved_rows AS (
              SELECT org_id, p.display_path, p.operation, version
                FROM moved, LATERAL (VALUES (1, old_path, 'move'), (2, new_path, 'create'))
                                    AS p(step, display_path, operation)
               ORDER BY moved.old_path, p.step)
            {insert}""", (collection_path(c.org_id, name), c.id, *params))
    record_change(conn, org_id=c.org_id, display_path=c.display_path, operation="move", version=None,
                  actor=actor)
    record_change(conn, org_id=c.org_id, display_path=collection_path(c.org_id, name), operation="create",
                  version=None, actor=actor)


def _move(conn: Conn, c: Collection, guild_id: int | None) -> None:
    """Change the table's scope. To a guild: every grant goes (the guild's base is write and no other
    guild reaches it). To the organisation: the former guild keeps its reach as a write grant."""
    if guild_id is not None:
        conn.execute("DELETE FROM collection_access WHERE collection_id = %s", (c.id,))
    elif c.guild_id is not None:
        conn.execute("""INSERT INTO collection_access (collection_id, guild_id, mode) VALUES (%s, %s, 'write')
                        ON CONFLICT (collection_id, guild_id) WHERE guild_id IS NOT NULL DO UPDATE SET mode = 'write'""",
                     (c.id, c.guild_id))


def delete_collection(db: Database, principal: Principal, collection_id: object) -> dict[str, Any]:
    """Soft-delete the table and its live records and drop its grants; the name is free again at
    once. Each record gets its own 'delete' row (store.records.remove_all), the table one row and
    event on its path. Refused (Embedded, naming every embedding task) while a live task embeds it."""
    with db.transaction() as conn:
        c = collection_for_member(conn, principal, collection_id, lock=True)
        _refuse_if_embedded(conn, c)
        removed = remove_all(conn, c.id, principal.actor)
        conn.execute("DELETE FROM collection_access WHERE collection_id = %s", (c.id,))
        conn.execute("UPDATE artifact_collections SET deleted_at = now(), updated_at = now() WHERE id = %s", (c.id,))
        record_change(conn, org_id=c.org_id, display_path=c.display_path, operation="delete", version=None,
                      actor=principal.actor)
        return {"deleted": c.id, "name": c.name, "records": removed}


# --- grants ---------------------------------------------------------------------------------------

def _agent_row(conn: Conn, principal: Principal, agent_id: int) -> dict[str, Any]:
    row = (conn.execute("SELECT id, org_id, guild_id, name FROM agents WHERE id = %s", (agent_id,)).fetchone()
           if is_id(agent_id) else None)
    if row is None or row["org_id"] not in principal.org_ids:
        raise NotFound(f"unknown agent {agent_id}")
    return row


_GUILD_VIEW = """
SELECT c.id AS collection_id, c.name, c.purpose, c.guild_id,
       CASE WHEN c.guild_id IS NOT NULL THEN 'guild' ELSE 'org' END AS scope,
       CASE WHEN c.guild_id IS NOT NULL THEN 'write' ELSE ga.mode END AS guild_mode
  FROM artifact_collections c
  LEFT JOIN collection_access ga ON ga.collection_id = c.id AND ga.guild_id = %(guild)s
 WHERE c.org_id = %(org)s AND c.deleted_at IS NULL AND (c.guild_id IS NULL OR c.guild_id = %(guild)s)
"""


def guild_access(conn: Conn, principal: Principal, guild_id: int) -> dict[str, Any]:
    """The guild's own tables (scope guild, write) and every organisation table with the guild's
    grant (mode null when it has none)."""
    g = orgs.guild(conn, principal, guild_id)
    rows = conn.execute(_GUILD_VIEW + " ORDER BY scope DESC, c.name", {"guild": g["id"], "org": g["org_id"]}).fetchall()
    return {"guild_id": g["id"], "collections": [
        {"collection_id": r["collection_id"], "name": r["name"], "purpose": r["purpose"], "scope": r["scope"],
         "mode": r["guild_mode"]} for r in rows]}


def agent_access(conn: Conn, principal: Principal, agent_id: int) -> dict[str, Any]:
    """The agent's guild's own tables and every organisation table, each with the guild's grant, the
    agent's own row and the effective mode (agent row ?? guild base; none is no access)."""
    a = _agent_row(conn, principal, agent_id)
    return {"agent_id": a["id"], "guild_id": a["guild_id"],
            "collections": access_rows(conn, a["org_id"], a["guild_id"], a["id"])}


def access_rows(conn: Conn, org_id: int, guild_id: int, agent_id: int) -> list[dict[str, Any]]:
    """agent_access's collections for an agent the caller has already loaded (its State page)."""
    rows = conn.execute(
        f"""SELECT v.*, aa.mode AS agent_mode FROM ({_GUILD_VIEW}) v
              LEFT JOIN collection_access aa ON aa.collection_id = v.collection_id AND aa.agent_id = %(agent)s
             ORDER BY v.scope DESC, v.name""",
        {"guild": guild_id, "org": org_id, "agent": agent_id}).fetchall()
    out = []
    for r in rows:
        effective = r["agent_mode"] if r["agent_mode"] is not None else r["guild_mode"]
        out.append({"collection_id": r["collection_id"], "name": r["name"], "purpose": r["purpose"],
                    "scope": r["scope"], "guild_mode": r["guild_mode"], "agent_mode": r["agent_mode"],
                    "effective": None if effective == "none" else effective})
    return out


def _grant_body(body: object, modes: tuple[str, ...], subject: str) -> tuple[int, str | None]:
    problems: list[str] = []
    if not isinstance(body, Mapping):
        raise _grant_rejected(["body: expected a JSON object {collection_id, mode}"])
    for key in body:
        if key not in ("collection_id", "mode"):
            problems.append(f'unknown field "{key}"; a grant takes collection_id and mode')
    cid = body.get("collection_id")
    if not is_id(cid):
        problems.append(f"collection_id must be a collection's id; got {shown(cid)}")
    if "mode" not in body:
        problems.append(f"mode is required: {', '.join(modes)}, or null to remove the {subject}'s grant")
    elif body["mode"] is not None and body["mode"] not in modes:
        problems.append(f"mode must be {', '.join(modes)}, or null to remove the {subject}'s grant; "
                        f"got {shown(body['mode'])}")
    if problems:
        raise _grant_rejected(problems)
    return cid, body["mode"]  # type: ignore[return-value]


def _grant_rejected(problems: list[str]) -> Invalid:
    return rejected("grant rejected:", problems)


def set_guild_access(db: Database, principal: Principal, guild_id: int, body: object) -> dict[str, Any]:
    """Set or remove (mode null) a guild's grant on an organisation table. A guild's own table takes
    no guild grant: its guild already writes it and no other guild may reach it (422)."""
    cid, mode = _grant_body(body, GUILD_MODES, "guild")
    with db.transaction() as conn:
        g = orgs.guild(conn, principal, guild_id)
        c = get_collection(conn, g["org_id"], cid, lock=True)
        if c.guild_id is not None:
            owner = "this guild's own table" if c.guild_id == g["id"] else f"guild {c.guild_id}'s own table"
            msg = (f"collection {c.name} is {owner}: a guild's own table takes no guild grant (its guild "
                   "writes it and no other guild reaches it); move it to the organisation first to share it")
            raise Invalid(msg, [msg])
        _set_grant(conn, c, "guild_id", g["id"], mode, principal)
        return {"guild_id": g["id"], "collection_id": c.id, "name": c.name, "mode": mode}


def _set_grant(conn: Conn, c: Collection, subject: str, subject_id: int, mode: str | None,
               principal: Principal) -> None:
    """Upsert (or, for mode None, remove) the grant row of one guild or agent (``subject`` is the
    column, guild_id or agent_id), and announce it on the collection's path."""
    column = sql.Identifier(subject)
    if mode is None:
        changed = conn.execute(
            sql.SQL("DELETE FROM collection_access WHERE collection_id = %s AND {} = %s RETURNING 1").format(column),
            (c.id, subject_id)).fetchone()
    else:
        # (No row back when the grant already had this mode: nothing changed, nothing to announce.)
        changed = conn.execute(
            sql.SQL("""INSERT INTO collection_access (collection_id, {col}, mode) VALUES (%s, %s, %s)
                       ON CONFLICT (collection_id, {col}) WHERE {col} IS NOT NULL
                       DO UPDATE SET mode = EXCLUDED.mode WHERE collection_access.mode <> EXCLUDED.mode
                       RETURNING 1""").format(col=column),
            (c.id, subject_id, mode)).fetchone()
    if changed is not None:
        record_change(conn, org_id=c.org_id, display_path=c.display_path, operation="update", version=None,
                      actor=principal.actor)


def set_agent_access(db: Database, principal: Principal, agent_id: int, body: object) -> dict[str, Any]:
    """Set (read, write, none) or remove (null) an agent's own row. On a guild's own table the row
    is accepted only for an agent of that guild (422 otherwise)."""
    cid, mode = _grant_body(body, AGENT_MODES, "agent")
    with db.transaction() as conn:
        a = _agent_row(conn, principal, agent_id)
        c = get_collection(conn, a["org_id"], cid, lock=True)
        if c.guild_id is not None and c.guild_id != a["guild_id"] and mode is not None:
            msg = (f"collection {c.name} is guild {c.guild_id}'s own table and agent {a['id']} belongs to "
                   f"guild {a['guild_id']}: an agent row on a guild's own table is accepted only for an agent "
                   "of that guild; move the table to the organisation to share it")
            raise Invalid(msg, [msg])
        _set_grant(conn, c, "agent_id", a["id"], mode, principal)
        entry = next((e for e in agent_access(conn, principal, a["id"])["collections"] if e["collection_id"] == c.id),
                     None)
        if entry is None:
            # Another guild's own table, whose row for this agent was removed (or never was): the
            # agent does not reach the table at all.
            entry = {"collection_id": c.id, "name": c.name, "purpose": c.purpose, "scope": "guild",
                     "guild_mode": None, "agent_mode": None, "effective": None}
        return {"agent_id": a["id"], **entry}

"""What the Host tree needs from the artifact families, in the tree's terms.

The tree (store.host) knows folders and file names; this module turns them into the families'
calls (notes, task, memory, scripts, history, collections, records) and answers listings in a
bounded number of queries (one per folder, never one per child). Writes go through the family
modules' rules where those modules (store.notes, store.tasks, store.memory, store.scripts), each of which records provenance
in the caller's transaction.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Literal

from store import memory, notes, scratch, scripts, tasks
from store.collections import collection_json
from store.columns import stored_columns
from store.grants import Collection
from store.records import as_record
from store.access import Actor, Principal
from store.db import Conn
from store.paths import HISTORY_NAME, note_path, parse_id, script_path

if TYPE_CHECKING:
    from store.host import Folder

Level = Literal["agent", "guild", "org"]
EPOCH = datetime(2020, 1, 1, tzinfo=timezone.utc)


@dataclass(frozen=True)
class NoteRef:
    org_id: int
    level: Level
    owner_id: int | None
    key: str

    @property
    def path(self) -> str:
        return note_path(self.org_id, self.level, self.owner_id, self.key)


def _owner_cols(level: Level, owner_id: int | None) -> tuple[int | None, int | None]:
    return (owner_id if level == "guild" else None, owner_id if level == "agent" else None)


# ---------------------------------------------------------------------------------------------
# Folders

def folder_row(conn: Conn, folder: Folder, principal: Principal) -> dict | None:
    """The folder's creation time when it exists, else None. One query."""
    k = folder.kind
    if k in ("root", "orgs"):
        return {"created_at": EPOCH}
    if k in ("org", "guilds", "agents", "collections"):
        return conn.execute("SELECT created_at FROM organisations WHERE id = %s", (folder.org_id,)).fetchone()
    if k == "guild":
        return conn.execute("SELECT created_at FROM guilds WHERE id = %s AND org_id = %s",
                            (folder.owner_id, folder.org_id)).fetchone()
    if k in ("agent", "scripts", "history"):
        return conn.execute("SELECT created_at FROM agents WHERE id = %s AND org_id = %s",
                            (folder.owner_id, folder.org_id)).fetchone()
    if k == "collection":
        return conn.execute("SELECT created_at FROM artifact_collections WHERE org_id = %s AND name = %s"
                            " AND deleted_at IS NULL", (folder.org_id, folder.name)).fetchone()
    return None


_FILE_COLS = ("key AS name, octet_length(content) AS size, version, 'a' || id AS tag, created_at,"
              " updated_at")


def children(conn: Conn, folder: Folder, principal: Principal) -> list[dict] | None:
    """The folder's children as rows (dirs: name, is_dir, created_at, writable; files: name, kind,
    size, version, tag, created_at, updated_at), or None when the folder does not exist. A few
    queries per folder, whatever the number of children."""
    row = folder_row(conn, folder, principal)
    if row is None:
        return None
    k, org = folder.kind, folder.org_id
    created = row["created_at"]
    if k == "root":
        return [_dir("org", created)]
    if k == "orgs":
        rows = conn.execute("SELECT id, created_at FROM organisations WHERE id = ANY(%s) ORDER BY id",
                            (sorted(principal.org_ids),)).fetchall()
        return [_dir(str(r["id"]), r["created_at"], writable=True) for r in rows]
    if k == "org":
        notes = _notes(conn, org, "org", None)
        return [_dir("agents", created), _dir("collections", created), _dir("guilds", created)] + notes
    if k == "guilds":
        rows = conn.execute("SELECT id, created_at FROM guilds WHERE org_id = %s ORDER BY id", (org,)).fetchall()
        return [_dir(str(r["id"]), r["created_at"], writable=True) for r in rows]
    if k == "agents":
        rows = conn.execute("SELECT id, created_at FROM agents WHERE org_id = %s ORDER BY id", (org,)).fetchall()
        return [_dir(str(r["id"]), r["created_at"], writable=True) for r in rows]
    if k == "collections":
        rows = conn.execute("SELECT name, created_at FROM artifact_collections WHERE org_id = %s"
                            " AND deleted_at IS NULL ORDER BY name", (org,)).fetchall()
        return [_dir(r["name"], r["created_at"]) for r in rows]
    if k == "guild":
        return _notes(conn, org, "guild", folder.owner_id)
    if k == "agent":
        agent = folder.owner_id
        out = [_dir("history-archive", created), _dir("scripts", created, writable=True)]
        out.append({**_task_row(conn, agent, with_content=False), "name": "task.md", "kind": "task"})  # type: ignore[dict-item]
        out.append({**_memory_row(conn, agent, with_content=False), "name": "memory.md", "kind": "memory"})  # type: ignore[dict-item]
        return out + _notes(conn, org, "agent", agent)
    if k == "scripts":
        rows = conn.execute(f"SELECT {_FILE_COLS} FROM artifacts WHERE org_id = %s AND level = 'agent'"
                            " AND agent_id = %s AND kind = 'script' AND deleted_at IS NULL ORDER BY key",
                            (org, folder.owner_id)).fetchall()
        return [{**r, "kind": "script"} for r in rows]
    if k == "history":
        rows = conn.execute(f"SELECT {_HISTORY_COLS} FROM memory_revisions WHERE agent_id = %s ORDER BY id",
                            (folder.owner_id,)).fetchall()
        return [{**r, "kind": "history"} for r in rows]
    if k == "collection":
        return _collection_files(conn, folder)
    return None


def _dir(name: str, created: datetime, *, writable: bool = False) -> dict:
    return {"name": name, "is_dir": True, "created_at": created, "writable": writable}


def _notes(conn: Conn, org: int | None, level: Level, owner: int | None) -> list[dict]:
    guild, agent = _owner_cols(level, owner)
    rows = conn.execute(
        f"SELECT {_FILE_COLS} FROM artifacts WHERE org_id = %(org_id)s AND {notes.owner_where(level)}"
        " AND kind = 'note' AND deleted_at IS NULL ORDER BY key",
        {"org_id": org, "guild_id": guild, "agent_id": agent}).fetchall()
    return [{**r, "kind": "note"} for r in rows]


# ---------------------------------------------------------------------------------------------
# Files: one query each

_HISTORY_COLS = ("to_char(saved_at AT TIME ZONE 'UTC', 'YYYYMMDD\"T\"HH24MISSUS\"Z\"') || '-' || source || '.md'"
                 " AS name, octet_length(content) AS size, version, 'h' || id AS tag, saved_at AS created_at,"
                 " saved_at AS updated_at")


def read_file(conn: Conn, folder: Folder, name: str, kind: str, principal: Principal, *,
              hidden_for: int | None = None) -> dict | None:
    """The file's row (size, version, tag, created_at, updated_at, content as UTF-8 bytes) or None.
    One query. With ``hidden_for`` (a user id), a file that user moved away in a rename-away save
    (store.scratch.hide) is None too, decided in the same query."""
    org, owner = folder.org_id, folder.owner_id
    if kind in ("note", "script", "task", "memory"):
        path = (NoteRef(org or 0, folder.level, owner, name).path if kind != "script"
                else script_path(org or 0, owner or 0, name))
        hidden, hidden_params = (f", {scratch.HIDDEN_SQL} AS hidden", [hidden_for, path]) if hidden_for else ("", [])
        if kind in ("note", "script"):
            row = conn.execute(f"SELECT {_FILE_COLS}, content{hidden} FROM artifacts WHERE display_path = %s"
                               " AND kind = %s AND deleted_at IS NULL", [*hidden_params, path, kind]).fetchone()
        elif kind == "task":
            row = _task_row(conn, owner, with_content=True, org_id=org, extra=(hidden, hidden_params))
        else:
            row = _memory_row(conn, owner, with_content=True, org_id=org, extra=(hidden, hidden_params))
        if row is not None and row.pop("hidden", False):
            return None
        return _bytes(row)
    if kind == "history":
        m = HISTORY_NAME.fullmatch(name)
        if not m:
            return None
        return _bytes(conn.execute(
            f"SELECT * FROM (SELECT {_HISTORY_COLS}, content FROM memory_revisions"
            " WHERE agent_id = %s AND source = %s"
            " AND EXISTS (SELECT 1 FROM agents a WHERE a.id = agent_id AND a.org_id = %s)) h WHERE name = %s",
            (owner, m.group(2), org, name)).fetchone())
    if kind in ("collection_json", "record"):
        files = {f["name"]: f for f in _collection_files(conn, folder, only=name)}
        return files.get(name)
    return None


def contents(conn: Conn, paths: list[str]) -> dict[str, tuple[int, bytes]]:
    """{display path: (version, UTF-8 bytes)} of the live notes and scripts among ``paths``. One query."""
    rows = conn.execute("SELECT display_path, version, content FROM artifacts"
                        " WHERE display_path = ANY(%s) AND deleted_at IS NULL AND kind IN ('note', 'script')",
                        (paths,)).fetchall()
    return {r["display_path"]: (r["version"], (r["content"] or "").encode("utf-8")) for r in rows}


def _bytes(row: dict | None) -> dict | None:
    if row is None:
        return None
    content = row.get("content")
    return {**row, "content": content.encode("utf-8") if isinstance(content, str) else content}


def _task_row(conn: Conn, agent_id: int | None, *, with_content: bool, org_id: int | None = None,
              extra: tuple[str, list[Any]] = ("", [])) -> dict | None:
    content = ", task AS content" if with_content else ""
    sql = (f"SELECT octet_length(task) AS size, task_version AS version, 't' || id AS tag, created_at,"
           f" task_updated_at AS updated_at{content}{extra[0]} FROM agents WHERE id = %s")
    params: list[Any] = [*extra[1], agent_id]
    if org_id is not None:
        sql += " AND org_id = %s"
        params.append(org_id)
    return conn.execute(sql, params).fetchone()


def _memory_row(conn: Conn, agent_id: int | None, *, with_content: bool, org_id: int | None = None,
                extra: tuple[str, list[Any]] = ("", [])) -> dict | None:
    """The memory artifact, or an empty version-0 memory.md when the agent has none yet."""
    content = ", coalesce(m.content, '') AS content" if with_content else ""
    sql = (f"SELECT coalesce(octet_length(m.content), 0) AS size, coalesce(m.version, 0) AS version,"
           f" coalesce('a' || m.id, 'm' || a.id) AS tag, coalesce(m.created_at, a.created_at) AS created_at,"
           f" coalesce(m.updated_at, a.created_at) AS updated_at{content}{extra[0]}"
           " FROM agents a LEFT JOIN artifacts m ON m.agent_id = a.id AND m.kind = 'memory' AND m.deleted_at IS NULL"
           " WHERE a.id = %s")
    params: list[Any] = [*extra[1], agent_id]
    if org_id is not None:
        sql += " AND a.org_id = %s"
        params.append(org_id)
    return conn.execute(sql, params).fetchone()


def _collection_files(conn: Conn, folder: Folder, only: str | None = None) -> list[dict]:
    """collection.json and one <id>.json per live record, with the JSON the API returns (the
    collections and records modules' own shapes). Two queries."""
    coll = conn.execute("SELECT id, org_id, guild_id, name, purpose, columns, next_id, created_at, updated_at"
                        " FROM artifact_collections WHERE org_id = %s AND name = %s AND deleted_at IS NULL",
                        (folder.org_id, folder.name)).fetchone()
    if coll is None:
        return []
    want_record = None
    if only is not None and only != "collection.json":
        stem = only.removesuffix(".json")
        if not only.endswith(".json") or parse_id(stem) is None:
            return []
        want_record = stem
    where = " AND key = %s" if want_record else ""
    params: list[Any] = [coll["id"]] + ([want_record] if want_record else [])
    records = conn.execute(
        "SELECT id, key, display_path, content_json, version, created_at, updated_at, updated_by,"
        " count(*) OVER () AS total FROM artifacts"
        f" WHERE collection_id = %s AND kind = 'object' AND deleted_at IS NULL{where} ORDER BY key::bigint",
        params).fetchall()
    out: list[dict] = []
    if only is None or only == "collection.json":
        count = records[0]["total"] if records else 0
        body = _json(collection_json(Collection.from_row(coll), count=count))
        out.append({"name": "collection.json", "kind": "collection_json", "size": len(body), "version": 1,
                    "tag": f"c{coll['id']}-n{count}-{int(coll['updated_at'].timestamp())}",
                    "created_at": coll["created_at"], "updated_at": coll["updated_at"], "content": body})
    if only != "collection.json":
        columns = stored_columns(coll["columns"])
        for r in records:
            body = _json(as_record(r, coll["name"], columns, display_path=True))
            out.append({"name": f"{r['key']}.json", "kind": "record", "size": len(body), "version": r["version"],
                        "tag": f"a{r['id']}", "created_at": r["created_at"], "updated_at": r["updated_at"],
                        "content": body})
    return out


def _json(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n").encode("utf-8")


# ---------------------------------------------------------------------------------------------
# Writes: the families' own functions, so their rules (key and content checks, caps, reserved
# keys, the embed rule, versions, revisions, provenance) apply exactly as for the agent tools.

OPERATOR_SOURCE = "operator"  # what memory's history-archive names an edit made through the tree


def _tuple(ref: NoteRef) -> tuple[int, str, int | None, str]:
    return (ref.org_id, ref.level, ref.owner_id, ref.key)


def write_note(conn: Conn, ref: NoteRef, text: str, actor: Actor, *, if_version: int | None = None) -> int:
    return notes.write_note(conn, ref.org_id, ref.level, ref.owner_id, ref.key, text, actor,
                            if_version=if_version)["version"]


def delete_note(conn: Conn, ref: NoteRef, actor: Actor) -> None:
    notes.delete_note(conn, ref.org_id, ref.level, ref.owner_id, ref.key, actor)


def move_note(conn: Conn, src: NoteRef, dst: NoteRef, actor: Actor, *, replace: bool) -> int:
    return notes.move_note(conn, _tuple(src), _tuple(dst), actor, replace=replace)["version"]


def write_task(conn: Conn, org_id: int | None, agent_id: int | None, text: str, actor: Actor, *,
               if_version: int | None = None) -> int:
    return tasks.write_task(conn, org_id or 0, agent_id or 0, text, actor, if_version=if_version)["version"]


def write_memory(conn: Conn, org_id: int | None, agent_id: int | None, text: str, actor: Actor, *,
                 if_version: int | None = None) -> int:
    return memory.write_memory(conn, org_id or 0, agent_id or 0, text, actor, source=OPERATOR_SOURCE,
                               if_version=if_version)["version"]


def write_script(conn: Conn, org_id: int | None, agent_id: int | None, name: str, text: str, actor: Actor, *,
                 if_version: int | None = None) -> int:
    return scripts.write_script(conn, org_id or 0, agent_id or 0, name, text, actor,
                                if_version=if_version)["version"]


def delete_script(conn: Conn, org_id: int | None, agent_id: int | None, name: str, actor: Actor) -> None:
    scripts.delete_script(conn, org_id or 0, agent_id or 0, name, actor)


def move_script(conn: Conn, org_id: int | None, agent_id: int | None, src: str, dst: str, actor: Actor, *,
                replace: bool) -> int:
    return scripts.move_script(conn, org_id or 0, agent_id or 0, src, dst, actor, replace=replace)["version"]

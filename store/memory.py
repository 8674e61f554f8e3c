"""Memory: the agent's private free-form text for future runs (kind 'memory', one per agent).

Memory is never deleted. Each write keeps the version it replaces in memory_revisions; operators
read those as org/<org>/agents/<agent>/history-archive/<stamp>-<source>.md, where ``stamp`` is when
that version was saved (UTC, microseconds) and ``source`` says what saved it. The current
version's source is kept in the artifact's content_json ({"source": ...}) so that it can be
archived with the right name. Sources are short slugs: 'agent' for memory_write, 'operator' for an
edit through the Host or the API, or any other ^[a-z0-9][a-z0-9-]{0,40}$ the caller names.

    read_memory(conn, org_id, agent_id) -> dict | None
    write_memory(conn, org_id, agent_id, content, actor, *, source, if_version=None) -> dict
    list_history(conn, org_id, agent_id) -> list[dict]     newest first: id, name, display_path,
                                                           version, saved_at, saved_by, size
    read_history(conn, org_id, agent_id, name) -> dict      NotFound for an unknown name

Tools: memory_get {} and memory_write {content}.
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any

from store.access import Actor
from store.agents import AgentCall
from store.db import Conn, Database
from store.errors import Invalid, NotFound, PreconditionFailed
from store.notes import iso
from store.storage import check_content, insert_artifact
from store.paths import HISTORY_NAME, history_path, memory_path
from store.provenance import actor_params, announce, change_cte, notify_change, record_change
from store.tools import Arg, tool
from store.values import shown

SOURCE = re.compile(r"^[a-z0-9][a-z0-9-]{0,40}\Z")
_COLUMNS = "id, display_path, content, version, created_at, updated_at, updated_by, content_json"

_SAVE = f"""
WITH cur AS (SELECT id, content, version, updated_at, updated_by, content_json FROM artifacts
              WHERE display_path = %(path)s AND deleted_at IS NULL AND kind = 'memory' FOR UPDATE),
     ok AS (SELECT * FROM cur WHERE %(if_version)s::int IS NULL OR version = %(if_version)s::int),
     kept AS (INSERT INTO memory_revisions (agent_id, content, version, source, saved_at, saved_by)
              SELECT %(agent_id)s, coalesce(content, ''), version,
                     coalesce(content_json->>'source', 'agent'), updated_at, updated_by FROM ok),
     upd AS (UPDATE artifacts a SET content = %(content)s, version = a.version + 1,
                    updated_at = clock_timestamp(), updated_by = %(by)s, content_json = %(json)s::jsonb
               FROM ok WHERE a.id = ok.id
             RETURNING {', '.join('a.' + c.strip() for c in _COLUMNS.split(','))}),
     change AS ({change_cte("(SELECT %(org_id)s::bigint AS org_id, display_path, 'update' AS operation, version"
                            " FROM upd) AS written")})
SELECT (SELECT version FROM cur) AS current_version, (SELECT id FROM change) AS change_id,
       {notify_change("change")} AS notified, upd.*
  FROM (VALUES (1)) AS v LEFT JOIN upd ON true
"""


def stamp(when: datetime) -> str:
    """A saved_at as a history file name's stamp: UTC (the Z says so, whatever the session's
    time zone), with microseconds, so two saves in one second have two names."""
    return when.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")


def _agent_org_check(conn: Conn, org_id: int, agent_id: int) -> None:
    if conn.execute("SELECT 1 FROM agents WHERE id = %s AND org_id = %s", (agent_id, org_id)).fetchone() is None:
        raise NotFound(f"unknown agent {agent_id}")


def read_memory(conn: Conn, org_id: int, agent_id: int) -> dict | None:
    """The live memory (display_path, content, version, created_at, updated_at, updated_by, source)."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM artifacts WHERE display_path = %s AND deleted_at IS NULL"
                       " AND kind = 'memory'", (memory_path(org_id, agent_id),)).fetchone()
    return _shape(row) if row else None


def _shape(row: dict) -> dict:
    meta = row.pop("content_json", None) or {}
    row["source"] = meta.get("source", "agent")
    row["content"] = row["content"] or ""
    return row


def write_memory(conn: Conn, org_id: int, agent_id: int, content: str, actor: Actor, *, source: str,
                 if_version: int | None = None) -> dict:
    """Replace the memory, keeping the previous version in memory_revisions. ``if_version`` is
    checked under the row lock; 0 means the agent has no memory yet (the Host's empty memory.md)."""
    check_content(content, "memory")
    if not isinstance(source, str) or not SOURCE.fullmatch(source):
        msg = f"source {shown(source)} must be a short slug such as agent or operator"
        raise Invalid(msg, [msg])
    path = memory_path(org_id, agent_id)
    meta = json.dumps({"source": source})
    row = conn.execute(_SAVE, {"path": path, "if_version": if_version, "agent_id": agent_id, "org_id": org_id,
                               "content": content, "by": actor.name, "json": meta,
                               **actor_params(actor)}).fetchone()
    current, change_id = row.pop("current_version"), row.pop("change_id")
    row.pop("notified")
    if row["id"] is not None:  # an update: its provenance row and event were part of the statement
        announce(org_id=org_id, display_path=path, operation="update", version=row["version"],
                 change_id=change_id)
    else:
        if current is not None or if_version:
            raise _stale(path, current or 0, if_version)
        _agent_org_check(conn, org_id, agent_id)
        row = insert_artifact(conn, kind="memory", org_id=org_id, level="agent", owner_id=agent_id,
                              key="memory.md", display_path=path, content=content, actor=actor,
                              content_json=meta, columns=_COLUMNS)
        if row is None:  # a concurrent first write won
            if if_version is not None:  # ours expected version 0, which no longer holds
                raise _stale(path, 1, if_version)
            return write_memory(conn, org_id, agent_id, content, actor, source=source)
        record_change(conn, org_id=org_id, display_path=path, operation="create", version=row["version"],
                      actor=actor)
    return _shape(row)


def _stale(path: str, current: int, expected: int | None) -> PreconditionFailed:
    return PreconditionFailed(f"{path} is at version {current}, not {expected}: it changed since "
                              "it was read; read it again and reapply the change")


def list_history(conn: Conn, org_id: int, agent_id: int, *, agent_checked: bool = False) -> list[dict]:
    """The archived memory versions, newest first. ``agent_checked``: the caller already knows the
    agent is the organisation's (the Host tree checked the folder), so that query is not repeated."""
    if not agent_checked:
        _agent_org_check(conn, org_id, agent_id)
    rows = conn.execute("SELECT id, version, source, saved_at, saved_by, octet_length(content) AS size"
                        " FROM memory_revisions WHERE agent_id = %s ORDER BY id DESC", (agent_id,)).fetchall()
    for r in rows:
        r["name"] = f"{stamp(r['saved_at'])}-{r['source']}.md"
        r["display_path"] = history_path(org_id, agent_id, r["name"])
    return rows


def read_history(conn: Conn, org_id: int, agent_id: int, name: str) -> dict:
    """One archived version by the file name list_history gives it (<stamp>-<source>.md), with
    content. A stamp without microseconds finds the newest version saved in that second; the row's
    ``name`` is then the version's own name (the tree serves each version under that one name)."""
    m = HISTORY_NAME.fullmatch(name)
    unknown = NotFound(f"unknown file {history_path(org_id, agent_id, name)}: no earlier memory version has that name")
    if not m:
        raise unknown
    stamp_text, source = m.groups()
    fmt = "%Y%m%dT%H%M%S%fZ" if len(stamp_text) > 16 else "%Y%m%dT%H%M%SZ"
    try:
        when = datetime.strptime(stamp_text, fmt).replace(tzinfo=timezone.utc)
    except ValueError:
        raise unknown from None
    # Without microseconds in the name, the newest version saved in that second answers.
    upper = "interval '1 second'" if len(stamp_text) == 16 else "interval '1 microsecond'"
    row = conn.execute(
        f"""SELECT r.id, r.version, r.source, r.saved_at, r.saved_by, r.content FROM memory_revisions r
              JOIN agents a ON a.id = r.agent_id
             WHERE r.agent_id = %s AND a.org_id = %s AND r.source = %s
               AND r.saved_at >= %s AND r.saved_at < %s::timestamptz + {upper}
             ORDER BY r.id DESC LIMIT 1""", (agent_id, org_id, source, when, when)).fetchone()
    if row is None:
        raise unknown
    row["name"] = f"{stamp(row['saved_at'])}-{row['source']}.md"
    row["display_path"] = history_path(org_id, agent_id, row["name"])
    return row


# ---------------------------------------------------------------------------------------------
# Tools


def _memory_result(org_id: int, agent_id: int, row: dict | None, *, content: bool = True) -> dict[str, Any]:
    if row is None:
        return {"display_path": memory_path(org_id, agent_id), "content": "", "version": 0,
                "updated_at": None, "updated_by": None}
    out = {"display_path": row["display_path"]}
    if content:
        out["content"] = row["content"]
    out.update(version=row["version"], updated_at=iso(row["updated_at"]), updated_by=row["updated_by"])
    return out


@tool("memory_get", "Read this agent's memory (private text kept for future runs).")
def memory_get(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    agent = call.agent
    with db.connection() as conn:
        return _memory_result(agent.org_id, agent.id, read_memory(conn, agent.org_id, agent.id))


@tool("memory_write", "Replace this agent's memory with new text; the previous version is archived.",
      content=Arg("string", required=True))
def memory_write(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    agent = call.agent
    with db.transaction() as conn:
        row = write_memory(conn, agent.org_id, agent.id, args["content"], call.actor, source="agent")
    return _memory_result(agent.org_id, agent.id, row, content=False)

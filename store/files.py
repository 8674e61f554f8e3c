"""File-change queries: the provenance strip's history and latest change per path.

    history(conn, org_ids, display_path, *, limit=100, before=None) -> dict
        {changes, has_more}: one page of the history, newest first, of at most ``limit`` changes
        older than the change id ``before`` (the id of the previous page's last change; None for the
        newest page); has_more says whether older changes remain, so a client reads all of it
        page by page. Each change {id, display_path, operation, version, actor_type, actor_id, actor_name,
        run_id, tool_call_id, tool_name, created_at, moved_from}, plus run: {agent_id, guild_id, kind,
        status, routine} for a run-owned change (routine = the schedule's name, or null). moved_from
        is the path a move brought the file from, on the move's change at its new path; else null.
    latest(conn, org_ids, display_paths) -> dict[str, dict | None]
        the newest change per path (recorded: true); a path with no recorded change but a live row
        falls back to the row's last-saved facts (recorded: false, actor_name = the saver's name,
        version, created_at = when it was saved; a collection has no saver's name or version, so
        both are null); None when neither exists.

    moved_to(conn, org_ids, display_path) -> str | None
        where the file last at ``display_path`` lives now, when it was moved (and perhaps moved
        again) and is live at the end of its moves; else None.

    run_steps(conn, org_ids, run_id) -> dict
        a run ({id, agent_id, agent_name, guild_id, kind, status, routine, created_at, updated_at})
        and the changes its tool calls made, oldest first: what Open step on a strip opens.

    removed_notes(conn, org_ids, org_id, *, since, limit=200) -> list[dict]
        notes of ``org_id`` deleted or moved away since ``since`` whose path holds no live note
        now, newest first: {display_path, operation, version, actor_name, created_at, level,
        owner_id, key}. Read from the organisation's newest RECENT_REMOVALS deletes and moves only
        (their own index, newest first, sql/154), so the cost is bounded however much history the
        store holds and however many writes came since; an organisation that deletes more than
        that within ``since`` sees a shorter "recently".

Only rows of ``org_ids`` (the caller's organisations) are read: a path of another organisation
answers as unknown.
"""
from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from store.db import Conn
from store.errors import Invalid, NotFound, StoreError
from store.paths import nfc, parse

MAX_PATHS = 200
MAX_HISTORY = 1000
RECENT_REMOVALS = 5000
_ORG = re.compile(r"^org/([1-9][0-9]{0,18})/")

_SELECT = """
SELECT fc.id, fc.display_path, fc.operation, fc.version, fc.actor_type, fc.actor_id, fc.actor_name,
       fc.run_id, fc.tool_call_id, fc.tool_name, fc.created_at, fc.moved_from,
       r.agent_id AS run_agent_id, ra.guild_id AS run_guild_id, r.kind AS run_kind,
       r.status AS run_status, s.name AS run_routine
  FROM file_changes fc
  LEFT JOIN runs r ON r.id = fc.run_id
  LEFT JOIN agents ra ON ra.id = r.agent_id
  LEFT JOIN schedules s ON s.id = r.schedule_id
"""


def path_org(path: str) -> int | None:
    m = _ORG.match(path)
    return int(m.group(1)) if m else None


def _shape(row: dict) -> dict[str, Any]:
    out = {k: row[k] for k in ("id", "display_path", "operation", "version", "actor_type", "actor_id", "actor_name",
                               "run_id", "tool_call_id", "tool_name", "created_at", "moved_from")}
    if row["run_id"] is not None:
        out["run"] = {"agent_id": row["run_agent_id"], "guild_id": row["run_guild_id"], "kind": row["run_kind"],
                      "status": row["run_status"], "routine": row["run_routine"]}
    return out


def history(conn: Conn, org_ids: Collection[int], display_path: str, *, limit: int = 100,
            before: int | None = None) -> dict[str, Any]:
    path = nfc(display_path.strip().strip("/"))
    if path_org(path) not in org_ids:
        raise NotFound(f"unknown path {display_path}: no file of your organisations has that display path")
    size = min(max(limit, 1), MAX_HISTORY)
    # One row past the page says whether older changes remain, without counting them all.
    rows = conn.execute(_SELECT + " WHERE fc.display_path = %s AND fc.org_id = ANY(%s)"
                        " AND (%s::bigint IS NULL OR fc.id < %s::bigint) ORDER BY fc.id DESC LIMIT %s",
                        (path, list(org_ids), before, before, size + 1)).fetchall()
    return {"changes": [_shape(r) for r in rows[:size]], "has_more": len(rows) > size}


def run_steps(conn: Conn, org_ids: Collection[int], run_id: int, *, limit: int = MAX_HISTORY) -> dict[str, Any]:
    """A run and the changes its tool calls made, oldest first: {run: {id, agent_id, agent_name,
    guild_id, kind, status, routine, created_at, updated_at}, changes, has_more}. What a
    provenance strip's Open step shows. NotFound for a run outside ``org_ids``."""
    run = conn.execute(
        """SELECT r.id, r.agent_id, a.name AS agent_name, a.guild_id, r.kind, r.status, s.name AS routine,
                  r.created_at, r.updated_at
             FROM runs r JOIN agents a ON a.id = r.agent_id LEFT JOIN schedules s ON s.id = r.schedule_id
            WHERE r.id = %s AND r.org_id = ANY(%s)""", (run_id, list(org_ids))).fetchone()
    if run is None:
        raise NotFound(f"unknown run {run_id}")
    size = min(max(limit, 1), MAX_HISTORY)
    rows = conn.execute(_SELECT + " WHERE fc.run_id = %s ORDER BY fc.id LIMIT %s", (run_id, size + 1)).fetchall()
    return {"run": run, "changes": [_shape(r) for r in rows[:size]], "has_more": len(rows) > size}


def latest(conn: Conn, org_ids: Collection[int], display_paths: Sequence[str]) -> dict[str, dict | None]:
    if len(display_paths) > MAX_PATHS:
        msg = f"{len(display_paths)} display paths asked at once; send at most {MAX_PATHS} per call"
        raise Invalid(msg, [msg])
    asked = {p: nfc(p.strip().strip("/")) for p in display_paths}
    paths = sorted({p for p in asked.values() if path_org(p) in org_ids})
    found: dict[str, dict] = {}
    if paths:
        rows = conn.execute(
            "SELECT DISTINCT ON (fc.display_path) " + _SELECT.strip().removeprefix("SELECT")
            + " WHERE fc.display_path = ANY(%s) AND fc.org_id = ANY(%s) ORDER BY fc.display_path, fc.id DESC",
            (paths, list(org_ids))).fetchall()
        found = {r["display_path"]: {**_shape(r), "recorded": True} for r in rows}
    missing = [p for p in paths if p not in found]
    if missing:
        for r in conn.execute(
                """SELECT display_path, version, updated_at, updated_by FROM artifacts
                    WHERE display_path = ANY(%(p)s) AND org_id = ANY(%(o)s) AND deleted_at IS NULL
                   UNION ALL
                   SELECT 'org/' || org_id || '/agents/' || id || '/task.md', task_version, task_updated_at,
                          task_updated_by
                     FROM agents
                    WHERE org_id = ANY(%(o)s) AND task_version > 0
                      AND id = ANY(%(ids)s) AND 'org/' || org_id || '/agents/' || id || '/task.md' = ANY(%(p)s)
                   UNION ALL
                   SELECT 'org/' || org_id || '/collections/' || name, NULL, updated_at, NULL
                     FROM artifact_collections
                    WHERE org_id = ANY(%(o)s) AND deleted_at IS NULL
                      AND 'org/' || org_id || '/collections/' || name = ANY(%(p)s)""",
                {"p": missing, "o": list(org_ids), "ids": _task_agent_ids(missing)}).fetchall():
            found[r["display_path"]] = {
                "id": None, "display_path": r["display_path"], "recorded": False, "operation": None,
                "version": r["version"],
                "actor_type": None, "actor_id": None, "actor_name": r["updated_by"], "run_id": None,
                "tool_call_id": None, "tool_name": None, "created_at": r["updated_at"], "moved_from": None}
    return {original: found.get(norm) for original, norm in asked.items()}


def _task_agent_ids(paths: Sequence[str]) -> list[int]:
    out = []
    for p in paths:
        m = re.match(r"^org/\d+/agents/([1-9][0-9]{0,18})/task\.md$", p)
        if m:
            out.append(int(m.group(1)))
    return out


def removed_notes(conn: Conn, org_ids: Collection[int], org_id: int, *, since: datetime,
                  limit: int = 200) -> list[dict]:
    """Notes deleted or moved away recently (see the module docstring); what the notes browser
    marks as deleted."""
    if org_id not in org_ids:
        raise NotFound("unknown organisation")
    # A path whose newest removal is followed by a live note there (created again, moved back)
    # is not listed; without one, nothing but a removal can have followed.
    rows = conn.execute(
        """WITH recent AS (
             SELECT id, display_path, operation, version, actor_name, created_at FROM file_changes
              WHERE org_id = %(org)s AND operation IN ('delete', 'move')
              ORDER BY id DESC LIMIT %(scan)s)
           SELECT * FROM (
             SELECT DISTINCT ON (display_path) display_path, operation, version, actor_name, created_at, id
               FROM recent
              WHERE created_at >= %(since)s AND display_path LIKE '%%.md'
                AND display_path NOT LIKE '%%/history-archive/%%'
              ORDER BY display_path, id DESC) last
            WHERE NOT EXISTS (SELECT 1 FROM artifacts a WHERE a.display_path = last.display_path
                                                         AND a.deleted_at IS NULL)
            ORDER BY last.id DESC LIMIT %(limit)s""",
        {"org": org_id, "since": since, "limit": limit, "scan": RECENT_REMOVALS}).fetchall()
    out = []
    for r in rows:
        try:
            target = parse(r["display_path"])
        except StoreError:
            continue
        if target.family == "note":
            r.pop("id")
            out.append({**r, "level": target.level, "owner_id": target.owner_id, "key": target.name})
    return out


MOVES_FOLLOWED = 16
# A file's departure from a path: a move's row there, or the delete a move over an existing file
# writes for its source.
_DEPARTURES = ("move", "delete")


def moved_to(conn: Conn, org_ids: Collection[int], display_path: str) -> str | None:
    """Where the file last at ``display_path`` is now, when it left by moves (up to MOVES_FOLLOWED)
    and is still at the end of them; else None (never moved, deleted, or another organisation's).
    For an editor opened before a rename, whose save can then go to the note where it is.

    Names are reused, so each hop is tied to this file: its departure is the path's newest change,
    its arrival the first row after the file's previous change there naming the path in
    moved_from, and it is still where it arrived if no departure from there followed."""
    orgs = list(org_ids)
    departure = conn.execute("SELECT id, operation FROM file_changes WHERE display_path = %s AND org_id = ANY(%s)"
                             " ORDER BY id DESC LIMIT 1", (display_path, orgs)).fetchone()
    if departure is None or departure["operation"] not in _DEPARTURES:
        return None
    # Arrivals are written in the departure's transaction, so their ids are past the file's change
    # before it (ids from one sequence may interleave between transactions, not within this one).
    before = conn.execute("SELECT coalesce(max(id), 0) AS id FROM file_changes WHERE display_path = %s"
                          " AND id < %s", (display_path, departure["id"])).fetchone()["id"]
    path = display_path
    for _ in range(MOVES_FOLLOWED):
        arrival = conn.execute("SELECT id, display_path FROM file_changes WHERE moved_from = %s AND id > %s"
                               " AND org_id = ANY(%s) ORDER BY id LIMIT 1", (path, before, orgs)).fetchone()
        if arrival is None:
            return None   # it left by a delete, not a move
        path = arrival["display_path"]
        left = conn.execute("SELECT id FROM file_changes WHERE display_path = %s AND id > %s"
                            " AND operation = ANY(%s) ORDER BY id LIMIT 1",
                            (path, arrival["id"], list(_DEPARTURES))).fetchone()
        if left is None:
            return path
        before = arrival["id"]
    return None

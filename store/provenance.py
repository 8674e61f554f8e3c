"""File provenance and change events, written inside the writer's transaction.

``record_change`` appends the file_changes row and publishes ``guild.files.changed`` with
pg_notify in the same transaction, so the event is delivered only if the write commits.

Event payload (JSON text on channel ``guild.files.changed``)::

    {"org_id": 1, "display_path": "org/1/guilds/2/plan.md", "operation": "update",
     "version": 3, "change_id": 42}

``operation`` is create, update, delete, move (on the old path; the new path gets create) or clear
(every record of a collection, on the collection path). record_add is announced for the
collection's path while its row is the record's (``event_paths``).

A bulk change of records (clearing, deleting or renaming a collection, a schema change) gives
every record its own row in the same statement as the change (``append_changes``), while its
event is the collection's one ``record_change``: one event per change, not one per record.
"""
from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Literal

from store.access import Actor
from store.db import Conn, after_commit
from store.events import CHANNEL, publish_local

Operation = Literal["create", "update", "delete", "move", "clear"]


# The provenance row and its event as SQL a write can carry in its own statement (store.storage's
# versioned write does): ``change_cte(source)`` appends the row for each row of ``source`` (columns
# org_id, display_path, operation, version) with the actor's named parameters (``actor_params``),
# and ``notify_change(...)`` in the statement's select list sends its event; after the statement,
# ``announce`` tells this process. record_change is the same three steps for one path.
_CHANGE_COLUMNS = ("org_id, display_path, operation, version, actor_type, actor_id, actor_name, run_id,"
                   " tool_call_id, tool_name")


def change_cte(source: str, *, moved_from: bool = False) -> str:
    """``moved_from``: ``source`` has that column too (the path a move came from)."""
    extra = (", moved_from", ", moved_from") if moved_from else ("", "")
    return f"""INSERT INTO file_changes ({_CHANGE_COLUMNS}{extra[0]})
               SELECT org_id, display_path, operation, version, %(actor_type)s, %(actor_id)s, %(actor_name)s,
                      %(run_id)s, %(tool_call_id)s, %(tool_name)s{extra[1]} FROM {source}
               RETURNING id, org_id, display_path, operation, version"""


def notify_change(change: str, display_path: str = "display_path") -> str:
    """A select-list item sending the event of the row the CTE ``change`` appended (one row), for
    ``display_path`` (an SQL expression: the row's own path unless the event names another)."""
    return f"""(SELECT pg_notify(%(channel)s, json_build_object('org_id', org_id, 'display_path', {display_path},
                                                          'operation', operation, 'version', version,
                                                          'change_id', id)::text) FROM {change})"""


def actor_params(actor: Actor) -> dict[str, object]:
    return {"actor_type": actor.type, "actor_id": actor.id, "actor_name": actor.name, "run_id": actor.run_id,
            "tool_call_id": actor.tool_call_id, "tool_name": actor.tool_name, "channel": CHANNEL}


def announce(*, org_id: int, display_path: str, operation: str, version: int | None, change_id: int) -> None:
    """After the commit, tell this process's subscribers (caches, mounts) of a change the
    statement recorded with ``change_cte``."""
    payload = {"org_id": org_id, "display_path": display_path, "operation": operation, "version": version,
               "change_id": change_id}
    after_commit(lambda: publish_local(payload))


def record_change(conn: Conn, *, org_id: int, display_path: str, operation: Operation,
                  version: int | None, actor: Actor, event_paths: Sequence[str] | None = None,
                  moved_from: str | None = None) -> int:
    """Append one provenance row for ``display_path`` and publish its event; returns the change id.
    Call inside the write's transaction. ``event_paths`` are the paths the event is published for
    when they differ from the row's (a new record's row is on its own path, while the specification
    publishes record_add for the collection path); ``moved_from``, on a move's row at its new path,
    the path it came from. The row and the first event are one statement: every write pays for it."""
    events = list(event_paths) if event_paths else [display_path]
    row = conn.execute(
        f"""WITH source AS (SELECT %(org_id)s::bigint AS org_id, %(path)s::text AS display_path,
                                   %(operation)s::text AS operation, %(version)s::int AS version,
                                   %(moved_from)s::text AS moved_from),
                 change AS ({change_cte("source", moved_from=True)})
            SELECT id, {notify_change("change", "%(event_path)s::text")} FROM change""",
        {"org_id": org_id, "path": display_path, "operation": operation, "version": version,
         "moved_from": moved_from, "event_path": events[0], **actor_params(actor)}).fetchone()
    payloads = [{"org_id": org_id, "display_path": path, "operation": operation, "version": version,
                 "change_id": row["id"]} for path in events]
    for payload in payloads[1:]:
        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, json.dumps(payload)))
    after_commit(lambda: [publish_local(p) for p in payloads])
    return row["id"]


def mark_moved_from(conn: Conn, display_path: str, moved_from: str) -> None:
    """Name ``moved_from`` on the change just recorded for ``display_path`` in this transaction (a
    move that wrote its destination as a new version, rather than relocating the row)."""
    conn.execute("""UPDATE file_changes SET moved_from = %s
                     WHERE id = (SELECT id FROM file_changes WHERE display_path = %s ORDER BY id DESC LIMIT 1)""",
                 (moved_from, display_path))


def append_changes(source: str, actor: Actor) -> tuple[str, tuple[object, ...]]:
    """SQL (and its parameters) that appends one provenance row per row of ``source``, a CTE or
    subquery with the columns org_id, display_path, operation and version. Put it after a
    ``WITH source AS (UPDATE ... RETURNING ...)`` so the records change and each gets its row in
    one statement; the parameters follow the CTE's own. No event is sent: the caller announces the
    bulk change once on the collection's path."""
    return (f"""INSERT INTO file_changes (org_id, display_path, operation, version, actor_type, actor_id,
                                          actor_name, run_id, tool_call_id, tool_name)
                SELECT org_id, display_path, operation, version, %s, %s, %s, %s, %s, %s FROM {source}""",
            (actor.type, actor.id, actor.name, actor.run_id, actor.tool_call_id, actor.tool_name))

"""File provenance and change events, written inside the writer's transaction.

``record_change`` appends the file_changes row and publishes ``guild.files.changed`` with
pg_notify in the same transaction, so the event is delivered only if the write commits.

Event payload (JSON text on channel ``guild.files.changed``)::

    {"org_id": 1, "display_path": "org/1/guilds/2/plan.md", "operation": "update",
     "version": 3, "change_id": 42}

``operation`` is create, update, delete, move (on the old path; the new path gets create) or clear
(every record of a collection, on the collection path).
"""
from __future__ import annotations

from typing import Literal

from store.access import Actor
from store.db import Conn, after_commit
from store.events import CHANNEL, publish_local

Operation = Literal["create", "update", "delete", "move", "clear"]


def record_change(conn: Conn, *, org_id: int, display_path: str, operation: Operation,
                  version: int | None, actor: Actor) -> int:
    """Append one provenance row and its event; returns the change id. Call inside the write's
    transaction. One statement: every write pays for it, so it is one round trip."""
    row = conn.execute(
        """WITH change AS (
               INSERT INTO file_changes (org_id, display_path, operation, version, actor_type, actor_id,
                                         actor_name, run_id, tool_call_id, tool_name)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING id, org_id, display_path, operation, version)
           SELECT id, pg_notify(%s, json_build_object('org_id', org_id, 'display_path', display_path,
                                                      'operation', operation, 'version', version,
                                                      'change_id', id)::text)
             FROM change""",
        (org_id, display_path, operation, version, actor.type, actor.id, actor.name, actor.run_id,
         actor.tool_call_id, actor.tool_name, CHANNEL)).fetchone()
    payload = {"org_id": org_id, "display_path": display_path, "operation": operation,
               "version": version, "change_id": row["id"]}
    after_commit(lambda: publish_local(payload))
    return row["id"]

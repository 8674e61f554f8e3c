"""The standing task as a file: task.md in an agent's folder (store.tasks)."""
from __future__ import annotations

from typing import Any

from store import tasks
from store.access import Actor
from store.db import Conn
from store.errors import Forbidden, Invalid, PreconditionFailed, StoreError, TooLarge
from store.families.artifacts import hidden_clause
from store.families.base import MARKDOWN, Family, as_bytes
from store.layout import Folder
from store.paths import task_path


def reserved_refusal(name: str, *, moving: bool) -> Forbidden:
    """task.md and memory.md stay where they are: they can be written, never deleted or moved."""
    if moving:
        return Forbidden(f"{name} is reserved at the agent root and cannot be moved; "
                         "copy its content to a note instead")
    return Forbidden(f"{name} is reserved at the agent root and cannot be deleted; "
                     "write new content to it instead")


class Task(Family):
    kind = "task"
    content_type = MARKDOWN
    writable = cacheable = True
    group = "md"
    fixed_name = "task.md"
    raises = (Forbidden, Invalid, TooLarge, PreconditionFailed)

    def _row(self, conn: Conn, folder: Folder, *, content: bool, hidden_for: int | None = None) -> dict | None:
        hidden, params = hidden_clause(hidden_for, task_path(folder.org_id or 0, folder.owner_id or 0))
        text = ", task AS content" if content else ""
        sql = (f"SELECT 'task.md' AS name, octet_length(task) AS size, task_version AS version, 't' || id AS tag,"
               f" created_at, task_updated_at AS updated_at{text}{hidden} FROM agents WHERE id = %s AND org_id = %s")
        row: dict[str, Any] | None = conn.execute(sql, [*params, folder.owner_id, folder.org_id]).fetchone()
        if row is None or row.pop("hidden", False):
            return None
        return row

    def list(self, conn: Conn, folder: Folder) -> list[dict]:
        row = self._row(conn, folder, content=False)
        return [row] if row else []

    def read(self, conn: Conn, folder: Folder, name: str, *, hidden_for: int | None = None) -> dict | None:
        return as_bytes(self._row(conn, folder, content=True, hidden_for=hidden_for))

    def write(self, conn: Conn, folder: Folder, name: str, text: str, actor: Actor, *,
              if_version: int | None = None) -> dict | None:
        tasks.write_task(conn, folder.org_id or 0, folder.owner_id or 0, text, actor, if_version=if_version)

    def removal_refusal(self, folder: Folder, name: str, *, moving: bool) -> StoreError | None:
        return reserved_refusal(name, moving=moving)

"""The standing task as a file: task.md in an agent's folder (store.tasks)."""
from __future__ import annotations


from store import tasks
from store.access import Actor
from store.db import Conn
from store.families.agent_root import AgentRootFile
from store.families.artifacts import hidden_clause
from store.families.base import MARKDOWN
from store.layout import Folder
from store.paths import task_path


class Task(AgentRootFile):
    kind = "task"
    content_type = MARKDOWN
    writable = cacheable = True
    group = "md"
    fixed_name = "task.md"

    def _row(self, conn: Conn, folder: Folder, *, content: bool, hidden_for: int | None = None) -> dict | None:
        hidden, params = hidden_clause(hidden_for, task_path(folder.org_id or 0, folder.owner_id or 0))
        text = ", task AS content" if content else ""
        sql = (f"SELECT 'task.md' AS name, octet_length(task) AS size, task_version AS version, 't' || id AS tag,"
               f" created_at, task_updated_at AS updated_at{text}{hidden} FROM agents WHERE id = %s AND org_id = %s")
        return self._one(conn, sql, params, folder)

    def write(self, conn: Conn, folder: Folder, name: str, text: str, actor: Actor, *,
              if_version: int | None = None) -> dict | None:
        tasks.write_task(conn, folder.org_id or 0, folder.owner_id or 0, text, actor, if_version=if_version)

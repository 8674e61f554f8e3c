"""The agent's memory as a file: memory.md in an agent's folder (store.memory). An agent without a
memory yet shows an empty version-0 memory.md, which its first write creates."""
from __future__ import annotations


from store import memory
from store.access import Actor
from store.db import Conn
from store.families.agent_root import AgentRootFile
from store.families.artifacts import file_row, hidden_clause
from store.families.base import MARKDOWN
from store.layout import Folder
from store.paths import memory_path

OPERATOR_SOURCE = "operator"  # what memory's history-archive names an edit made through the tree


class Memory(AgentRootFile):
    kind = "memory"
    content_type = MARKDOWN
    writable = cacheable = True
    group = "md"
    fixed_name = "memory.md"

    def _row(self, conn: Conn, folder: Folder, *, content: bool, hidden_for: int | None = None) -> dict | None:
        hidden, params = hidden_clause(hidden_for, memory_path(folder.org_id or 0, folder.owner_id or 0))
        text = ", coalesce(m.content, '') AS content" if content else ""
        sql = ("SELECT 'memory.md' AS name, coalesce(octet_length(m.content), 0) AS size,"
               " coalesce(m.version, 0) AS version, coalesce('a' || m.id, 'm' || a.id) AS tag,"
               " coalesce(m.created_at, a.created_at) AS created_at,"
               f" coalesce(m.updated_at, a.created_at) AS updated_at{text}{hidden}"
               " FROM agents a LEFT JOIN artifacts m ON m.agent_id = a.id AND m.kind = 'memory'"
               " AND m.deleted_at IS NULL WHERE a.id = %s AND a.org_id = %s")
        return self._one(conn, sql, params, folder)

    def write(self, conn: Conn, folder: Folder, name: str, text: str, actor: Actor, *,
              if_version: int | None = None) -> dict | None:
        row = memory.write_memory(conn, folder.org_id or 0, folder.owner_id or 0, text, actor,
                                  source=OPERATOR_SOURCE, if_version=if_version)
        return file_row(row, "memory.md", len(text.encode("utf-8")))

"""Earlier memory versions as files: history-archive/<stamp>-<source>.md in an agent's folder,
read-only. Names, order and contents are store.memory's (list_history, read_history)."""
from __future__ import annotations

from store import memory
from store.db import Conn
from store.errors import NotFound
from store.families.base import MARKDOWN, Family
from store.layout import Folder


def _file(row: dict) -> dict:
    return {"name": row["name"], "size": row["size"], "version": row["version"], "tag": f"h{row['id']}",
            "created_at": row["saved_at"], "updated_at": row["saved_at"]}


class History(Family):
    kind = "history"
    content_type = MARKDOWN
    cacheable = True
    group = "md"

    def list(self, conn: Conn, folder: Folder) -> list[dict]:
        # Family.list runs after the tree found the folder (HostTree._children): the agent is known.
        return [_file(r) for r in memory.list_history(conn, folder.org_id or 0, folder.owner_id or 0,
                                                      agent_checked=True)]

    def read(self, conn: Conn, folder: Folder, name: str, *, hidden_for: int | None = None) -> dict | None:
        try:
            row = memory.read_history(conn, folder.org_id or 0, folder.owner_id or 0, name)
        except NotFound:
            return None
        if row["name"] != name:
            return None  # a version has one name in the tree: the one its listing shows
        content = row["content"].encode("utf-8")
        return {**_file({**row, "size": len(content)}), "content": content}

    def read_only_sentence(self, folder: Folder) -> str:
        return (f"/{folder.path} is read-only: it keeps earlier versions of memory.md; "
                "write memory.md to change the memory")

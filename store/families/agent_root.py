"""What task.md and memory.md share: one file at an agent's root, always listed (an agent without
one yet shows an empty version 0), writable, and never deleted or moved."""
from __future__ import annotations

from typing import Any

from store.db import Conn
from store.errors import Forbidden, StoreError
from store.families.base import Family, as_bytes
from store.layout import Folder


class AgentRootFile(Family):
    """A family of one fixed file per agent; a subclass says how its one row is read (``_row``)
    and written."""

    def _row(self, conn: Conn, folder: Folder, *, content: bool, hidden_for: int | None = None) -> dict | None:
        raise NotImplementedError

    @staticmethod
    def _one(conn: Conn, sql: str, hidden_params: list, folder: Folder) -> dict | None:
        """The one row of ``sql`` (its last parameters: the agent's id, then its organisation's),
        or None when that agent is not the organisation's or a rename-away save hides the file
        (the ``hidden`` column of store.families.artifacts.hidden_clause)."""
        row: dict[str, Any] | None = conn.execute(sql, [*hidden_params, folder.owner_id, folder.org_id]).fetchone()
        if row is None or row.pop("hidden", False):
            return None
        return row

    def list(self, conn: Conn, folder: Folder) -> list[dict]:
        row = self._row(conn, folder, content=False)
        return [row] if row else []

    def read(self, conn: Conn, folder: Folder, name: str, *, hidden_for: int | None = None) -> dict | None:
        return as_bytes(self._row(conn, folder, content=True, hidden_for=hidden_for))

    def removal_refusal(self, folder: Folder, name: str, *, moving: bool) -> StoreError | None:
        if moving:
            return Forbidden(f"{name} is reserved at the agent root and cannot be moved; "
                             "copy its content to a note instead")
        return Forbidden(f"{name} is reserved at the agent root and cannot be deleted; "
                         "write new content to it instead")

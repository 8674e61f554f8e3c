"""The one interface every kind of file in the Host tree implements.

The Host tree (store.host) knows paths, folders, side files and conditions; what a file *is* it
asks the file's family: which names it takes, its rows, its bytes, how it is written, deleted and
renamed, and its refusals. A family's rules (caps, reserved keys, embeds, versions, provenance)
stay in its store module (store.notes, store.tasks, store.memory, store.scripts, store.records,
store.collections); a family object translates the tree's terms (a folder and a name) into them.

Rows: ``list`` and ``read`` return dicts with name, size, version, tag (the ETag's stem),
created_at and updated_at; ``read`` adds content (UTF-8 bytes).
"""
from __future__ import annotations

from typing import Any, ClassVar

from store.access import Actor
from store.db import Conn
from store.errors import ReadOnly, StoreError
from store.layout import Folder

MARKDOWN = "text/markdown; charset=utf-8"
PYTHON = "text/x-python; charset=utf-8"
JSON = "application/json"


class Family:
    """A kind of file. Subclasses set the class attributes and override what they support; the
    defaults describe a read-only file that cannot be written, deleted or renamed."""

    kind: ClassVar[str]                 # Node.kind, what the front ends see ("note", "record", ...)
    content_type: ClassVar[str]
    writable: ClassVar[bool] = False
    deletable: ClassVar[bool] = False
    # Every change publishes an event on the file's own path, so the content cache may keep it.
    cacheable: ClassVar[bool] = False
    # A listing brings the bytes along (store.storage.contents) when the cache asks for them.
    prefetch: ClassVar[bool] = False
    # Files of one group can become one another by a move or a copy ("md": Markdown files).
    group: ClassVar[str] = ""
    # The one file of its folder this family is (task.md), or None: every other name.
    fixed_name: ClassVar[str | None] = None
    # write() is one statement that carries its provenance row and event (store.storage's
    # save_artifact), so it needs no transaction around it (Database.single_write).
    single_statement_write: ClassVar[bool] = False

    def name_problem(self, folder: Folder, name: str) -> str | None:
        """Why ``name`` cannot be a file of this family in ``folder`` (a sentence), or None."""
        return None

    def new_name_problem(self, folder: Folder, name: str) -> str | None:
        """Why a new file of this family may not take ``name`` (a sentence), or None. Unlike
        ``name_problem``, a file that already holds the name keeps it (a note named so before the
        rule can still be saved), so the tree looks for one only when there is a problem."""
        return None

    def list(self, conn: Conn, folder: Folder) -> list[dict]:
        """The family's files in ``folder``, without content. One query; the tree has already
        found the folder (it exists, and it is this user's organisation's)."""
        raise NotImplementedError

    def read(self, conn: Conn, folder: Folder, name: str, *, hidden_for: int | None = None) -> dict | None:
        """The file's row with its content, or None. One query. With ``hidden_for`` (a user id),
        a file that user moved away in a rename-away save (store.scratch.hide) is None too."""
        raise NotImplementedError

    def stat(self, conn: Conn, folder: Folder, name: str, *, hidden_for: int | None = None) -> dict | None:
        """As ``read``: a stat is nearly always followed by a read, and one query brings both."""
        return self.read(conn, folder, name, hidden_for=hidden_for)

    def write(self, conn: Conn, folder: Folder, name: str, text: str, actor: Actor, *,
              if_version: int | None = None) -> dict | None:
        """One new version; with ``if_version``, only if the file is still at that version. Returns
        the written file's row (as ``list`` gives it) when the write knows it, else None."""
        raise ReadOnly(self.read_only_sentence(folder))

    def write_first(self, conn: Conn, folder: Folder, name: str, text: str, actor: Actor, *,
                    hidden_for: int, honour_leases: bool) -> dict:
        """An unconditional write() with no read before it, for a ``single_statement_write``
        family: the statement itself finds the folder (its foreign key: NotFound, nothing
        written) and writes nothing while a rename-away save of user ``hidden_for`` hides the
        path (store.storage.Hidden) or, with ``honour_leases``, while a lease covers it
        (Locked). Returns the written file's row; a created file is at version 1, a replaced
        one above."""
        raise NotImplementedError

    def removal_refusal(self, folder: Folder, name: str, *, moving: bool) -> StoreError | None:
        """Why a file of this family cannot be deleted (or moved away), or None when it can."""
        return None if self.deletable else ReadOnly(self.read_only_sentence(folder))

    def delete(self, conn: Conn, folder: Folder, name: str, actor: Actor) -> None:
        raise self.removal_refusal(folder, name, moving=False) or ReadOnly(self.read_only_sentence(folder))

    def rename(self, conn: Conn, src: Folder, src_name: str, dst: Folder, dst_name: str, actor: Actor, *,
               replace: bool, onto: bool, text: str) -> bool:
        """Move a file of this family to another name of this family in one step, keeping what
        the family keeps (identity, history); False when it cannot, and the tree then writes the
        destination and deletes the source. ``onto``: the destination holds a file already (or
        one this user moved away in a rename-away save); ``text`` is the source's content."""
        return False

    def read_only_sentence(self, folder: Folder) -> str:
        return f"/{folder.path} is read-only"


def as_bytes(row: dict[str, Any] | None) -> dict | None:
    """The row with its content as UTF-8 bytes (the tree serves bytes)."""
    if row is None:
        return None
    content = row.get("content")
    return {**row, "content": content.encode("utf-8") if isinstance(content, str) else content}

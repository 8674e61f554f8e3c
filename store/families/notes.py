"""Notes as files: <key>.md in an organisation's, a guild's or an agent's folder (store.notes)."""
from __future__ import annotations

from store import notes
from store.access import Actor
from store.db import Conn
from store.families.artifacts import FILE_COLUMNS, file_row, read_file
from store.families.base import MARKDOWN, Family, as_bytes
from store.layout import Folder
from store.notes import NoteRef
from store.paths import key_problem, new_note_problem, nfc


def ref(folder: Folder, name: str) -> NoteRef:
    """The note ``name`` of a note folder: the folder kind (org, guild, agent) is its level."""
    return NoteRef(folder.org_id or 0, folder.kind, folder.owner_id, name)  # type: ignore[arg-type]


class Notes(Family):
    kind = "note"
    content_type = MARKDOWN
    writable = deletable = cacheable = prefetch = True
    single_statement_write = True  # store.storage.save_artifact
    group = "md"

    def name_problem(self, folder: Folder, name: str) -> str | None:
        problem = key_problem(name)
        if problem:
            return (f"/{folder.path}/{name} cannot be a note: {problem}. Only Markdown notes (.md) live here; "
                    "other files are refused")
        return None

    def new_name_problem(self, folder: Folder, name: str) -> str | None:
        return new_note_problem(nfc(name), folder.kind)  # type: ignore[arg-type]

    def list(self, conn: Conn, folder: Folder) -> list[dict]:
        level = folder.kind
        guild, agent = notes.owner_columns(level, folder.owner_id)
        return conn.execute(
            f"SELECT {FILE_COLUMNS} FROM artifacts WHERE org_id = %(org_id)s AND {notes.owner_where(level)}"
            " AND kind = 'note' AND deleted_at IS NULL ORDER BY key",
            {"org_id": folder.org_id, "guild_id": guild, "agent_id": agent}).fetchall()

    def read(self, conn: Conn, folder: Folder, name: str, *, hidden_for: int | None = None) -> dict | None:
        return as_bytes(read_file(conn, ref(folder, name).path, "note", hidden_for))

    def write(self, conn: Conn, folder: Folder, name: str, text: str, actor: Actor, *,
              if_version: int | None = None) -> dict | None:
        r = ref(folder, name)
        row = notes.write_note(conn, r.org_id, r.level, r.owner_id, r.key, text, actor, if_version=if_version)
        return file_row(row, row["key"], len(text.encode("utf-8")))

    def write_first(self, conn: Conn, folder: Folder, name: str, text: str, actor: Actor, *,
                    hidden_for: int, honour_leases: bool) -> dict:
        r = ref(folder, name)
        row = notes.write_note(conn, r.org_id, r.level, r.owner_id, r.key, text, actor, hidden_for=hidden_for,
                               honour_leases=honour_leases)
        return file_row(row, row["key"], len(text.encode("utf-8")))

    def delete(self, conn: Conn, folder: Folder, name: str, actor: Actor) -> None:
        r = ref(folder, name)
        notes.delete_note(conn, r.org_id, r.level, r.owner_id, r.key, actor)

    def rename(self, conn: Conn, src: Folder, src_name: str, dst: Folder, dst_name: str, actor: Actor, *,
               replace: bool, onto: bool, text: str) -> bool:
        if onto:
            # A note moved over another note (an editor saving through a temporary .md name) is
            # the destination's next version: its identity, history and embeds continue, and the
            # source ends with a 'delete' (refused, like any delete, while a task embeds it).
            self.delete(conn, src, src_name, actor)
            self.write(conn, dst, dst_name, text, actor)
        else:
            # A rename keeps the moved note's identity; a note it replaces goes (store.notes applies
            # the embed rule to both).
            notes.move_note(conn, ref(src, src_name), ref(dst, dst_name), actor, replace=replace)
        return True

"""Scripts as files: <name>.py in an agent's scripts/ folder (store.scripts)."""
from __future__ import annotations

from store import scripts
from store.access import Actor
from store.db import Conn
from store.families.artifacts import FILE_COLUMNS, file_row, read_file
from store.families.base import PYTHON, Family, as_bytes
from store.layout import Folder
from store.paths import SCRIPT_NAME, script_path


class Scripts(Family):
    kind = "script"
    content_type = PYTHON
    writable = deletable = cacheable = prefetch = True
    single_statement_write = True  # store.storage.save_artifact
    group = "py"

    def name_problem(self, folder: Folder, name: str) -> str | None:
        if SCRIPT_NAME.fullmatch(name):
            return None
        return (f"/{folder.path}/{name} cannot be a script: a script is a Python file name such as "
                "fetch_prices.py (letters, digits, _ . -, ending in .py)")

    def list(self, conn: Conn, folder: Folder) -> list[dict]:
        return conn.execute(f"SELECT {FILE_COLUMNS} FROM artifacts WHERE org_id = %s AND level = 'agent'"
                            " AND agent_id = %s AND kind = 'script' AND deleted_at IS NULL ORDER BY key",
                            (folder.org_id, folder.owner_id)).fetchall()

    def read(self, conn: Conn, folder: Folder, name: str, *, hidden_for: int | None = None) -> dict | None:
        path = script_path(folder.org_id or 0, folder.owner_id or 0, name)
        return as_bytes(read_file(conn, path, "script", hidden_for))

    def write(self, conn: Conn, folder: Folder, name: str, text: str, actor: Actor, *,
              if_version: int | None = None) -> dict | None:
        row = scripts.write_script(conn, folder.org_id or 0, folder.owner_id or 0, name, text, actor,
                                   if_version=if_version)
        return file_row(row, row["key"], len(text.encode("utf-8")))

    def write_first(self, conn: Conn, folder: Folder, name: str, text: str, actor: Actor, *,
                    hidden_for: int, honour_leases: bool) -> dict:
        row = scripts.write_script(conn, folder.org_id or 0, folder.owner_id or 0, name, text, actor,
                                   hidden_for=hidden_for, honour_leases=honour_leases)
        return file_row(row, row["key"], len(text.encode("utf-8")))

    def delete(self, conn: Conn, folder: Folder, name: str, actor: Actor) -> None:
        scripts.delete_script(conn, folder.org_id or 0, folder.owner_id or 0, name, actor)

    def rename(self, conn: Conn, src: Folder, src_name: str, dst: Folder, dst_name: str, actor: Actor, *,
               replace: bool, onto: bool, text: str) -> bool:
        if onto or src.owner_id != dst.owner_id:
            # Onto a script (an editor's save through a temporary name), as for notes: the
            # destination's next version, so its version never goes back and an ETag never names
            # two contents; the source ends with a 'delete'. Another agent's scripts: a new
            # script there, this one deleted.
            return False
        scripts.move_script(conn, src.org_id or 0, src.owner_id or 0, src_name, dst_name, actor, replace=replace)
        return True

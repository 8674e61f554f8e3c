"""Notes and scripts as files: their rows in the artifacts table, in the tree's terms."""
from __future__ import annotations

from store import scratch
from store.db import Conn

FILE_COLUMNS = ("key AS name, octet_length(content) AS size, version, 'a' || id AS tag, created_at,"
                " updated_at")


def file_row(row: dict, name: str, size: int) -> dict:
    """A written artifact (store.storage's NOTE_COLUMNS row) as the file row FILE_COLUMNS reads."""
    return {"name": name, "size": size, "version": row["version"], "tag": f"a{row['id']}",
            "created_at": row["created_at"], "updated_at": row["updated_at"]}


def hidden_clause(hidden_for: int | None, path: str) -> tuple[str, list]:
    """The select-list item (and its parameters) that says whether user ``hidden_for`` moved
    ``path`` away in a rename-away save: decided in the lookup's own query."""
    if not hidden_for:
        return "", []
    return f", {scratch.HIDDEN_SQL} AS hidden", [hidden_for, path]


def read_file(conn: Conn, path: str, kind: str, hidden_for: int | None) -> dict | None:
    """The live artifact of ``kind`` at ``path`` with its content, or None (also when it is
    hidden from ``hidden_for``). One query."""
    hidden, params = hidden_clause(hidden_for, path)
    row = conn.execute(f"SELECT {FILE_COLUMNS}, content{hidden} FROM artifacts WHERE display_path = %s"
                       " AND kind = %s AND deleted_at IS NULL", [*params, path, kind]).fetchone()
    if row is None or row.pop("hidden", False):
        return None
    return row


def contents(conn: Conn, paths: list[str]) -> dict[str, tuple[int, bytes]]:
    """{display path: (version, UTF-8 bytes)} of the live notes and scripts among ``paths``. One query."""
    rows = conn.execute("SELECT display_path, version, content FROM artifacts"
                        " WHERE display_path = ANY(%s) AND deleted_at IS NULL AND kind IN ('note', 'script')",
                        (paths,)).fetchall()
    return {r["display_path"]: (r["version"], (r["content"] or "").encode("utf-8")) for r in rows}

"""Dead properties (WebDAV PROPPATCH: Windows' file times, Finder's tags...), keyed by Host tree path.

Protocol-neutral: a property is a Clark name '{namespace}local' and its value as text (WebDAV keeps
the XML of the value). They live in PostgreSQL so that every gateway process sees the same, and the
Host tree moves or clears them with the node in the node's own transaction.
"""
from __future__ import annotations

from store.db import Conn


def _like_prefix(path: str) -> str:
    escaped = path.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "/%"


def get_all(conn: Conn, path: str) -> dict[str, str]:
    rows = conn.execute("SELECT name, value FROM path_properties WHERE path = %s ORDER BY name", (path,)).fetchall()
    return {r["name"]: r["value"] for r in rows}


def get_children(conn: Conn, folder: str) -> dict[str, dict[str, str]]:
    """Every property of the folder itself and of each path directly in it, in one query: a
    listing asks for all of them at once."""
    start = len(folder) + 2 if folder else 1
    rows = conn.execute("SELECT path, name, value FROM path_properties WHERE path = %s"
                        " OR (path LIKE %s AND strpos(substr(path, %s), '/') = 0)",
                        (folder, _like_prefix(folder) if folder else "%", start)).fetchall()
    out: dict[str, dict[str, str]] = {}
    for r in rows:
        out.setdefault(r["path"], {})[r["name"]] = r["value"]
    return out


def set(conn: Conn, path: str, name: str, value: str) -> None:  # noqa: A001 - the verb is the point
    conn.execute("""INSERT INTO path_properties (path, name, value) VALUES (%s, %s, %s)
                    ON CONFLICT (path, name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()""",
                 (path, name, value))


def remove(conn: Conn, path: str, name: str) -> None:
    conn.execute("DELETE FROM path_properties WHERE path = %s AND name = %s", (path, name))


def clear(conn: Conn, path: str, *, with_children: bool = False) -> None:
    if with_children:
        conn.execute("DELETE FROM path_properties WHERE path = %s OR path LIKE %s", (path, _like_prefix(path)))
    else:
        conn.execute("DELETE FROM path_properties WHERE path = %s", (path,))


def copy(conn: Conn, src: str, dst: str) -> None:
    conn.execute("""INSERT INTO path_properties (path, name, value)
                    SELECT %s, name, value FROM path_properties WHERE path = %s
                    ON CONFLICT (path, name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()""",
                 (dst, src))


def move(conn: Conn, src: str, dst: str) -> None:
    """The properties go with the node; the target's own are replaced."""
    conn.execute("DELETE FROM path_properties WHERE path = %s", (dst,))
    conn.execute("UPDATE path_properties SET path = %s, updated_at = now() WHERE path = %s", (dst, src))

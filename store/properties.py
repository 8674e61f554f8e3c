"""Dead properties (WebDAV PROPPATCH: Windows' file times, Finder's tags...), keyed by Host tree path.

Protocol-neutral: a property is a Clark name '{namespace}local' and its value as text (WebDAV keeps
the XML of the value). They live in PostgreSQL so that every gateway process sees the same, and the
Host tree moves or clears them with the node in the node's own transaction.

Which paths take them, and how much, is decided here: the root and org/ are shared by every
organisation (a property there would be read by all of them), so properties start at org/<id>;
read-only nodes take none; values and counts are capped, because every PROPFIND allprop of a
folder reads all of its members' properties.
"""
from __future__ import annotations

from collections.abc import Iterable

from store.db import Conn, like_escape
from store.errors import Forbidden, Invalid, LimitReached, ReadOnly, TooLarge

MAX_VALUE_BYTES = 4096   # the value as stored: the property's XML, UTF-8
MAX_NAME_CHARS = 512
MAX_PER_PATH = 64


def _like_prefix(path: str) -> str:
    """Every path below ``path``, as a LIKE pattern."""
    return like_escape(path) + "/%"


def takes_properties(path: str) -> bool:
    """Whether a tree path may hold dead properties: org/<id> and below, never the shared layout."""
    parts = path.strip("/").split("/")
    return len(parts) >= 2 and parts[0] == "org" and parts[1] != ""


def check_path(path: str, *, read_only: bool = False) -> None:
    """Refuse, with the sentence a client shows, a path that takes no properties."""
    shown = "/" + path.strip("/")
    if not takes_properties(path):
        raise Forbidden(f"{shown} is shared by every organisation, so it takes no properties; "
                        "set properties on files and folders inside org/<org_id>/")
    if read_only:
        raise ReadOnly(f"{shown} is read-only, so it takes no properties; "
                       "set properties on notes and on the organisation, guild and agent folders")


def check_set(conn: Conn, path: str, name: str, value: str, *, pending: Iterable[str] = ()) -> None:
    """Refuse a value or a name over its cap, or a new name beyond MAX_PER_PATH on ``path``;
    ``pending`` are names this same request is about to add (checked before any is written)."""
    check_path(path)
    if len(name) > MAX_NAME_CHARS:
        msg = f"a property name is at most {MAX_NAME_CHARS} characters; got {len(name)}"
        raise Invalid(msg, [msg])
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_VALUE_BYTES:
        raise TooLarge(f"the value of property {name} is {size} bytes; a property holds at most "
                       f"{MAX_VALUE_BYTES} bytes")
    # Two requests adding names to one path at once must not both pass the count: serialise them.
    conn.execute("SELECT pg_advisory_xact_lock(hashtext('path_properties'), hashtext(%s))", (path,))
    names = {r["name"] for r in conn.execute("SELECT name FROM path_properties WHERE path = %s", (path,))}
    names.update(pending)
    if name not in names and len(names) >= MAX_PER_PATH:
        raise LimitReached(f"/{path.strip('/')} already holds {len(names)} properties, the most one file or "
                           f"folder can hold ({MAX_PER_PATH}); remove one before adding {name}")


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
    check_set(conn, path, name, value)
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

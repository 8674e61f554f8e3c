"""Dead properties (WebDAV PROPPATCH: Windows' file times, Finder's tags...), keyed by Host tree path.

Protocol-neutral: a property is a Clark name '{namespace}local' and its value as text (WebDAV keeps
the XML of the value). They live in PostgreSQL so that every gateway process sees the same, and the
Host tree moves or clears them with the node in the node's own transaction.

Whose they are follows the file's: a note's or a folder's are everyone's who sees it
(path_properties), a side file's (store.host.is_side_path: ._x, .DS_Store, x.swp...) are its user's,
as the side file is (store.scratch). So every function takes the caller's ``user_id``, and the
path decides: a side path's properties are that user's row of side_file_properties (sql/151),
which hangs off the user's side file and ends with it (a DELETE, a move away, the purge of an
expired one), and are read only while the file is live; without a user a side path has none.

Which paths take them, and how much, is decided here: the root and org/ are shared by every
organisation (a property there would be read by all of them), so properties start at org/<id>;
read-only nodes take none; values and counts are capped, because every PROPFIND allprop of a
folder reads all of its members' properties.
"""
from __future__ import annotations

from collections.abc import Iterable

from store.db import Conn, like_escape
from store.errors import Forbidden, Invalid, LimitReached, NotFound, ReadOnly, StoreError, TooLarge

MAX_VALUE_BYTES = 4096   # the value as stored: the property's XML, UTF-8
MAX_NAME_CHARS = 512
MAX_PER_PATH = 64


def _side(path: str) -> bool:
    from store.host import is_side_path  # (host imports this module)
    try:
        return is_side_path(path)
    except StoreError:  # not a path of the tree ('..'): no side file's either
        return False


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


def check_set(conn: Conn, path: str, name: str, value: str, *, user_id: int | None = None,
              pending: Iterable[str] = ()) -> None:
    """Refuse a value or a name over its cap, or a new name beyond MAX_PER_PATH on ``path`` (for a
    side path: on ``user_id``'s side file); ``pending`` are names this same request is about to
    add (checked before any is written)."""
    check_path(path)
    if len(name) > MAX_NAME_CHARS:
        msg = f"a property name is at most {MAX_NAME_CHARS} characters; got {len(name)}"
        raise Invalid(msg, [msg])
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > MAX_VALUE_BYTES:
        raise TooLarge(f"the value of property {name} is {size} bytes; a property holds at most "
                       f"{MAX_VALUE_BYTES} bytes")
    # Two requests adding names to one path at once must not both pass the count: serialise them.
    if _side(path):
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('side_file_properties'), hashtext(%s || '/' || %s))",
                     (str(user_id), path))
        names = {n for n in get_all(conn, path, user_id=user_id)}  # (set is this module's verb)
    else:
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('path_properties'), hashtext(%s))", (path,))
        names = {r["name"] for r in conn.execute("SELECT name FROM path_properties WHERE path = %s", (path,))}
    names.update(pending)
    if name not in names and len(names) >= MAX_PER_PATH:
        raise LimitReached(f"/{path.strip('/')} already holds {len(names)} properties, the most one file or "
                           f"folder can hold ({MAX_PER_PATH}); remove one before adding {name}")


# A side file's properties, while the side file is live (an expired one is gone for its user
# before the purge that ends its rows: store.scratch.get).
_SIDE_LIVE = """SELECT p.path, p.name, p.value FROM side_file_properties p
                 JOIN scratch_files f ON f.user_id = p.user_id AND f.path = p.path AND f.expires_at > now()"""


def get_all(conn: Conn, path: str, *, user_id: int | None = None) -> dict[str, str]:
    if _side(path):
        rows = conn.execute(f"{_SIDE_LIVE} WHERE p.user_id = %s AND p.path = %s ORDER BY p.name",
                            (user_id, path)).fetchall()
    else:
        rows = conn.execute("SELECT name, value FROM path_properties WHERE path = %s ORDER BY name",
                            (path,)).fetchall()
    return {r["name"]: r["value"] for r in rows}


def get_children(conn: Conn, folder: str, *, user_id: int | None = None) -> dict[str, dict[str, str]]:
    """Every property of the folder itself and of each path directly in it, in one query: a
    listing asks for all of them at once. Of the side files in it, ``user_id``'s own alone."""
    start = len(folder) + 2 if folder else 1
    rows = conn.execute("SELECT path, name, value FROM path_properties WHERE path = %s"
                        " OR (path LIKE %s AND strpos(substr(path, %s), '/') = 0)"
                        f" UNION ALL SELECT q.* FROM ({_SIDE_LIVE} WHERE f.user_id = %s AND f.parent = %s) AS q",
                        (folder, _like_prefix(folder) if folder else "%", start, user_id, folder)).fetchall()
    out: dict[str, dict[str, str]] = {}
    for r in rows:
        # (path_properties holds no side path: set, copy and move send those to their user's
        # table, and sql/151 dropped the rows from before; no per-row test on this listing path)
        out.setdefault(r["path"], {})[r["name"]] = r["value"]
    return out


def set(conn: Conn, path: str, name: str, value: str, *, user_id: int | None = None) -> None:  # noqa: A001 - the verb is the point
    check_set(conn, path, name, value, user_id=user_id)
    if _side(path):
        row = conn.execute("""INSERT INTO side_file_properties (user_id, path, name, value)
                              SELECT user_id, path, %s, %s FROM scratch_files
                               WHERE user_id = %s AND path = %s AND expires_at > now()
                              ON CONFLICT (user_id, path, name) DO UPDATE
                                 SET value = EXCLUDED.value, updated_at = now()
                              RETURNING 1""", (name, value, user_id, path)).fetchone()
        if row is None:
            raise NotFound(f"unknown file /{path.strip('/')}")
        return
    conn.execute("""INSERT INTO path_properties (path, name, value) VALUES (%s, %s, %s)
                    ON CONFLICT (path, name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()""",
                 (path, name, value))


def remove(conn: Conn, path: str, name: str, *, user_id: int | None = None) -> None:
    if _side(path):
        conn.execute("DELETE FROM side_file_properties WHERE user_id = %s AND path = %s AND name = %s",
                     (user_id, path, name))
    else:
        conn.execute("DELETE FROM path_properties WHERE path = %s AND name = %s", (path, name))


def clear(conn: Conn, path: str, *, user_id: int | None = None, with_children: bool = False) -> None:
    """``path``'s properties (and, ``with_children``, those of the shared paths below it). A side
    file's end with it without this (sql/151's foreign key): this is for a side file that stays."""
    if _side(path):
        conn.execute("DELETE FROM side_file_properties WHERE user_id = %s AND path = %s", (user_id, path))
    elif with_children:
        conn.execute("DELETE FROM path_properties WHERE path = %s OR path LIKE %s", (path, _like_prefix(path)))
    else:
        conn.execute("DELETE FROM path_properties WHERE path = %s", (path,))


def copy(conn: Conn, src: str, dst: str, *, user_id: int | None = None) -> None:
    """``src``'s properties onto ``dst``, replacing those of the same names. Onto a side path they
    become ``user_id``'s own (a note's shared ones too: the copy is the user's); a side file's never
    become a shared path's, whose properties stay as they were (an editor's temp file moved over
    its note is that note's next version: the note keeps its tags, and nobody else gets the
    temp file's)."""
    src_side, dst_side = _side(src), _side(dst)
    if src_side and not dst_side:
        return
    if dst_side:
        source = (f"SELECT p.name, p.value FROM ({_SIDE_LIVE} WHERE p.user_id = %s AND p.path = %s) AS p"
                  if src_side else "SELECT name, value FROM path_properties WHERE path = %s")
        conn.execute(f"""INSERT INTO side_file_properties (user_id, path, name, value)
                         SELECT %s, %s, s.name, s.value FROM ({source}) AS s
                          WHERE EXISTS (SELECT 1 FROM scratch_files WHERE user_id = %s AND path = %s)
                         ON CONFLICT (user_id, path, name) DO UPDATE
                            SET value = EXCLUDED.value, updated_at = now()""",
                     (user_id, dst, *((user_id, src) if src_side else (src,)), user_id, dst))
        return
    conn.execute("""INSERT INTO path_properties (path, name, value)
                    SELECT %s, name, value FROM path_properties WHERE path = %s
                    ON CONFLICT (path, name) DO UPDATE SET value = EXCLUDED.value, updated_at = now()""",
                 (dst, src))


def move(conn: Conn, src: str, dst: str, *, user_id: int | None = None) -> None:
    """The properties go with the node; the target's own are replaced. As in copy(), a side
    file's never become a shared path's: moved onto one, they end."""
    dst_side = _side(dst)
    if not _side(src) and not dst_side:
        conn.execute("DELETE FROM path_properties WHERE path = %s", (dst,))
        conn.execute("UPDATE path_properties SET path = %s, updated_at = now() WHERE path = %s", (dst, src))
        return
    if dst_side:
        clear(conn, dst, user_id=user_id)
        copy(conn, src, dst, user_id=user_id)
    clear(conn, src, user_id=user_id)

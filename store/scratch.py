"""Clients' side files: the per-user scratch area.

Finder writes ._name and .DS_Store beside every file it touches, vim writes name.swp and probes
with 4913, Office writes ~$name, and editors save through temporary names. None of them is a note.
They live here: per user (another user never sees them), in PostgreSQL (so every gateway process
agrees), expiring a day after their last write, capped in size, and never in provenance or search.
Each change is announced to its user alone, on that user's channel (channel(), sql/032), for a
follower that keeps listings. The Host tree decides which names are side files
(store.paths.is_side_file). Their WebDAV dead properties are their user's too (store.properties):
rows of side_file_properties that hang off the side file's row here (sql/151), so whatever ends
a side file (delete(), a move away, purge() of an expired one) ends its properties with it.
"""
from __future__ import annotations

from datetime import datetime

from store.db import Conn
from store.errors import LimitReached, NotANote
from store.paths import parent_of

# A side file's name, in UTF-8 bytes: NAME_MAX of the file systems clients save from (a new note's
# key is at most 255 bytes too). It also keeps each change's announcement (sql/032, paths of at
# most three files) well inside PostgreSQL's 8 000-byte NOTIFY payload.
MAX_NAME_BYTES = 255
MAX_PER_USER = 64 * 1024 * 1024   # all of one user's live side files
LIFETIME = "1 day"
# How long a path moved away to a side-file name stays hidden from its user (see hide()): an
# editor's rename-away save re-creates the file within a second; two minutes leave room for a slow
# client, and a path that is never re-created simply shows again.
SAVE_WINDOW_SECONDS = 120


def channel(user_id: int) -> str:
    """Where sql/032's trigger announces each change of ``user_id``'s side files:
    {"user_id", "paths", "operation"}."""
    return f"host.side_files.{int(user_id)}"


_META = "path, octet_length(content) AS size, version, created_at, updated_at, expires_at"


def list_folder(conn: Conn, user_id: int, folder: str) -> list[dict]:
    """What the user's side files do to ``folder``'s listing, in one query: each row is a live
    side file in the folder (``here``), or one elsewhere that hides a file of this folder (a
    rename-away across folders), or both. ``hiding`` is the path of this folder it hides from
    this user (see hide()), or None; ``lasts`` the seconds until the row changes the listing by
    the clock alone (the side file here expires, or the hiding ends), which no event announces."""
    return conn.execute(
        f"""SELECT {_META}, here, CASE WHEN hides THEN origin END AS hiding,
                   extract(epoch FROM least(CASE WHEN here THEN expires_at END,
                                            CASE WHEN hides THEN hides_until END) - now())::float8 AS lasts
              FROM (SELECT *, parent = %(folder)s AND expires_at > now() AS here,
                           origin IS NOT NULL AND hides_until > now()
                           AND regexp_replace(origin, '/[^/]*$', '') = %(folder)s AS hides
                      FROM scratch_files
                     WHERE user_id = %(user)s
                       AND ((parent = %(folder)s AND expires_at > now())
                            OR (origin IS NOT NULL AND hides_until > now()))) AS rows
             WHERE here OR hides ORDER BY path""",
        {"user": user_id, "folder": folder}).fetchall()


# -- rename-away saves ------------------------------------------------------------------------
# vim (backupcopy=no/auto, swap files), Emacs and davfs2 save by renaming the file to a backup
# name, creating it again and writing it. The Host tree answers the rename with a copy in a side
# file that hides the original path from this user for SAVE_WINDOW_SECONDS; the original is not
# touched, so other users, tasks' embeds and the history keep it. The next write of the hidden
# path is the file's next version (store.host), and ends the hiding.

def hidden_sql(user: str = "%s", path: str = "%s") -> str:
    """A boolean SQL expression (its placeholders: ``user``, ``path``) a lookup or a write adds to
    its own statement, so that checking for a hidden path costs no query of its own."""
    return (f"EXISTS (SELECT 1 FROM scratch_files h WHERE h.user_id = {user} AND h.origin = {path}"
            " AND h.hides_until > now())")


HIDDEN_SQL = hidden_sql()
"""hidden_sql() with positional parameters: user id, path."""


def hide(conn: Conn, user_id: int, side_path: str, origin: str, version: int) -> None:
    """Make the side file ``side_path`` hide ``origin`` (at ``version``) from this user for the
    save window."""
    conn.execute("UPDATE scratch_files SET origin = %s, origin_version = %s,"
                 f" hides_until = now() + interval '{SAVE_WINDOW_SECONDS} seconds'"
                 " WHERE user_id = %s AND path = %s", (origin, version, user_id, side_path))


HIDING_SQL = ("SELECT origin_version FROM scratch_files WHERE user_id = %s AND origin = %s"
              " AND hides_until > now() ORDER BY updated_at DESC LIMIT 1")
"""hiding()'s query (params: user id, path), for a caller that asks it with other questions."""


def hiding(conn: Conn, user_id: int, origin: str) -> int | None:
    """The version ``origin`` had when it was moved away, while it is hidden from this user."""
    row = conn.execute(HIDING_SQL, (user_id, origin)).fetchone()
    return None if row is None else int(row["origin_version"])


def unhide(conn: Conn, user_id: int, origin: str) -> None:
    """``origin`` was written again (or replaced): it shows again, whatever side file hid it."""
    conn.execute("UPDATE scratch_files SET origin = NULL, origin_version = NULL, hides_until = NULL"
                 " WHERE user_id = %s AND origin = %s", (user_id, origin))


def get(conn: Conn, user_id: int, path: str) -> dict | None:
    """The live side file with its content, or None."""
    return conn.execute(
        f"SELECT {_META}, content FROM scratch_files WHERE user_id = %s AND path = %s AND expires_at > now()",
        (user_id, path)).fetchone()


def write(conn: Conn, user_id: int, path: str, data: bytes) -> dict:
    """Create or replace a side file; its day starts again. Refuses files larger than a note and a user
    whose side files would pass MAX_PER_USER (expired ones are purged first)."""
    name = path.rsplit("/", 1)[-1]
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise NotANote(f"the name {name[:40]}… is {len(name.encode('utf-8'))} bytes long; a file name is at most "
                       f"{MAX_NAME_BYTES} bytes (in UTF-8): save it under a shorter name")
    # One side file holds at most what a note does: a temp file an editor renames over a note is
    # refused at the write that passes the cap, as the note would be, not at the rename; and
    # WebDAV's door and the mount's open files cap every body there before the store sees one.
    from store.storage import MAX_CONTENT_BYTES, too_large  # (storage imports this module)
    if len(data) > MAX_CONTENT_BYTES:
        raise too_large(name, len(data))
    # An expired file of this name goes first, with its dead properties: a new one starts bare.
    purge(conn, user_id=user_id)
    used = conn.execute("SELECT coalesce(sum(octet_length(content)), 0) AS used FROM scratch_files"
                        " WHERE user_id = %s AND path <> %s", (user_id, path)).fetchone()["used"]
    if used + len(data) > MAX_PER_USER:
        raise LimitReached(f"your clients' side files (._*, .DS_Store, *.swp...) already take {used} bytes; "
                           f"at most {MAX_PER_USER // (1024 * 1024)} MB are kept. They expire a day after "
                           "their last write; delete some to make room")
    return conn.execute(
        f"""INSERT INTO scratch_files (user_id, path, parent, content) VALUES (%s, %s, %s, %s)
            ON CONFLICT (user_id, path) DO UPDATE
               SET content = EXCLUDED.content, updated_at = now(),
                   expires_at = now() + interval '{LIFETIME}',
                   version = CASE WHEN scratch_files.expires_at > now() THEN scratch_files.version + 1 ELSE 1 END,
                   created_at = CASE WHEN scratch_files.expires_at > now() THEN scratch_files.created_at ELSE now() END
            RETURNING {_META}""", (user_id, path, parent_of(path), data)).fetchone()


def delete(conn: Conn, user_id: int, path: str) -> bool:
    """Remove a live side file; False when there was none."""
    row = conn.execute("DELETE FROM scratch_files WHERE user_id = %s AND path = %s RETURNING expires_at > now() AS live",
                       (user_id, path)).fetchone()
    return bool(row and row["live"])


def purge(conn: Conn, *, user_id: int | None = None, now: datetime | None = None) -> int:
    """Delete expired side files (one user's, or everyone's); returns how many went."""
    if user_id is None:
        cur = conn.execute("DELETE FROM scratch_files WHERE expires_at <= coalesce(%s, now())", (now,))
    else:
        cur = conn.execute("DELETE FROM scratch_files WHERE user_id = %s AND expires_at <= coalesce(%s, now())",
                           (user_id, now))
    return cur.rowcount

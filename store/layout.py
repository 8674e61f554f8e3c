"""The Host tree's folders: which paths are folders, whether one exists, and what it holds.

    org/<org_id>/                              notes, and the folders agents/ collections/ guilds/
    org/<org_id>/guilds/<guild_id>/            notes
    org/<org_id>/agents/<agent_id>/            task.md, memory.md, notes, scripts/, history-archive/
    org/<org_id>/agents/<agent_id>/scripts/    scripts
    org/<org_id>/agents/<agent_id>/history-archive/   earlier memory versions
    org/<org_id>/collections/<name>/           collection.json and one <id>.json per record

A path's folder is known from its shape alone (``folder_of``); whether it exists, and which
folders it holds, is one query (``SHAPES``). Which files a folder holds is the families' part
(store.families.family_for).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Literal

from store.access import Principal
from store.db import Conn
from store.errors import NotFound
from store.paths import nfc, parse_id

# What a folder or a file that has no time of its own (the root, org/) says it was made at.
EPOCH = datetime(2020, 1, 1, tzinfo=timezone.utc)

FolderKind = Literal["root", "orgs", "org", "guilds", "guild", "agents", "agent", "scripts", "history",
                     "collections", "collection"]


@dataclass(frozen=True)
class Folder:
    kind: FolderKind
    path: str
    org_id: int | None = None
    owner_id: int | None = None     # guild or agent id
    name: str | None = None         # collection name


def split(path: str) -> list[str]:
    """NFC segments of a tree path; '.', '..' and empty segments name nothing."""
    path = nfc(path or "").strip("/")
    if not path:
        return []
    parts = path.split("/")
    if any(p in ("", ".", "..") for p in parts):
        raise NotFound(f"unknown path /{path}")
    return parts


def folder_of(parts: list[str]) -> Folder | None:
    """The folder these segments name by shape alone, or None when they cannot name a folder."""
    path = "/".join(parts)
    n = len(parts)
    if n == 0:
        return Folder("root", "")
    if parts[0] != "org":
        return None
    if n == 1:
        return Folder("orgs", path)
    org = parse_id(parts[1])
    if org is None:
        return None
    if n == 2:
        return Folder("org", path, org)
    head = parts[2]
    if n == 3 and head in ("guilds", "agents", "collections"):
        return Folder(head, path, org)  # type: ignore[arg-type]
    if n == 4 and head == "guilds" and (gid := parse_id(parts[3])) is not None:
        return Folder("guild", path, org, gid)
    if n >= 4 and head == "agents" and (aid := parse_id(parts[3])) is not None:
        if n == 4:
            return Folder("agent", path, org, aid)
        if n == 5 and parts[4] == "scripts":
            return Folder("scripts", path, org, aid)
        if n == 5 and parts[4] == "history-archive":
            return Folder("history", path, org, aid)
    if n == 4 and head == "collections":
        return Folder("collection", path, org, None, parts[3])
    return None


# ---------------------------------------------------------------------------------------------
# What each kind of folder is

Subfolders = Callable[[Conn, Folder, Principal, datetime], list[dict]]


def _dir(name: str, created: datetime, *, writable: bool = False) -> dict:
    return {"name": name, "created_at": created, "writable": writable}


def _fixed(*names: tuple[str, bool]) -> Subfolders:
    """Folders that every folder of this kind holds, made when it was."""
    return lambda conn, folder, principal, created: [_dir(n, created, writable=w) for n, w in names]


def _query(sql: str, *, writable: bool) -> Subfolders:
    """One folder per row of ``sql`` (columns name, created_at; parameter: the organisation)."""
    def rows(conn: Conn, folder: Folder, principal: Principal, created: datetime) -> list[dict]:
        return [_dir(str(r["name"]), r["created_at"], writable=writable)
                for r in conn.execute(sql, (folder.org_id,)).fetchall()]
    return rows


def _orgs(conn: Conn, folder: Folder, principal: Principal, created: datetime) -> list[dict]:
    rows = conn.execute("SELECT id AS name, created_at FROM organisations WHERE id = ANY(%s) ORDER BY id",
                        (sorted(principal.org_ids),)).fetchall()
    return [_dir(str(r["name"]), r["created_at"], writable=True) for r in rows]


def _none(conn: Conn, folder: Folder, principal: Principal, created: datetime) -> list[dict]:
    return []


@dataclass(frozen=True)
class Shape:
    """One kind of folder. ``exists`` is the query giving its created_at from (org id, owner id
    or collection name), None for a folder that is always there; ``holds`` is what a file refused
    there reads, for a folder that holds no files ({org}: the folder's organisation)."""
    exists: str | None
    subfolders: Subfolders = _none
    writable: bool = False
    holds: str = ""
    params: Callable[[Folder], tuple] = field(default=lambda f: (f.owner_id, f.org_id))


_ORG = "SELECT created_at FROM organisations WHERE id = %s"
_AGENT = "SELECT created_at FROM agents WHERE id = %s AND org_id = %s"
_BY_ORG = (lambda f: (f.org_id,))
_NO_FILES = ("holds {what} and no files; put notes in /org/{{org}}/ or in a guild's or agent's folder")

SHAPES: dict[FolderKind, Shape] = {
    "root": Shape(None, _fixed(("org", False)), holds="holds only folders; notes live under /org/<org_id>/"),
    "orgs": Shape(None, _orgs, holds="holds only folders; notes live under /org/<org_id>/"),
    "org": Shape(_ORG, _fixed(("agents", False), ("collections", False), ("guilds", False)), writable=True,
                 params=_BY_ORG),
    "guilds": Shape(_ORG, _query("SELECT id AS name, created_at FROM guilds WHERE org_id = %s ORDER BY id",
                                 writable=True), holds=_NO_FILES.format(what="one folder per guild"), params=_BY_ORG),
    "agents": Shape(_ORG, _query("SELECT id AS name, created_at FROM agents WHERE org_id = %s ORDER BY id",
                                 writable=True), holds=_NO_FILES.format(what="one folder per agent"), params=_BY_ORG),
    "collections": Shape(_ORG, _query("SELECT name, created_at FROM artifact_collections WHERE org_id = %s"
                                      " AND deleted_at IS NULL ORDER BY name", writable=False),
                         holds=_NO_FILES.format(what="one folder per collection"), params=_BY_ORG),
    "guild": Shape("SELECT created_at FROM guilds WHERE id = %s AND org_id = %s", writable=True),
    "agent": Shape(_AGENT, _fixed(("history-archive", False), ("scripts", True)), writable=True),
    "scripts": Shape(_AGENT, writable=True),
    "history": Shape(_AGENT),
    "collection": Shape("SELECT created_at FROM artifact_collections WHERE org_id = %s AND name = %s"
                        " AND deleted_at IS NULL", params=lambda f: (f.org_id, f.name)),
}


def created_at(conn: Conn, folder: Folder) -> datetime | None:
    """When the folder was made, or None when it does not exist. At most one query."""
    query = exists_query(folder)
    if query is None:
        return EPOCH
    row = conn.execute(*query).fetchone()
    return None if row is None else row["created_at"]


def exists_query(folder: Folder) -> tuple[str, tuple] | None:
    """created_at()'s query and parameters (one column, created_at; no row: no such folder), for
    a caller that asks it together with other questions; None for a folder that always exists."""
    shape = SHAPES[folder.kind]
    return None if shape.exists is None else (shape.exists, shape.params(folder))


def subfolders(conn: Conn, folder: Folder, principal: Principal, created: datetime) -> list[dict]:
    """The folders directly in ``folder`` (name, created_at, writable). At most one query."""
    return SHAPES[folder.kind].subfolders(conn, folder, principal, created)

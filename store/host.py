"""The Host tree: display paths as files and folders, with every Host rule in one place.

The WebDAV provider and the FUSE mount both call ``HostTree`` and nothing else, as rclone's
``serve webdav`` and ``mount`` share its VFS. The tree adds only its own rules (layout, side files,
read-only folders, NFC names, conditional writes, moves between levels, editors' saves); the
rules of each family (caps, reserved keys, embeds, provenance, versions) stay in the family
modules, reached through ``store.host_families``.

Layout (see /work/shared/DESIGN.md)::

    org/<org_id>/<note>.md
    org/<org_id>/guilds/<guild_id>/<note>.md
    org/<org_id>/agents/<agent_id>/{task.md, memory.md, <note>.md, scripts/<name>, history-archive/<name>}
    org/<org_id>/collections/<name>/{collection.json, <id>.json}

A side file (``._x``, ``.DS_Store``, ``x.swp``, ``4913``...) in any folder goes to the user's scratch
area (store.scratch): visible in that user's listings only, never a note.
"""
from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal

from store import host_families as fam
from store import locks as leases
from store import properties, scratch
from store.access import Principal
from store.db import Conn, Database, after_commit
from store.errors import (AlreadyExists, Forbidden, Invalid, NotANote, NotFound, PreconditionFailed,
                          ReadOnly, StoreError, TooLarge)
from store.filecache import CACHEABLE_KINDS, FileCache
from store.paths import RESERVED_AGENT_KEYS, SCRIPT_NAME, is_side_file, key_problem, nfc, parse_id

MAX_WRITE = 262_144
MARKDOWN = "text/markdown; charset=utf-8"
PYTHON = "text/x-python; charset=utf-8"
JSON = "application/json"
OCTETS = "application/octet-stream"
EPOCH = datetime(2020, 1, 1, tzinfo=timezone.utc)

NodeKind = Literal["root", "folder", "note", "task", "memory", "script", "history", "collection_json",
                   "record", "side"]


@dataclass(frozen=True)
class Node:
    path: str
    name: str
    kind: NodeKind
    is_dir: bool
    size: int
    version: int
    etag: str
    created_at: datetime
    modified_at: datetime
    content_type: str
    writable: bool
    deletable: bool


# ---------------------------------------------------------------------------------------------
# Where a path points, before any query

FolderKind = Literal["root", "orgs", "org", "guilds", "guild", "agents", "agent", "scripts", "history",
                     "collections", "collection"]
NOTE_FOLDERS = ("org", "guild", "agent")


@dataclass(frozen=True)
class Folder:
    kind: FolderKind
    path: str
    org_id: int | None = None
    owner_id: int | None = None     # guild or agent id
    name: str | None = None         # collection name

    @property
    def level(self) -> fam.Level:
        return "org" if self.kind == "org" else self.kind  # type: ignore[return-value]


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


# Paths hidden by a rename-away save, as this process made them: {(user id, path): monotonic
# deadline}. PostgreSQL (store.scratch) is the truth every lookup that runs a query reads; this
# only covers a lookup answered from the content cache without a query (a FUSE mount, --read-cache).
_HIDDEN: dict[tuple[int, str], float] = {}
_HIDDEN_LOCK = threading.Lock()


def _remember_hidden(user_id: int, path: str, hidden: bool) -> None:
    with _HIDDEN_LOCK:
        if hidden:
            _HIDDEN[(user_id, path)] = time.monotonic() + scratch.SAVE_WINDOW_SECONDS
        else:
            _HIDDEN.pop((user_id, path), None)


def _hidden_here(user_id: int, path: str) -> bool:
    with _HIDDEN_LOCK:
        deadline = _HIDDEN.get((user_id, path))
        if deadline is not None and deadline < time.monotonic():
            del _HIDDEN[(user_id, path)]
            return False
        return deadline is not None


# ---------------------------------------------------------------------------------------------

class HostTree:
    """The tree as one authenticated principal (kind 'user') sees it: the root lists org/, org/
    lists only the organisations the user belongs to, and below that the layout of DESIGN.md.
    Names are NFC-normalised before any lookup. Not thread-safe: make one per request or per
    thread."""

    # stat() of a file keeps its content this long, so that a front end's stat-then-read (WebDAV
    # GET) is one query. Short, because a mount keeps its tree for hours.
    CONTENT_TTL = 1.0

    def __init__(self, db: Database, principal: Principal, *, cache: FileCache | None = None,
                 content_ttl: float | None = None) -> None:
        """``cache`` is the process's event-kept content cache (store.filecache), shared by every
        tree; ``content_ttl`` overrides how long stat() keeps a file's bytes for the next read()."""
        if principal.kind != "user":
            raise Forbidden("the Host tree is for member users; a service token reaches the store through the API")
        self.db = db
        self.cache = cache
        if content_ttl is not None:
            self.CONTENT_TTL = content_ttl
        self.principal = principal
        self.actor = principal.actor
        self._recent: dict[str, tuple[float, int, bytes]] = {}
        self._lock = threading.Lock()

    # -- reading ------------------------------------------------------------------------------

    def stat(self, path: str) -> Node:
        parts = split(path)
        with self.db.connection() as conn:
            return self._stat(conn, parts)

    def list(self, path: str) -> list[Node]:
        parts = split(path)
        folder = folder_of(parts)
        with self.db.connection() as conn:
            if folder is None:
                self._stat(conn, parts)  # NotFound, or a file
                raise NotANote(f"/{'/'.join(parts)} is a file, not a folder")
            self._check_org(folder)
            generation = self.cache.generation if self.cache is not None else 0
            nodes = self._children(conn, folder)
            sides = scratch.list_folder(conn, self._uid, folder.path)
            hidden = {r["hiding"] for r in sides if r["hiding"]}
            if hidden:  # moved away in a rename-away save: gone, as far as this user can tell
                nodes = [n for n in nodes if n.path not in hidden]
            nodes += [self._side_node(r) for r in sides]
            if self.cache is not None:
                self._prefetch(conn, nodes, generation)
        nodes.sort(key=lambda n: (not n.is_dir, n.name))
        return nodes

    # A folder listed through a cached tree brings its notes' bytes along in one query, when
    # they are small enough together: whoever lists a folder (a file manager's previews, grep -r,
    # an editor's project view) is about to read its files, and one query beats one per file.
    PREFETCH_BYTES = 8 << 20

    def _prefetch(self, conn: Conn, nodes: list[Node], generation: int) -> None:
        assert self.cache is not None
        files = [n for n in nodes if n.kind in ("note", "script")]
        if not files or sum(n.size for n in files) > self.PREFETCH_BYTES:
            return
        files = [n for n in files if (hit := self.cache.get(n.path)) is None or hit[0].version != n.version]
        if not files:
            return
        contents = fam.contents(conn, [n.path for n in files])
        for node in files:
            got = contents.get(node.path)
            if got is not None and got[0] == node.version:  # the listing and the bytes agree
                self.cache.put(node.path, node, got[1], generation)

    def read(self, path: str) -> bytes:
        parts = split(path)
        key = "/".join(parts)
        with self._lock:
            hit = self._recent.pop(key, None)
        if hit and time.monotonic() - hit[0] < self.CONTENT_TTL:
            return hit[2]
        with self.db.connection() as conn:
            node, content = self._file(conn, parts, with_content=True)
        if node.is_dir:
            raise NotANote(f"/{key} is a folder; a folder has no content to read")
        return content or b""

    def peek(self, path: str) -> tuple[Node, bytes] | None:
        """A file's node and bytes from the content cache alone, with no database round trip;
        None whenever the cache cannot answer (a miss, a folder, a side file, a kind it does not
        keep). The same rules as read(): org membership, the kind of name, a rename-away's hiding.
        For a front end's hot path (the FUSE mount answers lookups and reads in its event loop)."""
        if self.cache is None:
            return None
        parts = split(path)
        if not parts or folder_of(parts) is not None or _side(parts):
            return None
        try:
            folder, name = self._parent(parts)
            kind = self._file_kind(folder, name, for_write=False)
        except StoreError:
            return None  # the full path (stat/read) gives the refusal its sentence
        key = "/".join(parts)
        if kind not in CACHEABLE_KINDS or _hidden_here(self._uid, key):
            return None
        return self.cache.get(key)

    # -- writing ------------------------------------------------------------------------------

    def write(self, path: str, data: bytes, *, if_match: str | None = None, if_none_match: bool = False,
              if_unmodified_since: datetime | None = None) -> Node:
        """Create or replace a note, task.md, memory.md or a script (one new version); a side-file
        name goes to the user's scratch area.

        The condition is checked against the version read here, and the write then passes that
        version down (``if_version``), so the family's locked UPDATE applies it only if the row is
        still at that version: two writers sending the same If-Match cannot both succeed."""
        self._forget_recent()
        parts = split(path)
        if not parts:
            raise NotANote("the root is a folder; files go inside org/<org_id>/")
        folder, name = self._parent(parts)
        cond = _Condition(if_match, if_none_match, if_unmodified_since)
        if _side(parts):
            with self.db.transaction() as conn:
                self._require_folder(conn, folder)
                cond.check(self._side_current(conn, "/".join(parts)))
                row = scratch.write(conn, self._uid, "/".join(parts), data)
            return self._side_node(row)
        kind = self._file_kind(folder, name, for_write=True)
        text = _text(data, name)
        tree_path = "/".join(parts)
        with self.db.transaction() as conn:
            self._require_folder(conn, folder)
            current = self._family_node(conn, folder, name, kind)
            cond.check(current)
            if_version = cond.version_for(current)
            moved_away = scratch.hiding(conn, self._uid, tree_path) if current is None else None
            if moved_away is not None:
                # The create that follows a rename-away save: the file's next version, so it
                # keeps its identity, history and embeds. A condition (If-None-Match: *, the
                # client's "it is gone") holds only if nobody changed the file meanwhile.
                if_version = moved_away if cond.conditional else None
            self._write_family(conn, folder, name, kind, text, if_version=if_version)
            if moved_away is not None:
                self._unhide(conn, tree_path)
            return self._family_node(conn, folder, name, kind)  # type: ignore[return-value]

    def check_write(self, path: str) -> None:
        """Refuse now, with the sentence write() would give, a name that cannot be written (a
        .txt file, a read-only folder), so a client learns it before it sends the body."""
        parts = split(path)
        if not parts or folder_of(parts) is not None:
            raise NotANote(f"/{'/'.join(parts)} is a folder; files go inside it")
        folder, name = self._parent(parts)
        if not _side(parts):
            self._file_kind(folder, name, for_write=True)

    def delete(self, path: str) -> None:
        self._forget_recent()
        parts = split(path)
        if folder_of(parts) is not None:
            raise Forbidden(f"/{'/'.join(parts)} is a folder of the layout; folders cannot be deleted")
        folder, name = self._parent(parts)
        tree_path = "/".join(parts)
        with self.db.transaction() as conn:
            if _side(parts):
                if not scratch.delete(conn, self._uid, tree_path):
                    raise NotFound(f"unknown file /{tree_path}")
                return
            self._require_folder(conn, folder)
            kind = self._file_kind(folder, name, for_write=False)
            if kind in ("task", "memory"):
                raise Forbidden(f"{name} is reserved at the agent root and cannot be deleted; "
                                "write new content to it instead")
            if kind in ("history", "collection_json", "record"):
                raise ReadOnly(_read_only_sentence(folder))
            if self._family_node(conn, folder, name, kind) is None:
                raise NotFound(f"unknown file /{tree_path}")
            if kind == "note":
                fam.delete_note(conn, self._target(folder, name), self.actor)
            else:
                fam.delete_script(conn, folder.org_id, folder.owner_id, name, self.actor)
            properties.clear(conn, tree_path)
            leases.clear(conn, tree_path)

    def move(self, src: str, dst: str, *, overwrite: bool = True) -> Node:
        """Rename in a folder or between agent, guild and organisation levels, in one transaction.
        A side file or a note moved over a note is one new version of that note (same identity,
        embeds and history kept; a moved note's end is a 'delete'). A file moved to a side-file
        name (a rename-away save) leaves a copy in the scratch area and stays in place, hidden
        from this user until written again (store.scratch.hide), which is its next version."""
        return self._transfer(src, dst, overwrite=overwrite, is_move=True)

    def copy(self, src: str, dst: str, *, overwrite: bool = True) -> Node:
        return self._transfer(src, dst, overwrite=overwrite, is_move=False)

    def mkdir(self, path: str) -> None:
        parts = split(path)
        where = "/".join(parts[:-1])
        raise NotANote(f"cannot create the folder /{'/'.join(parts)}: notes are flat, so there are no folders "
                       f"to make; save the note as a .md file directly in /{where} (for example "
                       f"/{where}/{parts[-1] if parts else 'notes'}.md)")

    # -- the transfer rules -------------------------------------------------------------------

    def _transfer(self, src: str, dst: str, *, overwrite: bool, is_move: bool) -> Node:
        self._forget_recent()
        sp, dp = split(src), split(dst)
        verb = "move" if is_move else "copy"
        if folder_of(sp) is not None:
            raise Forbidden(f"/{'/'.join(sp)} is a folder of the layout; folders cannot be "
                            f"{'moved' if is_move else 'copied'}")
        if folder_of(dp) is not None or not dp:
            raise Forbidden(f"/{'/'.join(dp)} is a folder of the layout; {verb} a file into it by naming the file")
        if sp == dp:
            raise Forbidden(f"cannot {verb} /{'/'.join(sp)} onto itself")
        sfolder, sname = self._parent(sp)
        dfolder, dname = self._parent(dp)
        spath, dpath = "/".join(sp), "/".join(dp)
        with self.db.transaction() as conn:
            self._require_folder(conn, sfolder)
            self._require_folder(conn, dfolder)
            # The source's content and kind.
            if _side(sp):
                row = scratch.get(conn, self._uid, spath)
                if row is None:
                    raise NotFound(f"unknown file /{spath}")
                content, skind = bytes(row["content"]), "side"
            else:
                skind = self._file_kind(sfolder, sname, for_write=False)
                node, raw = self._file(conn, sp, with_content=True)
                content = raw or b""
            # Where it goes.
            if _side(dp):
                if not overwrite and scratch.get(conn, self._uid, dpath) is not None:
                    raise AlreadyExists(f"/{dpath} exists and Overwrite is off")
                row = scratch.write(conn, self._uid, dpath, content)
                if is_move and skind == "side":
                    scratch.delete(conn, self._uid, spath)
                elif is_move and skind in ("note", "task", "memory", "script"):
                    # A rename-away save (vim, Emacs, davfs2): the file stays where it is for
                    # everyone else, and is hidden from this user until the editor creates it
                    # again, which is then its next version (see write()).
                    scratch.hide(conn, self._uid, dpath, spath, node.version)
                    uid = self._uid
                    after_commit(lambda: _remember_hidden(uid, spath, True))
                return self._side_node(row)
            dkind = self._file_kind(dfolder, dname, for_write=True)
            if skind not in ("side",) and _family_group(skind) != _family_group(dkind):
                raise NotANote(f"cannot {verb} /{spath} to /{dpath}: a {skind} cannot become a {dkind}; "
                               "notes stay .md files in a note folder and scripts stay in scripts/")
            if is_move and skind in ("task", "memory"):
                raise Forbidden(f"{sname} is reserved at the agent root and cannot be moved; "
                                "copy its content to a note instead")
            if is_move and skind in ("history", "collection_json", "record"):
                raise ReadOnly(_read_only_sentence(sfolder))
            existing = self._family_node(conn, dfolder, dname, dkind)
            if existing is not None and existing.version > 0 and not overwrite:
                raise AlreadyExists(f"/{dpath} exists and Overwrite is off; delete it first or allow overwriting")
            text = _text(content, dname)
            moved_away = scratch.hiding(conn, self._uid, dpath) if existing is None else None
            if moved_away is not None:
                self._unhide(conn, dpath)  # the editor's new file arrives at the hidden path
            if is_move and skind == "note" and dkind == "note" and (existing is not None or moved_away is not None):
                # A note moved over another note (an editor saving through a temporary .md name)
                # is the destination's next version: its identity, history and embeds continue,
                # and the source ends with a 'delete' (refused, like any delete, while a task
                # embeds the source).
                fam.delete_note(conn, self._target(sfolder, sname), self.actor)
                self._write_family(conn, dfolder, dname, dkind, text)
            elif is_move and skind == "note" and dkind == "note":
                # A rename keeps the moved note's identity; a note it replaces goes (store.notes
                # applies the embed rule to both).
                fam.move_note(conn, self._target(sfolder, sname), self._target(dfolder, dname), self.actor,
                              replace=overwrite)
            elif is_move and skind == "script" and dkind == "script" and sfolder.owner_id == dfolder.owner_id:
                fam.move_script(conn, sfolder.org_id, sfolder.owner_id, sname, dname, self.actor, replace=overwrite)
            else:
                # Over an existing file (an editor's atomic save, or a replace): one new version of
                # the target, keeping its identity, embeds and history; then the source goes.
                self._write_family(conn, dfolder, dname, dkind, text)
                if is_move:
                    if skind == "side":
                        scratch.delete(conn, self._uid, spath)
                    elif skind == "note":
                        fam.delete_note(conn, self._target(sfolder, sname), self.actor)
                    elif skind == "script":
                        fam.delete_script(conn, sfolder.org_id, sfolder.owner_id, sname, self.actor)
            if is_move and skind != "side":
                properties.move(conn, spath, dpath)
                leases.clear(conn, spath)
            return self._family_node(conn, dfolder, dname, dkind)  # type: ignore[return-value]

    # -- internals ----------------------------------------------------------------------------

    @property
    def _uid(self) -> int:
        return int(self.principal.user_id or 0)

    def _check_org(self, folder: Folder) -> None:
        if folder.org_id is not None:
            self.principal.require_org(folder.org_id, f"path /{folder.path}")

    def _parent(self, parts: list[str]) -> tuple[Folder, str]:
        folder = folder_of(parts[:-1])
        if folder is None:
            raise NotFound(f"unknown folder /{'/'.join(parts[:-1])}")
        self._check_org(folder)
        return folder, parts[-1]

    def _target(self, folder: Folder, name: str) -> fam.NoteRef:
        return fam.NoteRef(folder.org_id or 0, folder.level, folder.owner_id, name)  # type: ignore[arg-type]

    def _require_folder(self, conn: Conn, folder: Folder) -> Node:
        self._check_org(folder)
        node = fam.folder_row(conn, folder, self.principal)
        if node is None:
            raise NotFound(f"unknown folder /{folder.path}")
        return _folder_node(folder.path, node["created_at"], writable=folder.kind in NOTE_FOLDERS + ("scripts",))

    def _file_kind(self, folder: Folder, name: str, *, for_write: bool) -> str:
        """What kind of file ``name`` would be in ``folder``, or the refusal a person reads."""
        if folder.kind in NOTE_FOLDERS:
            if folder.kind == "agent" and name in RESERVED_AGENT_KEYS:
                return "task" if name == "task.md" else "memory"
            problem = key_problem(name)
            if problem:
                raise NotANote(f"/{folder.path}/{name} cannot be a note: {problem}. Only Markdown notes "
                               "(.md) live here; other files are refused")
            return "note"
        if folder.kind == "scripts":
            if not SCRIPT_NAME.fullmatch(name):
                raise NotANote(f"/{folder.path}/{name} cannot be a script: a script is a Python file name "
                               "such as fetch_prices.py (letters, digits, _ . -, ending in .py)")
            return "script"
        if folder.kind == "history":
            if for_write:
                raise ReadOnly(_read_only_sentence(folder))
            return "history"
        if folder.kind == "collection":
            if for_write:
                raise ReadOnly(_read_only_sentence(folder))
            return "collection_json" if name == "collection.json" else "record"
        if folder.kind in ("guilds", "agents", "collections"):
            what = {"guilds": "one folder per guild", "agents": "one folder per agent",
                    "collections": "one folder per collection"}[folder.kind]
            raise NotANote(f"/{folder.path} holds {what} and no files; put notes in /org/{folder.org_id}/ "
                           f"or in a guild's or agent's folder")
        raise NotANote(f"/{folder.path} holds only folders; notes live under /org/<org_id>/")

    def _forget_recent(self) -> None:
        # A write through this tree makes any content kept by an earlier stat() stale.
        with self._lock:
            self._recent.clear()

    def _stat(self, conn: Conn, parts: list[str]) -> Node:
        folder = folder_of(parts)
        if folder is not None:
            self._check_org(folder)
            if folder.kind == "root":
                return _folder_node("", EPOCH, writable=False, kind="root")
            row = fam.folder_row(conn, folder, self.principal)
            if row is None:
                raise NotFound(f"unknown folder /{folder.path}")
            return _folder_node(folder.path, row["created_at"],
                                writable=folder.kind in NOTE_FOLDERS + ("scripts",))
        node, content = self._file(conn, parts, with_content=True)
        if content is not None:
            with self._lock:
                if len(self._recent) > 64:
                    self._recent.clear()
                self._recent[node.path] = (time.monotonic(), node.version, content)
        return node

    def _file(self, conn: Conn, parts: list[str], *, with_content: bool) -> tuple[Node, bytes | None]:
        if not parts:
            return _folder_node("", EPOCH, writable=False, kind="root"), None
        folder, name = self._parent(parts)
        path = "/".join(parts)
        if _side(parts):
            row = scratch.get(conn, self._uid, path)
            if row is None:
                raise NotFound(f"unknown file /{path}")
            return self._side_node(row), bytes(row["content"])
        try:
            kind = self._file_kind(folder, name, for_write=False)
        except (NotANote, ReadOnly):
            raise NotFound(f"unknown file /{path}") from None
        cache = self.cache if kind in CACHEABLE_KINDS else None
        if cache is not None:
            hit = cache.get(path)
            if hit is not None:
                if _hidden_here(self._uid, path):
                    raise NotFound(f"unknown file /{path}")
                return hit
            generation = cache.generation
        row = fam.read_file(conn, folder, name, kind, self.principal, hidden_for=self._uid or None)
        if row is None:
            raise NotFound(f"unknown file /{path}")
        node = _file_node(folder, name, kind, row)
        if cache is not None:
            cache.put(path, node, row["content"], generation)
        return node, row["content"]

    def _family_node(self, conn: Conn, folder: Folder, name: str, kind: str) -> Node | None:
        row = fam.read_file(conn, folder, name, kind, self.principal, hidden_for=self._uid or None)
        return None if row is None else _file_node(folder, name, kind, row)

    def _unhide(self, conn: Conn, path: str) -> None:
        scratch.unhide(conn, self._uid, path)
        _remember_hidden(self._uid, path, False)

    def _write_family(self, conn: Conn, folder: Folder, name: str, kind: str, text: str, *,
                      if_version: int | None = None) -> None:
        """One new version; with ``if_version``, only if the file is still at that version
        (PreconditionFailed otherwise, decided under the family's row lock)."""
        if kind == "note":
            fam.write_note(conn, self._target(folder, name), text, self.actor, if_version=if_version)
        elif kind == "task":
            fam.write_task(conn, folder.org_id, folder.owner_id, text, self.actor, if_version=if_version)
        elif kind == "memory":
            fam.write_memory(conn, folder.org_id, folder.owner_id, text, self.actor, if_version=if_version)
        elif kind == "script":
            fam.write_script(conn, folder.org_id, folder.owner_id, name, text, self.actor, if_version=if_version)
        else:
            raise ReadOnly(_read_only_sentence(folder))

    def _children(self, conn: Conn, folder: Folder) -> list[Node]:
        rows = fam.children(conn, folder, self.principal)
        if rows is None:
            raise NotFound(f"unknown folder /{folder.path}")
        nodes = []
        for row in rows:
            if row.get("is_dir"):
                nodes.append(_folder_node(_join(folder.path, row["name"]), row["created_at"],
                                          writable=row.get("writable", False)))
            else:
                nodes.append(_file_node(folder, row["name"], row["kind"], row))
        return nodes

    def _side_current(self, conn: Conn, path: str) -> Node | None:
        row = scratch.get(conn, self._uid, path)
        return None if row is None else self._side_node(row)

    def _side_node(self, row: dict) -> Node:
        path = row["path"]
        digest = hashlib.sha1(path.encode()).hexdigest()[:10]
        return Node(path, path.rsplit("/", 1)[-1], "side", False, int(row["size"]), int(row["version"]),
                    f'"s{digest}-v{row["version"]}"', row["created_at"], row["updated_at"], OCTETS, True, True)


# ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Condition:
    if_match: str | None
    if_none_match: bool
    if_unmodified_since: datetime | None

    @property
    def conditional(self) -> bool:
        return self.if_match is not None or self.if_none_match or self.if_unmodified_since is not None

    def check(self, current: Node | None) -> None:
        """PreconditionFailed when the client's view is stale, judged on ``current`` as read
        without a lock. That read can be overtaken by another writer, so a write that passed must
        also be applied only at the version judged here: see ``version_for``."""
        exists = current is not None and current.version > 0
        if self.if_none_match and exists:
            raise PreconditionFailed(f"/{current.path} already exists (If-None-Match: *); read it first "  # type: ignore[union-attr]
                                     "or write without the condition to replace it")
        if self.if_match is not None:
            tags = [t.strip() for t in self.if_match.split(",")]
            if not exists or ("*" not in tags and current.etag not in tags  # type: ignore[union-attr]
                              and current.etag.strip('"') not in tags):  # type: ignore[union-attr]
                have = current.etag if exists else "nothing"  # type: ignore[union-attr]
                raise PreconditionFailed(
                    f"the file changed since you read it (you sent If-Match {self.if_match}, it is now "
                    f"{have}); read the current version and apply your change to it")
        if self.if_unmodified_since is not None and exists:
            since = self.if_unmodified_since.replace(microsecond=0)
            if current.modified_at.replace(microsecond=0) > since:  # type: ignore[union-attr]
                raise PreconditionFailed(
                    f"the file changed at {current.modified_at:%Y-%m-%d %H:%M:%S} UTC, after "  # type: ignore[union-attr]
                    f"{since:%Y-%m-%d %H:%M:%S} (If-Unmodified-Since); read it again first")

    def version_for(self, current: Node | None) -> int | None:
        """The version the write must still find, or None for an unconditional write. A file that
        did not exist passed as version 0 (memory.md and task.md have a version-0 form)."""
        if not self.conditional:
            return None
        return current.version if current is not None else 0


def _text(data: bytes, name: str) -> str:
    if len(data) > MAX_WRITE:
        raise TooLarge(f"{name} is {len(data)} bytes; a write is at most {MAX_WRITE} bytes (256 KB). "
                       "Split it into several notes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = (f"{name} is not UTF-8 text (byte {exc.start} is not valid UTF-8); notes and scripts are "
               "text: save the file as UTF-8")
        raise Invalid(msg, [msg]) from None


def _family_group(kind: str) -> str:
    return {"note": "md", "task": "md", "memory": "md", "history": "md", "script": "py"}.get(kind, kind)


def _read_only_sentence(folder: Folder) -> str:
    if folder.kind == "history":
        return (f"/{folder.path} is read-only: it keeps earlier versions of memory.md; "
                "write memory.md to change the memory")
    return (f"/{folder.path} is read-only: collections and records change through the Databases page "
            "or the API, not as files")


def _side(parts: list[str]) -> bool:
    """A client's side file: a side-file name (store.paths.is_side_file) that is not a folder of
    the layout (org/1/agents/2 has no extension, yet is a folder)."""
    return bool(parts) and is_side_file(parts[-1]) and folder_of(parts) is None


def _join(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name


def _folder_node(path: str, created: datetime, *, writable: bool, kind: NodeKind = "folder") -> Node:
    name = path.rsplit("/", 1)[-1] if path else ""
    return Node(path, name, kind, True, 0, 0, "", created, created, "httpd/unix-directory", writable, False)


_CONTENT_TYPES = {"note": MARKDOWN, "task": MARKDOWN, "memory": MARKDOWN, "history": MARKDOWN,
                  "script": PYTHON, "collection_json": JSON, "record": JSON}


def _file_node(folder: Folder, name: str, kind: str, row: dict) -> Node:
    writable = kind in ("note", "task", "memory", "script")
    deletable = kind in ("note", "script")
    return Node(_join(folder.path, name), name, kind, False, int(row["size"]), int(row["version"]),  # type: ignore[arg-type]
                f'"{row["tag"]}-v{row["version"]}"', row["created_at"], row["updated_at"],
                _CONTENT_TYPES[kind], writable, deletable)

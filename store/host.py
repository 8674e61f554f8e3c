"""The Host tree: display paths as files and folders, with every Host rule in one place.

The WebDAV provider and the FUSE mount both call ``HostTree`` and nothing else, as rclone's
``serve webdav`` and ``mount`` share its VFS. The tree adds only its own rules (layout, side files,
read-only folders, NFC names, conditional writes, moves between levels, editors' saves). What a
file is, is its family's (store.families: one object per kind of file, one interface); the rules
of each family (caps, reserved keys, embeds, provenance, versions) stay in its store module.

Layout (store/layout.py; the README's "The tree")::

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
from datetime import datetime
from typing import Literal

from store import embeds, layout, properties, provenance, scratch, storage
from store import locks as leases
from store.access import Principal
from store.db import Conn, Database, after_commit
from store.errors import (AlreadyExists, Forbidden, Invalid, NotANote, NotFound, PreconditionFailed, ReadOnly,
                          StoreError)
from store.families import Family, families_in, family_for
from store.families.artifacts import contents
from store.filecache import FileCache
from store.layout import EPOCH, Folder, folder_of, split
from store.paths import is_side_file
from store.storage import MAX_CONTENT_BYTES, too_large

OCTETS = "application/octet-stream"

# The families whose files are artifacts counted against their owner's cap (store.storage:
# OWNER_CAP live files per organisation, guild or agent): a new one is one more.
_OWNER_CAPPED = frozenset({"note", "script", "memory"})

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


# Paths hidden by a rename-away save, as this process made them: {(user id, path): monotonic
# deadline}. PostgreSQL (store.scratch) is the truth every lookup that runs a query reads; this
# only keeps a lookup from being answered by the content cache without a query (a FUSE mount,
# --read-cache): such a path is asked of the store, which another process may have unhidden.
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
                 content_ttl: float | None = None, honour_leases: bool = True) -> None:
        """``cache`` is the process's event-kept content cache (store.filecache), shared by every
        tree; ``content_ttl`` overrides how long stat() keeps a file's bytes for the next read().
        ``honour_leases``: refuse (Locked) to write, move or delete a path that someone's lease
        covers (store.locks: a WebDAV client's lock). False only for WebDAV, whose requests carry
        their lock tokens and are checked against them by WsgiDAV before they reach the tree."""
        if principal.kind != "user":
            raise Forbidden("the Host tree is for member users; a service token reaches the store through the API")
        self.db = db
        self.cache = cache
        if content_ttl is not None:
            self.CONTENT_TTL = content_ttl
        self.principal = principal
        self.actor = principal.actor
        self.honour_leases = honour_leases
        self._recent: dict[str, tuple[float, int, bytes]] = {}
        self._lock = threading.Lock()

    # -- reading ------------------------------------------------------------------------------

    def stat(self, path: str) -> Node:
        parts = split(path)
        with self.db.connection() as conn:
            return self._stat(conn, parts)

    def list(self, path: str) -> list[Node]:
        return self.listing(path)[0]

    def listing(self, path: str) -> tuple[list[Node], float | None]:
        """list(), and how many seconds it stays true by itself: a side file's expiry and the end
        of a rename-away's hiding change it with no event (store.scratch), so a follower that
        keeps listings until an event says otherwise (the FUSE mount) keeps this one no longer.
        None: only a change, which sends its event, can make it wrong."""
        parts = split(path)
        folder = folder_of(parts)
        with self.db.connection() as conn:
            if folder is None:
                self._stat(conn, parts)  # NotFound, or a file
                raise NotANote(f"/{'/'.join(parts)} is a file, not a folder")
            self._check_org(folder)
            generation = self.cache.generation if self.cache is not None else 0
            nodes, prefetch = self._children(conn, folder)
            sides = scratch.list_folder(conn, self._uid, folder.path)
            hidden = {r["hiding"] for r in sides if r["hiding"]}
            if hidden:  # moved away in a rename-away save: gone, as far as this user can tell
                nodes = [n for n in nodes if n.path not in hidden]
            nodes += [self._side_node(r) for r in sides if r["here"]]
            if self.cache is not None:
                self._prefetch(conn, [n for n in prefetch if n.path not in hidden], generation)
        nodes.sort(key=lambda n: (not n.is_dir, n.name))
        return nodes, min((float(r["lasts"]) for r in sides if r["lasts"] is not None), default=None)

    # A folder listed through a cached tree brings its notes' bytes along in one query, when
    # they are small enough together: whoever lists a folder (a file manager's previews, grep -r,
    # an editor's project view) is about to read its files, and one query beats one per file.
    PREFETCH_BYTES = 8 << 20

    def _prefetch(self, conn: Conn, files: list[Node], generation: int) -> None:
        """``files``: the listed files of families that bring their bytes along (Family.prefetch)."""
        assert self.cache is not None
        if not files or sum(n.size for n in files) > self.PREFETCH_BYTES:
            return
        files = [n for n in files if (hit := self.cache.get(n.path)) is None or hit[0].version != n.version]
        if not files:
            return
        found = contents(conn, [n.path for n in files])
        for node in files:
            got = found.get(node.path)
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
            node, content = self._file(conn, parts)
        if node.is_dir:
            raise NotANote(f"/{key} is a folder; a folder has no content to read")
        return content or b""

    def current(self, path: str) -> tuple[Node, bytes]:
        """read(), with its node, from the store itself rather than the content cache, which
        lags a change made elsewhere by that change's event: for a writer that will save the
        bytes it starts from (the FUSE mount's `>>`), where a copy from before the change would
        undo it."""
        parts = split(path)
        with self.db.connection() as conn:
            node, content = self._file(conn, parts, cached=False)
        if node.is_dir:
            raise NotANote(f"/{'/'.join(parts)} is a folder; a folder has no content to read")
        return node, content or b""

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
            family = family_for(folder, name, for_write=False)
        except StoreError:
            return None  # the full path (stat/read) gives the refusal its sentence
        key = "/".join(parts)
        if not family.cacheable or _hidden_here(self._uid, key):
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
        return self.put(path, data, if_match=if_match, if_none_match=if_none_match,
                        if_unmodified_since=if_unmodified_since)[0]

    def put(self, path: str, data: bytes, *, if_match: str | None = None, if_none_match: bool = False,
            if_unmodified_since: datetime | None = None) -> tuple[Node, bool]:
        """write(), and whether the file was there to this user before it (WebDAV's 204, where
        a new file is 201): a name hidden by a rename-away save was not."""
        self._forget_recent()
        parts = split(path)
        if not parts:
            raise NotANote("the root is a folder; files go inside org/<org_id>/")
        folder, name = self._parent(parts)
        cond = _Condition(if_match, if_none_match, if_unmodified_since)
        if _side(parts):
            with self.db.transaction() as conn:
                self._require_folder(conn, folder)
                side = self._side_current(conn, "/".join(parts))
                cond.check(side)
                row = scratch.write(conn, self._uid, "/".join(parts), data)
            return self._side_node(row), side is not None
        family = family_for(folder, name, for_write=True)
        text = _text(data, name)
        tree_path = "/".join(parts)
        if family.single_statement_write and not cond.conditional and self._uid:
            # The common save, in one round trip: the statement checks the folder (its foreign
            # key) and this user's rename-away hiding itself, and writes nothing when either
            # says no; the path below then gives the refusal its sentence, or the hidden file
            # its next version.
            try:
                with self.db.single_write() as conn:
                    row = family.write_first(conn, folder, name, text, self.actor, hidden_for=self._uid,
                                             honour_leases=self.honour_leases)
                return _file_node(folder, name, family, row), row["version"] > 1
            except (storage.Hidden, NotFound):
                pass
        # The reads below decide nothing the write statement does not check again under its
        # locks (the version, a create race, the owner's cap), so a family whose write is one
        # statement needs no transaction around them (two round trips fewer).
        with self.db.single_write() if family.single_statement_write else self.db.transaction() as conn:
            self._refuse_if_leased(conn, tree_path)
            current = self._family_node(conn, folder, name, family)
            moved_away = None
            if current is None:  # (a file there is proof enough of its folder)
                moved_away = self._new_name(conn, folder, tree_path)
            cond.check(current)
            if_version = cond.version_for(current)
            if moved_away is not None:
                # The create that follows a rename-away save: the file's next version, so it
                # keeps its identity, history and embeds. A condition (If-None-Match: *, the
                # client's "it is gone") holds only if nobody changed the file meanwhile. The
                # write and the end of the hiding are two writes that must be one: a transaction
                # of their own under single_write(), a savepoint inside transaction().
                if_version = moved_away if cond.conditional else None
                with conn.transaction():
                    written = family.write(conn, folder, name, text, self.actor, if_version=if_version)
                    self._unhide(conn, tree_path)
            else:
                written = family.write(conn, folder, name, text, self.actor, if_version=if_version)
            node = (_file_node(folder, name, family, written) if written is not None
                    else self._family_node(conn, folder, name, family))
            return node, current is not None  # type: ignore[return-value]

    def check_write(self, path: str, *, new: bool = False) -> None:
        """Refuse now, with the sentence write() would give, a name that cannot be written (a
        .txt file, a read-only folder), so a client learns it before it sends the body.

        ``new``: the caller is creating the file now, and its body comes later (the mount's
        open with O_CREAT, which a shell's `>` never hears about again): a file whose write would
        add one more of its owner's artifacts (a note, a script, a first memory.md) is refused too while that owner
        holds the most it may (store.storage.OWNER_CAP), with the write's own LimitReached. Not a
        side file (never an artifact), nor a name a live file holds (an overwrite, or the create
        that ends a rename-away save: its next version). One query, only for such a name; the
        write checks the cap again under its lock. Not for a move's destination: a rename keeps
        the owner's count."""
        parts = split(path)
        self._refuse_folder(parts, NotANote(f"/{'/'.join(parts)} is a folder; files go inside it"))
        folder, name = self._parent(parts)
        if _side(parts):
            return
        family = family_for(folder, name, for_write=True)
        # A name only a new file may not take (Memory.md, a zero-width space): refused here too,
        # or `echo text > Memory.md` would be accepted at open and lose its text at close.
        problem = family.new_name_problem(folder, name)
        if new and family.kind in _OWNER_CAPPED:
            self._check_new_file(folder, "/".join(parts), problem)
        elif problem is not None:
            with self.db.connection() as conn:
                if family.stat(conn, folder, name) is None:
                    raise Invalid(problem, [problem])

    def _check_new_file(self, folder: Folder, path: str, problem: str | None) -> None:
        """check_write(new=True) of an artifact at ``path``: in one query, whether a live file
        holds the path (hidden from this user by a rename-away save or not) and how many live
        files the folder's owner holds (its counter row, sql/011); then the name's ``problem``
        (Invalid) or the owner's cap (LimitReached, store.storage's sentence) for a new file."""
        level = "agent" if folder.kind == "scripts" else folder.kind
        org_id = folder.org_id or 0
        with self.db.connection() as conn:
            row = conn.execute(
                "SELECT EXISTS (SELECT 1 FROM artifacts WHERE display_path = %s AND deleted_at IS NULL) AS taken,"
                " (SELECT live FROM owner_counts WHERE org_id = %s AND level = %s AND owner_id = %s) AS live",
                (path, org_id, level, storage.owner_key(level, folder.owner_id))).fetchone()
        if row["taken"]:
            return
        if problem is not None:
            raise Invalid(problem, [problem])
        if (row["live"] or 0) >= storage.OWNER_CAP:
            raise storage.limit_reached(path, row["live"], org_id=org_id, level=level, owner_id=folder.owner_id)

    def delete(self, path: str) -> None:
        self._forget_recent()
        parts = split(path)
        self._refuse_folder(parts, Forbidden(f"/{'/'.join(parts)} is a folder of the layout; folders cannot be deleted"))
        folder, name = self._parent(parts)
        tree_path = "/".join(parts)
        with self.db.transaction() as conn:
            if _side(parts):
                # (its dead properties, its user's alone, go with it: store.properties)
                if not scratch.delete(conn, self._uid, tree_path):
                    raise NotFound(f"unknown file /{tree_path}")
                return
            self._require_folder(conn, folder)
            family = family_for(folder, name, for_write=False)
            refusal = family.removal_refusal(folder, name, moving=False)
            if refusal is not None:
                raise refusal
            if self._family_node(conn, folder, name, family) is None:
                raise NotFound(f"unknown file /{tree_path}")
            self._refuse_if_leased(conn, tree_path, membership=True)
            family.delete(conn, folder, name, self.actor)
            properties.clear(conn, tree_path, user_id=self._uid)
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
        # Another organisation's folder, or one in it: 404, as for anything there.
        self._refuse_folder(parts, None)
        if len(parts) > 1:
            self._parent(parts)
        raise NotANote(f"cannot create the folder /{'/'.join(parts)}: notes are flat, so there are no folders "
                       f"to make; save the note as a .md file directly in /{where} (for example "
                       f"/{where}/{parts[-1] if parts else 'notes'}.md)")

    # -- the transfer rules -------------------------------------------------------------------

    def _transfer(self, src: str, dst: str, *, overwrite: bool, is_move: bool) -> Node:
        self._forget_recent()
        sp, dp = split(src), split(dst)
        verb = "move" if is_move else "copy"
        self._refuse_folder(sp, Forbidden(f"/{'/'.join(sp)} is a folder of the layout; folders cannot be "
                                          f"{'moved' if is_move else 'copied'}"))
        self._refuse_folder(dp, Forbidden(f"/{'/'.join(dp)} is a folder of the layout; {verb} a file into it "
                                          "by naming the file"))
        if sp == dp:
            raise Forbidden(f"cannot {verb} /{'/'.join(sp)} onto itself")
        sfolder, sname = self._parent(sp)
        dfolder, dname = self._parent(dp)
        spath, dpath = "/".join(sp), "/".join(dp)
        if is_move and not _side(sp) and sfolder.org_id != dfolder.org_id:
            # Whether or not the destination exists: over an existing name the move is the
            # source's delete and the destination's next version, which moved a note's text
            # into the other organisation all the same.
            msg = (f"cannot move /{spath} to /{dpath}: a file stays in its organisation; "
                   "copy it there, then delete it here")
            raise Invalid(msg, [msg])
        with self.db.transaction() as conn:
            if is_move and not _side(sp):
                # Both names' rows before anything is read: the source's bytes are then those of
                # any save of it that was committing (moved with the move, not lost under a stale
                # copy), and a move of B over A waits for one of A over B instead of deadlocking
                # with it. The names' embed locks come first, as a delete or move of a note takes
                # them (store.notes), so this waits for those rather than deadlocking with them.
                # (An editor's temp file moved over its note, the common save, involves one row
                # only, which its write locks: nothing added there.)
                names = [spath] if _side(dp) else [spath, dpath]
                embeds.lock_for_removal(conn, names)
                storage.lock_live(conn, names)
            self._require_folder(conn, sfolder)
            self._require_folder(conn, dfolder)
            if is_move and not _side(sp):
                # (a rename-away save of it too: it ends in a write of the file)
                self._refuse_if_leased(conn, spath, membership=True)
            if not _side(dp):
                self._refuse_if_leased(conn, dpath)
            # The source's content and family (None: a side file).
            sfam: Family | None = None
            if _side(sp):
                row = scratch.get(conn, self._uid, spath)
                if row is None:
                    raise NotFound(f"unknown file /{spath}")
                content = bytes(row["content"])
            else:
                sfam = family_for(sfolder, sname, for_write=False)
                node, raw = self._file(conn, sp, cached=False)
                content = raw or b""
            # Where it goes.
            if _side(dp):
                if not overwrite and scratch.get(conn, self._uid, dpath) is not None:
                    raise AlreadyExists(f"/{dpath} exists and Overwrite is off")
                row = scratch.write(conn, self._uid, dpath, content)
                # The side file takes the source's dead properties, replacing its own, as a copy
                # onto a note does; they are this user's (store.properties), as the file is.
                properties.clear(conn, dpath, user_id=self._uid)
                properties.copy(conn, spath, dpath, user_id=self._uid)
                if is_move and sfam is None:
                    scratch.delete(conn, self._uid, spath)
                elif is_move and sfam.writable:
                    # A rename-away save (vim, Emacs, davfs2): the file stays where it is for
                    # everyone else, and is hidden from this user until the editor creates it
                    # again, which is then its next version (see write()).
                    scratch.hide(conn, self._uid, dpath, spath, node.version)
                    # Its lock ends as on any MOVE (RFC 4918 9.9): left on the name, it made the
                    # name exist again for WebDAV (a lock-null resource), so Word's save, which
                    # locks, moves the note away and moves its temp file back with Overwrite: F,
                    # got 412, and the lock kept out the next LOCK and every save without it.
                    leases.clear(conn, spath)
                    uid = self._uid
                    after_commit(lambda: _remember_hidden(uid, spath, True))
                return self._side_node(row)
            dfam = family_for(dfolder, dname, for_write=True)
            if sfam is not None and sfam.group != dfam.group:
                raise NotANote(f"cannot {verb} /{spath} to /{dpath}: a {sfam.kind} cannot become a {dfam.kind}; "
                               "notes stay .md files in a note folder and scripts stay in scripts/")
            refusal = sfam.removal_refusal(sfolder, sname, moving=True) if is_move and sfam is not None else None
            if refusal is not None:
                raise refusal
            existing = self._family_node(conn, dfolder, dname, dfam)
            if existing is not None and existing.version > 0 and not overwrite:
                raise AlreadyExists(f"/{dpath} exists and Overwrite is off; delete it first or allow overwriting")
            text = _text(content, dname)
            moved_away = scratch.hiding(conn, self._uid, dpath) if existing is None else None
            if moved_away is not None and sfam is not None and not overwrite:
                # The name is free only in this user's view, for an editor's save to bring its
                # new file back (a side file: its temp file, or a new PUT). A file of the tree
                # renamed onto it would replace the text everyone else still reads there.
                raise AlreadyExists(f"/{dpath} exists and Overwrite is off: a save moved it aside in your view, "
                                    "but it is still there for everyone else; delete it first or allow overwriting")
            if moved_away is not None:
                if not overwrite and (now := storage.locked_version(conn, dpath)) not in (None, moved_away):
                    # Overwrite off is MOVE's "it is not there", as If-None-Match: * is PUT's: it
                    # holds for a name this user moved away only if nobody saved it since.
                    raise PreconditionFailed(
                        f"/{dpath} was saved by someone else (version {now}) after this save moved it away "
                        f"at version {moved_away}; nothing was written: open it again and reapply the change")
                self._unhide(conn, dpath)  # the editor's new file arrives at the hidden path
            onto = existing is not None or moved_away is not None
            renamed = is_move and sfam is dfam and dfam.rename(conn, sfolder, sname, dfolder, dname, self.actor,
                                                               replace=overwrite, onto=onto, text=text)
            if not renamed:
                # Over an existing file (an editor's atomic save, or a replace), or into another
                # family (a note onto task.md): the source goes first, so the rules on removing it
                # are judged against the store as it is (a note's move onto the very task that
                # embeds it is refused, as any move of an embedded note); then one new version of
                # the target, keeping its identity, embeds and history.
                if is_move and sfam is None:
                    scratch.delete(conn, self._uid, spath)
                elif is_move:
                    sfam.delete(conn, sfolder, sname, self.actor)  # type: ignore[union-attr]
                dfam.write(conn, dfolder, dname, text, self.actor)
            if is_move and sfam is not None:
                if onto or not renamed:
                    # The destination was written, not relocated (storage.relocate_artifact names
                    # the old path itself): its change says where the text came from all the same.
                    provenance.mark_moved_from(conn, dpath, spath)
                properties.move(conn, spath, dpath, user_id=self._uid)
                leases.clear(conn, spath)
            elif sfam is not None:
                # A copy takes the source's dead properties too (RFC 4918 9.8.2), replacing the
                # destination's own, as the file it replaced.
                properties.clear(conn, dpath, user_id=self._uid)
                properties.copy(conn, spath, dpath, user_id=self._uid)
            # A side file's own properties (its user's) never become a note's: the note keeps its
            # own, which everyone sees, and the side file's end with it when it moved.
            return self._family_node(conn, dfolder, dname, dfam)  # type: ignore[return-value]

    # -- internals ----------------------------------------------------------------------------

    @property
    def _uid(self) -> int:
        return int(self.principal.user_id or 0)

    def _check_org(self, folder: Folder) -> None:
        if folder.org_id is not None:
            self.principal.require_org(folder.org_id, f"path /{folder.path}")

    def _refuse_folder(self, parts: list[str], refusal: StoreError | None) -> None:
        """Raise ``refusal`` (a write, delete or transfer of a folder of the layout) when ``parts``
        name one: after NotFound for a folder this user does not see (another organisation's, a
        guild that does not exist), so that such a folder answers 404 as its files do."""
        folder = folder_of(parts)
        if folder is None:
            return
        if folder.org_id is not None:
            with self.db.connection() as conn:
                self._require_folder(conn, folder)
        if refusal is not None:
            raise refusal

    def _parent(self, parts: list[str]) -> tuple[Folder, str]:
        folder = folder_of(parts[:-1])
        if folder is None:
            raise NotFound(f"unknown folder /{'/'.join(parts[:-1])}")
        self._check_org(folder)
        return folder, parts[-1]

    def _require_folder(self, conn: Conn, folder: Folder) -> None:
        """NotFound unless ``folder`` exists and is this user's to see."""
        self._check_org(folder)
        if layout.created_at(conn, folder) is None:
            raise NotFound(f"unknown folder /{folder.path}")

    def _new_name(self, conn: Conn, folder: Folder, path: str) -> int | None:
        """Before a file is created: NotFound unless ``folder`` exists (and is this user's), and
        the version a rename-away save hid ``path`` at, or None. One query for both."""
        self._check_org(folder)
        exists = layout.exists_query(folder)
        if exists is None:
            return scratch.hiding(conn, self._uid, path)
        row = conn.execute(f"SELECT ({exists[0]}) AS created_at, ({scratch.HIDING_SQL}) AS hiding",
                           (*exists[1], self._uid, path)).fetchone()
        if row["created_at"] is None:
            raise NotFound(f"unknown folder /{folder.path}")
        return row["hiding"]

    def _forget_recent(self) -> None:
        # A write through this tree makes any content kept by an earlier stat() stale.
        with self._lock:
            self._recent.clear()

    def _stat(self, conn: Conn, parts: list[str]) -> Node:
        folder = folder_of(parts)
        if folder is not None:
            self._check_org(folder)
            created = layout.created_at(conn, folder)
            if created is None:
                raise NotFound(f"unknown folder /{folder.path}")
            return _folder_node(folder.path, created, writable=layout.SHAPES[folder.kind].writable,
                                kind="folder" if parts else "root")
        node, content = self._file(conn, parts)
        if content is not None:
            with self._lock:
                if len(self._recent) > 64:
                    self._recent.clear()
                self._recent[node.path] = (time.monotonic(), node.version, content)
        return node

    def _file(self, conn: Conn, parts: list[str], *, cached: bool = True) -> tuple[Node, bytes | None]:
        """The node and bytes at ``parts``; ``cached=False`` reads the row itself (a move reads
        under its row lock, where the read cache may not have heard of the last save yet)."""
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
            family = family_for(folder, name, for_write=False)
        except (NotANote, ReadOnly):
            raise NotFound(f"unknown file /{path}") from None
        cache = self.cache if family.cacheable and cached else None
        hidden_here = False
        if cache is not None:
            hit = cache.get(path)
            hidden_here = _hidden_here(self._uid, path)
            if hit is not None and not hidden_here:
                return hit
            # Hidden by this process's rename-away: the query says whether it still is. A save
            # through another process (a WebDAV PUT beside this mount) ends the hiding in the
            # store, not in this memory, which made the note unreadable here for two minutes.
            generation = cache.generation
        row = family.read(conn, folder, name, hidden_for=self._uid or None)
        if row is None:
            raise NotFound(f"unknown file /{path}")
        if hidden_here:
            _remember_hidden(self._uid, path, False)
        node = _file_node(folder, name, family, row)
        if cache is not None:
            cache.put(path, node, row["content"], generation)
        return node, row["content"]

    def _family_node(self, conn: Conn, folder: Folder, name: str, family: Family) -> Node | None:
        row = family.stat(conn, folder, name, hidden_for=self._uid or None)
        return None if row is None else _file_node(folder, name, family, row)

    def _refuse_if_leased(self, conn: Conn, path: str, *, membership: bool = False) -> None:
        if self.honour_leases:
            leases.refuse_if_leased(conn, path, membership=membership)

    def _unhide(self, conn: Conn, path: str) -> None:
        scratch.unhide(conn, self._uid, path)
        _remember_hidden(self._uid, path, False)

    def _children(self, conn: Conn, folder: Folder) -> tuple[list[Node], list[Node]]:
        """The folder's folders and files, and the files whose bytes a listing may bring along
        (their family's ``prefetch``). One query for the folder, one per family it holds."""
        created = layout.created_at(conn, folder)
        if created is None:
            raise NotFound(f"unknown folder /{folder.path}")
        nodes = [_folder_node(_join(folder.path, d["name"]), d["created_at"], writable=d["writable"])
                 for d in layout.subfolders(conn, folder, self.principal, created)]
        prefetch: list[Node] = []
        for family in families_in(folder):
            files = [_file_node(folder, row["name"], family, row) for row in family.list(conn, folder)]
            nodes += files
            if family.prefetch:
                prefetch += files
        return nodes, prefetch

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
            # A memory.md or task.md never written is there at version 0, with the etag a GET
            # gave: a client that sends it back (davfs2 does on every save) matches.
            tags = [t.strip() for t in self.if_match.split(",")]
            if current is None or ("*" not in tags and current.etag not in tags
                                   and current.etag.strip('"') not in tags):
                have = current.etag if current is not None else "nothing"
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
    if len(data) > MAX_CONTENT_BYTES:
        raise too_large(name, len(data))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        msg = (f"{name} is not UTF-8 text (byte {exc.start} is not valid UTF-8); notes and scripts are "
               "text: save the file as UTF-8")
        raise Invalid(msg, [msg]) from None


def is_side_path(path: str) -> bool:
    """Whether ``path`` names a side file: each user's own, in their scratch area (store.scratch),
    so that what concerns it (a WebDAV lock on it) concerns that user alone."""
    return _side(split(path))


def _side(parts: list[str]) -> bool:
    """A client's side file: a side-file name (store.paths.is_side_file) that is not a folder of
    the layout (org/1/agents/2 has no extension, yet is a folder)."""
    return bool(parts) and is_side_file(parts[-1]) and folder_of(parts) is None


def _join(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name


def _folder_node(path: str, created: datetime, *, writable: bool, kind: NodeKind = "folder") -> Node:
    name = path.rsplit("/", 1)[-1] if path else ""
    return Node(path, name, kind, True, 0, 0, "", created, created, "httpd/unix-directory", writable, False)


def _file_node(folder: Folder, name: str, family: Family, row: dict) -> Node:
    return Node(_join(folder.path, name), name, family.kind, False, int(row["size"]), int(row["version"]),  # type: ignore[arg-type]
                f'"{row["tag"]}-v{row["version"]}"', row["created_at"], row["updated_at"],
                family.content_type, family.writable, family.deletable)

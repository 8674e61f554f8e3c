"""HostOperations: the kernel's requests, each answered with one Host tree call.

Every rule (what may be written, deleted, moved, what is read-only) is the Host tree's
(store/host.py); this module only maps inodes to paths (inodes.py), keeps open files' bytes until
they are committed as one version (handles.py), and turns store errors into errno values
(errors.py). The store is synchronous, so each call runs in a worker thread under a limiter no
larger than the connection pool, the trio form of Datasette's ``execute_fn``.
"""
from __future__ import annotations

import contextlib
import errno
import functools
import logging
import math
import os
import stat
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Any

import pyfuse3
import trio
from pyfuse3 import FUSEError

from fuse_mount.errors import log_refusal
from fuse_mount.handles import HandleTable, OpenFile
from fuse_mount.inodes import DirectoryListing, InodeTable, join, parent_of
from store.errors import NotFound, PreconditionFailed, StoreError
from store.events import tree_paths
from store.host import is_side_path
from fuse_mount.listings import MISSING, ListingCache, drop_folder
from fuse_mount.own_writes import Flight, OwnWrites, Written
from store.paths import diverged_copy_path, is_side_file, nfc

log = logging.getLogger("hostfinder.fuse")

# How long the kernel may keep names and attributes without asking again. Changes made elsewhere
# are pushed by events.py (invalidation, and everything is dropped when the listener reconnects),
# so this only bounds how long a missed event could leave a stale name or size: long enough that a
# user's repeated `grep -r` or build never asks again, short enough to heal within a minute.
CACHE_SECONDS = 60.0
# Records and collection.json get no event per file when a schema change rewrites them all, so
# their names and sizes are kept only briefly (and their pages not at all, see open()).
SHORT_CACHE_SECONDS = 1.0
# A side file created through the mount (an editor's temp file, Python's mkstemp name) is kept in
# memory after it is closed, for this long, before it goes to the user's scratch area: the rename
# over the note that usually follows then writes the note's next version in one transaction,
# instead of a scratch write at fsync and a move at rename.
HOLD_SIDE_SECONDS = 2.0
# A closed file whose save the store did not answer is tried again every HOLD_SIDE_SECONDS, this
# many times (ten minutes: a PostgreSQL restart takes seconds), before its bytes are given up.
UNANSWERED_TRIES = 300
# Closed files held for later are looked at in batches, this often at most (so one is saved
# HOLD_SIDE_SECONDS to HOLD_SIDE_SECONDS + this after its close).
HOLD_GRAIN_SECONDS = 0.25
# A folder's listing is kept for the next `ls`, `grep -r` or editor save this long, unless it says
# it holds for less (HostTree.listing: a side file expiring, a rename-away's hiding ending). Every
# other change of a kept folder sends an event (its notes', and the user's side files' from their
# other clients, sql/032) that drops the changed name at once, and a lost feed drops them all, so
# this is only a backstop, as rclone's --dir-cache-time (5 minutes) is for a backend that reports
# its changes. A save long after the folder was listed then asks nothing about its names.
LISTING_SECONDS = 300.0
# While the change feed is down (or not up yet) listings are kept this long at most: changes made
# meanwhile send their events to nobody.
UNFOLLOWED_LISTING_SECONDS = 5.0
# How long a write made through this mount waits for its own change event: that event names a
# file whose new bytes the kernel already holds, so it is not obeyed (own_writes.py).
OWN_EVENT_SECONDS = 5.0
# Host tree calls that change a folder's listing (their path arguments' folders are dropped).
CHANGES_LISTING = frozenset({"write", "move", "copy", "delete"})
BLOCK = 4096


def _cache_seconds(path: str) -> float:
    return SHORT_CACHE_SECONDS if _rewritten_whole(path) else CACHE_SECONDS


def _listing_seconds(path: str) -> float:
    return SHORT_CACHE_SECONDS if _rewritten_whole(path) else LISTING_SECONDS


def _rewritten_whole(path: str) -> bool:
    """Records and collection.json, which a schema change rewrites with no event per file."""
    return "/collections/" in f"/{path}/"


def _ns(when: datetime | None) -> int:
    return int(when.timestamp() * 1e9) if when is not None else 0


class _ThreadTree:
    """This mount's Tree for store.handles: each call goes to the calling worker thread's own
    Host tree (the mount keeps one per thread, see HostOperations._tree)."""

    def __init__(self, tree: Callable[[], Any]) -> None:
        self._tree = tree

    def read(self, path: str) -> bytes:
        return self._tree().read(path)

    def write(self, path: str, data: bytes, **conditions: Any) -> Any:
        return self._tree().write(path, data, **conditions)


class HostOperations(pyfuse3.Operations):
    """pyfuse3 operations over a Host tree. ``make_tree`` builds one HostTree; one is kept per
    worker thread, since a HostTree is not meant to be shared between threads."""

    supports_dot_lookup = True
    enable_writeback_cache = False

    def __init__(self, make_tree: Callable[[], Any], *, concurrency: int = 8) -> None:
        super().__init__()
        self._make_tree = make_tree
        self._local = threading.local()
        self.limiter = trio.CapacityLimiter(concurrency)
        self.inodes = InodeTable()
        self.handles = HandleTable(_ThreadTree(self._tree))
        self._dirs: dict[int, tuple[int, DirectoryListing]] = {}
        # One lock per inode, held while a save, unlink or rename of it runs: a release's commit
        # still in flight must not race an unlink (vim closes then removes its swap file).
        self._locks: dict[int, trio.Lock] = {}
        self._dir_serial = 0
        self.uid, self.gid = os.getuid(), os.getgid()
        # Folders' nodes (writable or not), for create: they change only when a folder goes.
        self._folders: dict[str, tuple[float, Any]] = {}
        self.listings = ListingCache(UNFOLLOWED_LISTING_SECONDS)
        # This mount's writes whose change events are on their way (invalidate).
        self.own = OwnWrites(OWN_EVENT_SECONDS)
        # What this mount's last write to a path gave (node, and bytes when known), until
        # anything else changes the path (own_writes.Written).
        self.written = Written()
        # Where closed side files wait to be committed (set by command.py's event loop); without
        # one, a side file is committed when it is released, as any other file.
        self.nursery: trio.Nursery | None = None
        # Closed files held for a later save, in the order they fall due (_hold, _commit_due).
        self._due: deque[tuple[float, OpenFile, int]] = deque()
        self._due_added: trio.Event | None = None   # set when the first of them arrives
        self._due_task = False

    # -- plumbing ---------------------------------------------------------------------------

    def _tree(self) -> Any:
        tree = getattr(self._local, "tree", None)
        if tree is None:
            tree = self._local.tree = self._make_tree()
        return tree

    async def _call(self, operation: str, path: str, method: str, *args: Any, quiet: bool = False,
                    **kwargs: Any) -> Any:
        """Run ``HostTree.<method>(*args)`` in a worker thread; a failure becomes FUSEError with
        one log line (``quiet``: a lookup miss is an answer, not a refusal, and is not logged)."""
        def run() -> Any:
            return getattr(self._tree(), method)(*args, **kwargs)
        return await self._run(operation, path, run, quiet=quiet,
                               changes=args if method in CHANGES_LISTING else ())

    async def _run(self, operation: str, path: str, fn: Callable[[], Any], *, quiet: bool = False,
                   changes: tuple[Any, ...] = ()) -> Any:
        """``fn`` (store calls) in a worker thread, errors as _call; ``changes``: the paths whose
        kept listings it makes unsure."""
        log.debug("store call: %s %s", operation, path)  # (-v: what each request costs the store)
        try:
            return await trio.to_thread.run_sync(fn, limiter=self.limiter)
        except Exception as exc:
            if quiet and isinstance(exc, NotFound):
                raise FUSEError(errno.ENOENT) from None
            raise FUSEError(log_refusal(operation, path, exc)) from None
        finally:
            self._drop_listings(*changes)

    @contextlib.asynccontextmanager
    async def _own_write(self, path: str) -> AsyncIterator[Flight]:
        """Around a write of ours to ``path`` (own_writes.py): the body sets ``kept`` once the
        kernel holds exactly what it committed; if an event for ``path`` came while it ran, whose
        it was cannot be told, and the path is dropped when the body is done (after a rename has
        given the name its new inode, so that the kernel forgets the new bytes too)."""
        flight = self.own.begin(path)
        try:
            yield flight
        finally:
            if self.own.end(path, flight):
                await self._drop(path)

    def _wrote_version(self, path: str, node: Any, serial: int | None = None,
                       data: bytes | None = None) -> bool:
        """This mount wrote ``node`` at ``path`` (``data``: its body, when known exactly): whether
        it is a file's version (whose event is then on its way, and which the kernel holds when
        the writer was the file's only handle). ``serial``: the listings' serial before the
        write, when the write was the one change."""
        if serial is not None and node is not None:
            self.listings.wrote(path, node, serial)
        if not (getattr(node, "version", 0) and not getattr(node, "is_dir", True)):
            return False
        # Not side files: one also goes by the clock (a day after its last write), which no event
        # announces, and this keeps what it holds until an event takes it away.
        if not is_side_file(path.rsplit("/", 1)[-1]):
            self.written.put(path, node, data)
        return True

    def _drop_listings(self, *paths: Any) -> None:
        """``paths`` changed: what the kept listings say about them is unsure now."""
        for p in paths:
            if isinstance(p, str):
                self.listings.changed(p)
                self.written.pop(p)

    def _peek(self, path: str) -> Any:
        """(node, bytes) from what this mount last wrote there, or from the store's event-kept
        content cache, answered in the event loop with no thread hop and no query; None when only
        the store can answer."""
        hit = self.written.get(path)
        if hit is not None:
            return hit
        try:
            return self._tree().peek(path)
        except Exception:  # the full path gives any refusal its errno and log line
            return None

    def _inline(self, operation: str, path: str, method: str, *args: Any) -> Any:
        """A Host tree call that runs no query (check_write of a side file's name): in the event
        loop, errors as _call, where a thread hop on every create of an editor's temp file would
        slow every editor's save."""
        try:
            return getattr(self._tree(), method)(*args)
        except Exception as exc:
            raise FUSEError(log_refusal(operation, path, exc)) from None

    async def _folder(self, operation: str, path: str) -> Any:
        node = self._kept_folder(path)
        if node is None:
            node = self._keep_folder(path, await self._call(operation, path, "stat", path))
        return node

    def _kept_folder(self, path: str) -> Any:
        """The node of folder ``path`` as last seen, or None. A folder's node changes only when
        the folder goes (its time is its creation, its writability its kind's), and the kernel
        asks for it after every create and rename in it (they invalidate its attributes): an
        editor's save would otherwise cost a query or two for the folder beside its write."""
        hit = self._folders.get(path)
        return hit[1] if hit is not None and hit[0] > time.monotonic() else None

    def _keep_folder(self, path: str, node: Any) -> Any:
        if node.is_dir:
            self._folders[path] = (time.monotonic() + CACHE_SECONDS, node)
        return node

    def _path(self, ino: int) -> str:
        try:
            return self.inodes.path_of(ino)
        except KeyError:
            raise FUSEError(errno.ENOENT) from None

    def _attrs(self, ino: int, *, is_dir: bool, writable: bool, size: int, modified: datetime | None,
               created: datetime | None, path: str = "") -> pyfuse3.EntryAttributes:
        a = pyfuse3.EntryAttributes()
        a.st_ino = ino
        a.generation = 0
        a.entry_timeout = a.attr_timeout = _cache_seconds(path)
        # Mode bits tell the truth: 0444 for read-only files (collections, history), 0555 for
        # folders that refuse new files. Permission to write is the tree's, not the caller's uid.
        if is_dir:
            a.st_mode = stat.S_IFDIR | (0o755 if writable else 0o555)
            a.st_nlink = 2
        else:
            a.st_mode = stat.S_IFREG | (0o644 if writable else 0o444)
            a.st_nlink = 1
        a.st_uid, a.st_gid = self.uid, self.gid
        a.st_size = size
        a.st_blksize = BLOCK
        a.st_blocks = (size + 511) // 512
        a.st_mtime_ns = a.st_ctime_ns = a.st_atime_ns = _ns(modified)
        a.st_birthtime_ns = _ns(created)
        return a

    def _node_attrs(self, ino: int, node: Any, size: int | None = None) -> pyfuse3.EntryAttributes:
        return self._attrs(ino, is_dir=node.is_dir, writable=node.writable,
                           size=node.size if size is None else size,
                           modified=node.modified_at, created=node.created_at, path=node.path)

    def _handle_attrs(self, handle: OpenFile) -> pyfuse3.EntryAttributes:
        """A file being written: its size is the uncommitted body's."""
        node = handle.node
        now = datetime.now().astimezone()
        return self._attrs(handle.ino, is_dir=False, writable=True, size=handle.size,
                           modified=getattr(node, "modified_at", None) or now,
                           created=getattr(node, "created_at", None) or now, path=handle.path)

    # -- names and attributes ---------------------------------------------------------------

    async def lookup(self, parent_inode: int, name: bytes, ctx: Any = None) -> pyfuse3.EntryAttributes:
        parent = self._path(parent_inode)
        text = os.fsdecode(name)
        if text == ".":
            path = parent
        elif text == "..":
            path = parent_of(parent)
        else:
            path = join(parent, text)
        known = self.inodes.known(path)
        if known is not None:
            writer = self.handles.dirty_writer(known)
            if writer is not None and writer.new:
                self.inodes.remember(path)
                return self._handle_attrs(writer)
        listed = self.listings.lookup(parent, text) if text not in (".", "..") else MISSING
        if listed is not MISSING:
            # The folder's listing is fresh (listings.py): it answers the name, present or not,
            # as an editor's probe for a free temp name or grep's walk ask it, without a query.
            if listed is None:
                raise FUSEError(errno.ENOENT)
            return self._node_attrs(self.inodes.remember(path), listed)
        node = self._kept_folder(path) or self.written.node(path)
        if node is None:
            hit = self._peek(path)
            node = hit[0] if hit is not None else self._keep_folder(
                path, await self._call("lookup", path, "stat", path, quiet=True))
        if text in (".", ".."):
            return self._node_attrs(self.inodes.inode_for(path), node)
        return self._node_attrs(self.inodes.remember(path), node)

    async def forget(self, inode_list: Any) -> None:
        for ino, count in inode_list:
            self.inodes.forget(ino, count)

    async def getattr(self, inode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        writer = self.handles.dirty_writer(inode)
        if writer is not None:
            return self._handle_attrs(writer)
        try:
            path = self.inodes.path_of(inode)
        except KeyError:
            # Unlinked or renamed over while still open: answer from the open file.
            open_files = self.handles.on_inode(inode)
            if open_files and open_files[0].node is not None:
                h = open_files[0]
                return self._node_attrs(inode, h.node, size=h.size if h.loaded else None)
            raise FUSEError(errno.ENOENT) from None
        node = self._kept_folder(path) or self.written.node(path)
        if node is None:
            hit = self._peek(path)
            node = hit[0] if hit is not None else self._keep_folder(
                path, await self._call("getattr", path, "stat", path, quiet=True))
        return self._node_attrs(inode, node)

    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes, fields: pyfuse3.SetattrFields,
                      fh: int | None, ctx: Any = None) -> pyfuse3.EntryAttributes:
        current = await self.getattr(inode, ctx)
        path = self.inodes.last_path(inode) or ""
        # The tree has no permission bits to change: a mode change is taken and has no effect (the
        # file still reports the tree's rules, 0444 for a read-only one, which a write still
        # meets), as on davfs2 or a FAT disk mounted quiet. Refused, it failed the tools that copy
        # modes as part of a copy: rsync -a (its temp file's fchmod, so nothing was copied),
        # cp -a and install -m (the note saved, and the command failed).
        if fields.update_mode and stat.S_IMODE(attr.st_mode) != stat.S_IMODE(current.st_mode):
            log.debug("chmod %s to %o: mode bits follow the tree's rules; nothing changed", path,
                      stat.S_IMODE(attr.st_mode))
        if (fields.update_uid and attr.st_uid != self.uid) or (fields.update_gid and attr.st_gid != self.gid):
            log.info("refused chown %s: files on this mount belong to the mounting user [EPERM]", path)
            raise FUSEError(errno.EPERM)
        if fields.update_size:
            handle = self.handles.find(fh) or self.handles.dirty_writer(inode) or next(
                (h for h in self.handles.on_inode(inode) if h.writable), None)
            if handle is not None:
                # Part of a save (open(O_TRUNC), ftruncate): commit with the writes that follow.
                await self._load(handle, writing=True)
                self._in_memory("truncate", handle, handle.truncate, attr.st_size)
            elif attr.st_size != current.st_size:
                # truncate(1) on a closed file: that is the whole save, one version now.
                data = await self._call("truncate", path, "read", path)
                data = data[:attr.st_size].ljust(attr.st_size, b"\0")
                serial = self.listings.serial
                async with self._own_write(path) as flight:
                    node = await self._call("truncate", path, "write", path, data)
                    # (The kernel cut or zero-filled its own pages to the same size.)
                    flight.kept = self._wrote_version(path, node, serial, data)
                return self._node_attrs(inode, node)
            return await self.getattr(inode, ctx)
        # Times: the store keeps its own modification time (the last version's); touch succeeds.
        return current

    # -- folders ----------------------------------------------------------------------------

    async def opendir(self, inode: int, ctx: Any = None) -> int:
        self._path(inode)
        self._dir_serial += 1
        self._dirs[self._dir_serial] = (inode, DirectoryListing())
        return self._dir_serial

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        inode, listing = self._dirs[fh]
        path = self._path(inode)
        if start_id == 0:
            # One listing per pass (a bounded number of queries in the tree), kept for the
            # kernel's follow-up calls and, until something changes, for the next pass.
            cached = self.listings.entries(path)
            if cached is not None:
                listing.share(cached)
            else:
                serial = self.listings.serial
                nodes, lasts = await self._call("readdir", path, "listing", path)
                parent = parent_of(path)
                dot = await self._folder("readdir", path)
                dotdot = dot if not path else await self._folder("readdir", parent)
                listing.fill((path, dot), (parent, dotdot), [(n.name, (n.path, n)) for n in nodes])
                self.listings.put(path, serial, listing.shared(), nodes,
                                  min(_listing_seconds(path), math.inf if lasts is None else lasts))
            # Files created here and not committed yet (a held side file such as vim's swap, a
            # note still being written) are not in the store's listing; `ls` must still show them.
            # Added per pass, never kept: they come and go without a store call.
            listing.add([(nfc(h.path.rsplit("/", 1)[-1]), (h.path, h)) for h in self.handles.created_in(path)
                         if self.inodes.known(h.path) == h.ino])
        for key, item in listing.after(start_id):
            child_path, node = item  # type: ignore[misc]
            is_dot = key[0] == 0
            ino = self.inodes.inode_for(child_path)
            attrs = self._handle_attrs(node) if isinstance(node, OpenFile) else self._node_attrs(ino, node)
            if not pyfuse3.readdir_reply(token, os.fsencode(key[1]), attrs, listing.offset_for(key)):
                return
            if not is_dot:  # '.' and '..' must not change lookup counts
                self.inodes.remember(child_path)

    async def releasedir(self, fh: int) -> None:
        self._dirs.pop(fh, None)

    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        path = join(self._path(parent_inode), os.fsdecode(name))
        await self._call("mkdir", path, "mkdir", path)
        raise FUSEError(errno.EPERM)  # mkdir always refuses; not reached

    async def rmdir(self, parent_inode: int, name: bytes, ctx: Any = None) -> None:
        path = join(self._path(parent_inode), os.fsdecode(name))
        await self._call("rmdir", path, "delete", path)

    # -- files ------------------------------------------------------------------------------

    async def open(self, inode: int, flags: int, ctx: Any = None) -> pyfuse3.FileInfo:
        # One open of a file at a time (and none while it commits): an open that awaits the store
        # (a stat, the body) must find a description registered by another open meanwhile, or the
        # two get bodies of their own and two `>>` appenders lose lines to each other.
        async with self._lock(inode):
            return await self._open(inode, flags)

    async def _open(self, inode: int, flags: int) -> pyfuse3.FileInfo:
        path = self._path(inode)
        writing = (flags & os.O_ACCMODE) != os.O_RDONLY
        source = self.handles.sharing(inode)
        if source is not None:
            # The file is open already: this description reads and writes the same body, as on a
            # disk, so two writers of different parts (or two `>>` appenders) both keep their
            # bytes, and a reader sees what was written and not yet saved.
            if writing and not flags & os.O_TRUNC and not source.dirty:
                # A body with no unsaved bytes is a version the store had, and may be one from
                # before a change made elsewhere whose event is still on its way (a close reaches
                # us after it has returned, so a reader's or an earlier writer's description can
                # still hold it): written into, it is the store's now (as below).
                node, data = await self._current_writable(path)
                source.refresh(node, data)
            elif writing and not any(h.writable and not h.orphaned and h.body is source.body
                                     for h in self.handles.on_inode(inode)):
                # (A description of this file open for writing already answers it: the file may
                # be one this mount created and holds, which the store has not got yet.)
                await self._writable("open", path)
            handle = self.handles.open(inode, path, writable=writing, share=source)
            handle.appending = writing and bool(flags & os.O_APPEND)
            if writing and flags & os.O_TRUNC:
                handle.empty()
            if writing:
                # A closed file still held (a temp file opened again for more, `>` then `>>`;
                # a save the store did not answer): this handle carries its bytes from now on and
                # commits them, so the writes that follow are kept with them, and a held one can
                # no longer save this writer's unfinished body on its own.
                for held in [h for h in self.handles.on_inode(inode) if h.released and h.body is handle.body]:
                    handle.owes = handle.owes or held.owes
                    self.handles.close(held.fh)
            return pyfuse3.FileInfo(fh=handle.fh)
        if writing:
            if flags & os.O_TRUNC:
                # libfuse passes O_TRUNC to open (atomic_o_trunc): the save starts empty and
                # becomes one version with the writes that follow.
                node = await self._writable("open", path, self._peek(path))
                handle = self.handles.open(inode, path, writable=True, node=node)
                handle.empty()
                return pyfuse3.FileInfo(fh=handle.fh)
            # Writing into what is there (`>>`, a program patching bytes in place): the body is
            # the store's, asked now, not the copy kept by change events, which lags a change
            # made elsewhere by that change's event (10-20 ms): a `>>` right after an agent's
            # note_write saved the text from before it with the line added, and the agent's
            # text was gone.
            node, data = await self._current_writable(path)
            handle = self.handles.open(inode, path, writable=True, data=data, node=node)
            handle.current = True
            handle.appending = bool(flags & os.O_APPEND)
            return pyfuse3.FileInfo(fh=handle.fh)
        # Reading: the bytes are fetched at the first read, and the kernel may keep the pages it
        # already holds (keep_cache), so re-reading an unchanged note costs no call at all. A change
        # made elsewhere reaches us as an event, which drops those pages (invalidate).
        handle = self.handles.open(inode, path, writable=False)
        # Not for collections/: a schema change rewrites every record's JSON with one event for the
        # collection, none per record, so their pages must be read afresh at each open.
        return pyfuse3.FileInfo(fh=handle.fh, keep_cache="/collections/" not in f"/{path}")

    async def _writable(self, operation: str, path: str, hit: tuple[Any, bytes] | None = None) -> Any:
        """The file's node when it may be opened for writing, else EACCES."""
        node = hit[0] if hit is not None else await self._call(operation, path, "stat", path)
        if node.is_dir or not node.writable:
            log.info("refused open for writing %s: the tree keeps it read-only (%s) [EACCES]", path, node.kind)
            raise FUSEError(errno.EACCES)
        return node

    async def _current_writable(self, path: str) -> tuple[Any, bytes]:
        """(node, bytes) of the file as the store holds it now, past every copy kept here, when it
        may be opened for writing, else EACCES."""
        hit = await self._call("open", path, "current", path)
        await self._writable("open", path, hit)
        return hit

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: Any = None) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        parent = self._path(parent_inode)
        path = join(parent, os.fsdecode(name))
        folder = await self._folder("create", parent)
        if not folder.writable:
            log.info("refused create %s: /%s does not accept new files [EACCES]", path, parent)
            raise FUSEError(errno.EACCES)
        # A name the tree would refuse (notes.txt), or a new note whose folder's owner already
        # holds its 10 000 live files, fails here, with the tree's own sentence in the log, rather
        # than at close, where `echo > notes.txt` in a shell would never see it. A side file (an
        # editor's temp file: most creates) asks the store nothing, so in the event loop; any
        # other name asks it one question (HostTree.check_write with new=True), in a worker thread.
        if is_side_path(path):
            self._inline("create", path, "check_write", path)
        else:
            await self._call("create", path, "check_write", path, new=True)
        # Nothing is written yet: the file becomes one version when it is first flushed, so
        # `cp` or an editor's save is one version.
        ino = self.inodes.remember(path)
        handle = self.handles.open(ino, path, writable=True, data=b"", new=True)
        handle.exclusive = bool(flags & os.O_EXCL)
        return pyfuse3.FileInfo(fh=handle.fh), self._handle_attrs(handle)

    async def _load(self, handle: OpenFile, *, writing: bool = False) -> None:
        """The body, once per open: from the content cache when it holds it, else one query.
        ``writing``: for a write into it, which must start from the store's own bytes (Body.current)."""
        if writing and not (handle.dirty or handle.current):
            # The body open() read past the caches is gone (a change event emptied it, the event of
            # this mount's own earlier save among them) or was never there (a reader had loaded it
            # from the cache): loaded again from the cache now, it could lack a change made
            # elsewhere whose event is still on its way, and this write would save over it.
            node, data = await self._call("write", handle.path, "current", handle.path)
            if not handle.current:  # (nothing read it afresh meanwhile; refresh keeps what was written)
                handle.refresh(node, data)
            return
        if not handle.loaded:
            hit = self._peek(handle.path)
            data = hit[1] if hit is not None else await self._call("read", handle.path, "read", handle.path)
            handle.fill(data)  # (unless another request on this handle loaded it meanwhile)

    async def read(self, fh: int, off: int, size: int) -> bytes:
        handle = self.handles.get(fh)
        await self._load(handle)
        return handle.read(off, size)

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        handle = self.handles.get(fh)
        if not handle.writable:
            raise FUSEError(errno.EBADF)
        await self._load(handle, writing=True)
        if handle.appending:
            off = handle.size  # (see OpenFile.appending)
        return self._in_memory("write", handle, handle.write, off, buf)

    def _in_memory(self, operation: str, handle: OpenFile, fn: Callable[..., Any], *args: Any) -> Any:
        """A change to a handle's body (no store call): the store's refusal of a body past the
        cap becomes an errno with one log line, as a store call's would."""
        try:
            return fn(*args)
        except StoreError as exc:
            raise FUSEError(log_refusal(operation, handle.path, exc)) from None

    @contextlib.asynccontextmanager
    async def _lock(self, ino: int | None) -> AsyncIterator[None]:
        """Hold the inode's lock. It leaves the table once no task holds or awaits it (every open
        takes it: a `grep -r` over 100 000 notes would otherwise leave 100 000 locks behind)."""
        if ino is None:
            yield
            return
        lock = self._locks.get(ino)
        if lock is None:
            lock = self._locks[ino] = trio.Lock()
        try:
            async with lock:
                yield
        finally:
            # (trio hands a released lock straight to a waiting task, which then holds it.)
            if not lock.locked() and self._locks.get(ino) is lock:
                del self._locks[ino]

    async def _commit(self, handle: OpenFile, operation: str, *, at_flush: bool = False) -> None:
        if not handle.needs_commit:
            return
        async with self._lock(handle.ino):
            await self._commit_locked(handle, operation, at_flush=at_flush)

    async def _commit_locked(self, handle: OpenFile, operation: str, *, at_flush: bool = False) -> None:
        """Write the handle's body as one new version (nothing if it has not changed, or if this
        description did not change it: a reader's close never saves a writer's unfinished body)."""
        if not handle.needs_commit or not handle.owes:
            return
        if at_flush and not handle.wrote:
            return  # created or opened with O_TRUNC, nothing written yet: release commits it
        if handle.unanswered:
            await self._save_late(handle)   # a try the store did not answer came before
            return
        created = handle.new
        serial = self.listings.serial
        async with self._own_write(handle.path) as flight:
            try:
                # A refused commit is reported once (flush, which close() returns): the handle
                # forgets its changes, so release does not write them again.
                node = await self._run(operation, handle.path,
                                       lambda: handle.commit(if_none_match=handle.new and handle.exclusive),
                                       changes=(handle.path,))
            except FUSEError:
                if handle.unanswered:
                    raise   # the store did not answer: the body stays as written, for the next try
                if created:
                    self._drop_phantom(handle)
                else:
                    # The kernel holds the refused bytes (its pages, the size): what the store
                    # holds is read again, by it and by the file's open descriptions.
                    await self._drop(handle.path)
                raise
            if len(self.handles.on_inode(handle.ino)) == 1:
                # (With other descriptors open on it, the kernel's pages mix what each one wrote:
                # the event of this version then drops them, as one from elsewhere would.)
                flight.kept = self._wrote_version(handle.path, node, serial)
        # A description of this inode that does not share this body (it was orphaned, by an
        # unlink or a rename over it, before this one opened) was reading the old bytes.
        for other in self.handles.on_inode(handle.ino):
            if other.body is not handle.body:
                other.reload(node)

    def _drop_phantom(self, handle: OpenFile) -> None:
        """A created file the tree refused: make the kernel forget the name it was given."""
        path = handle.path
        self._drop_listings(path)
        self.inodes.remove(path)
        parent_ino = self.inodes.known(parent_of(path))
        if parent_ino is not None:
            pyfuse3.invalidate_entry_async(parent_ino, os.fsencode(path.rsplit("/", 1)[-1]),
                                           ignore_enoent=True)

    def _held(self, handle: OpenFile) -> bool:
        """A side file this mount created and has not committed: it stays in memory until it is
        renamed (usually over a note, see rename), unlinked, or closed for HOLD_SIDE_SECONDS."""
        return self.nursery is not None and handle.new and is_side_file(handle.path.rsplit("/", 1)[-1])

    async def flush(self, fh: int) -> None:
        handle = self.handles.get(fh)
        if self._held(handle):
            handle.flushed = True
        else:
            await self._commit(handle, "save", at_flush=True)

    async def fsync(self, fh: int, datasync: bool) -> None:
        handle = self.handles.get(fh)
        if not self._held(handle):
            await self._commit(handle, "fsync")

    async def release(self, fh: int) -> None:
        handle = self.handles.get(fh)
        if self._held(handle) and handle.needs_commit and self.nursery is not None:
            handle.released = True
            self._hold(handle)
            return
        retry = False
        try:
            await self._commit(handle, "save")
        except FUSEError:
            # Logged; release has no caller to tell. A save the store did not answer (it is down
            # or restarting) is held and tried again, as a closed temp file is, not dropped.
            retry = handle.unanswered and self.nursery is not None
        finally:
            if retry:
                handle.released = True
                self._hold(handle)
            else:
                self.handles.close(fh)

    def _hold(self, handle: OpenFile, attempt: int = 0) -> None:
        """Save the closed ``handle`` HOLD_SIDE_SECONDS from now, unless a rename over a note, an
        unlink or a writer takes it first (as the rename of an editor's save does, within
        milliseconds). One task waits for all of them (_commit_due): a task per close, each
        sleeping on a timer of its own that almost never fired, made the mount spend 1.50 ms of CPU
        an editor's save instead of 1.25 (trio's deadlines and cancel scopes; 3 x 1 000 saves of
        bench.fuse's kind, each code run twice, alternating). Called in the event loop."""
        self._due.append((trio.current_time() + HOLD_SIDE_SECONDS, handle, attempt))
        if not self._due_task and self.nursery is not None:
            self._due_task = True
            self.nursery.start_soon(self._commit_due)
        elif self._due_added is not None:
            self._due_added.set()

    async def _commit_due(self) -> None:
        """The one task behind _hold: every entry waits the same time, so they fall due in the
        order they were added, and only the first needs a timer. A file still held when its time
        comes is saved in a task of its own, so a store that does not answer delays no other."""
        while True:
            if not self._due:
                self._due_added = trio.Event()
                await self._due_added.wait()
                self._due_added = None
            # Woken once per HOLD_GRAIN_SECONDS at most, for every file due by then: a timer per
            # file, at a few hundred saves a second, costs what a task per file did.
            await trio.sleep_until(self._due[0][0] + HOLD_GRAIN_SECONDS)
            now = trio.current_time()
            while self._due and self._due[0][0] <= now:
                _, handle, attempt = self._due.popleft()
                if self.handles.find(handle.fh) is handle and self.nursery is not None:
                    self.nursery.start_soon(functools.partial(self._commit_released, handle, attempt=attempt))

    async def _commit_released(self, handle: OpenFile, *, attempt: int | None = 0) -> None:
        """Save a closed file this mount still holds; ``attempt`` counts the tries a store that
        did not answer has cost so far (None: no more tries, the mount is going)."""
        async with self._lock(handle.ino):
            if self.handles.find(handle.fh) is not handle:
                return  # renamed over a note meanwhile (and closed there), or taken over by a writer
            try:
                await self._commit_locked(handle, "save")
            except FUSEError:
                if handle.unanswered and attempt is not None and attempt < UNANSWERED_TRIES and self.nursery is not None:
                    self._hold(handle, attempt + 1)
                    return   # held: a rename or an open meanwhile finds it whole
                if handle.unanswered:
                    log.warning("lost the save of %s: the store did not answer for %d s", handle.path,
                                int((attempt or 0) * HOLD_SIDE_SECONDS))
                    await self._drop(handle.path)   # the kernel's pages hold bytes the store never got
                # (else logged; the file is gone, as a write error at close would leave it)
            self.handles.close(handle.fh)

    async def _save_late(self, handle: OpenFile) -> None:
        """A save the store did not answer, tried again (by the writer's next fsync or close, or
        by the mount holding a closed file): only over the version the body was based on, so a
        change made elsewhere meanwhile is never overwritten by the older text. If the note did
        change, the text goes to a copy beside it, named for when it was saved, and the log says
        so; if it holds this very text (the first try did land), that is the save."""
        base = handle.node
        body = bytes(handle.data)
        path = handle.path

        def save() -> tuple[Any, str | None]:
            try:
                return handle.commit(if_match=None if handle.new or base is None else base.etag,
                                     if_none_match=handle.new), None
            except PreconditionFailed:
                tree = self._tree()
                if tree.read(path) == body:
                    node = tree.stat(path)
                    handle.saved_as(node)
                    return node, None
                copy = diverged_copy_path(path)
                return tree.write(copy, body, if_none_match=True), copy

        async with self._own_write(path) as flight:
            node, copy = await self._run("save", path, save, changes=(path,))
            if copy is None:
                flight.kept = self._wrote_version(path, node)
                return
        log.warning("%s changed elsewhere while this mount could not save it; the text saved here is "
                    "kept as %s", path, copy)
        await self._drop(path)

    async def commit_held(self) -> None:
        """At unmount: closed files still held in memory (side files, saves the store did not
        answer) are saved now (a close's release may still be on its way when the unmount comes)."""
        for handle in [h for h in self.handles.all() if h.released or (h.flushed and h.needs_commit)]:
            await self._commit_released(handle, attempt=None)

    async def unlink(self, parent_inode: int, name: bytes, ctx: Any = None) -> None:
        path = join(self._path(parent_inode), os.fsdecode(name))
        ino = self.inodes.known(path)
        async with self._lock(ino):
            pending = self.handles.pending_new(ino) if ino is not None else None
            if pending is None:
                await self._call("unlink", path, "delete", path)
            if ino is not None:
                self.handles.orphan(ino)  # writes to an unlinked open file go nowhere, as on a disk
            self.inodes.remove(path)

    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int, name_new: bytes,
                     flags: int, ctx: Any = None) -> None:
        src = join(self._path(parent_inode_old), os.fsdecode(name_old))
        dst = join(self._path(parent_inode_new), os.fsdecode(name_new))
        if flags & pyfuse3.RENAME_EXCHANGE:
            log.info("refused rename %s -> %s: exchanging two files is not supported [EINVAL]", src, dst)
            raise FUSEError(errno.EINVAL)
        src_ino = self.inodes.known(src)
        async with self._lock(src_ino):
            held = self.handles.pending_new(src_ino) if src_ino is not None else None
            if (held is not None and self._held(held) and not flags & pyfuse3.RENAME_NOREPLACE
                    and held.refusal is None and self.handles.dirty_writers(src_ino) == [held]):  # type: ignore[arg-type]
                # An editor's save: its temp file, never committed, renamed over the note. The
                # store's move of a side file over a file is that file's next version; writing
                # the temp file's bytes to the destination is the same version in one transaction.
                serial = self.listings.serial
                async with self._own_write(dst) as flight:
                    body = bytes(held.data)
                    node = await self._call("rename", f"{src} -> {dst}", "write", dst, body)
                    flight.kept = self._wrote_version(dst, node, serial, body)
                    for handle in self.handles.on_inode(src_ino):  # type: ignore[arg-type]
                        handle.saved_as(node)
                        if handle.released:
                            self.handles.close(handle.fh)
                    self._moved(src, dst, src_ino)
                return
            if src_ino is not None:
                # A file still open with unsaved bytes is saved first, so the move carries them.
                for handle in self.handles.on_inode(src_ino):
                    await self._commit_locked(handle, "rename")
            async with self._own_write(dst) as flight:
                node = await self._call("rename", f"{src} -> {dst}", "move", src, dst,
                                        overwrite=not flags & pyfuse3.RENAME_NOREPLACE)
                flight.kept = self._wrote_version(dst, node)
                self._moved(src, dst, src_ino)

    def _moved(self, src: str, dst: str, src_ino: int | None) -> None:
        dst_ino = self.inodes.known(dst)
        if dst_ino is not None and dst_ino != src_ino:
            self.handles.orphan(dst_ino)
        ino = self.inodes.rename(src, dst)
        self.handles.moved(ino, dst)

    async def link(self, inode: int, new_parent_inode: int, new_name: bytes, ctx: Any = None) -> pyfuse3.EntryAttributes:
        log.info("refused link %s: the tree has no hard links; copy the file instead [EPERM]",
                 self.inodes.last_path(inode))
        raise FUSEError(errno.EPERM)

    async def symlink(self, parent_inode: int, name: bytes, target: bytes, ctx: Any = None) -> pyfuse3.EntryAttributes:
        log.info("refused symlink %s: the tree has no symbolic links [EPERM]",
                 join(self._path(parent_inode), os.fsdecode(name)))
        raise FUSEError(errno.EPERM)

    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        path = join(self._path(parent_inode), os.fsdecode(name))
        if not stat.S_ISREG(mode):
            log.info("refused mknod %s: only regular files [EPERM]", path)
            raise FUSEError(errno.EPERM)
        # A plain regular file made without opening it: write it now (an empty note).
        node = await self._call("mknod", path, "write", path, b"")
        return self._node_attrs(self.inodes.remember(path), node)

    async def statfs(self, ctx: Any = None) -> pyfuse3.StatvfsData:
        s = pyfuse3.StatvfsData()
        # The store has no fixed size; report ample free space so that tools which check it
        # (installers, download managers) proceed, and the tree's caps answer EFBIG / EDQUOT.
        s.f_bsize = s.f_frsize = BLOCK
        s.f_blocks = s.f_bfree = s.f_bavail = 1 << 28
        s.f_files = s.f_ffree = s.f_favail = 1 << 24
        s.f_namemax = 255
        return s

    # -- extended attributes: none, said plainly so that cp -a and editors fall back -------------
    # ENOSYS, not ENOTSUP, where it saves requests: the kernel then knows for good that this file
    # system has none and answers "Operation not supported" itself. Not for getxattr: after an
    # ENOSYS there the kernel answers ACL reads "no ACL" instead, which `ls -l` takes for a
    # supported file system and asks again for every file (10 000 calls per listing; measured),
    # while ENOTSUP once tells it to stop. It costs one request per write to a new file (the
    # kernel asks for security.capability), a few microseconds in this loop.

    async def getxattr(self, inode: int, name: bytes, ctx: Any = None) -> bytes:
        raise FUSEError(errno.ENOTSUP)

    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx: Any = None) -> None:
        raise FUSEError(errno.ENOSYS)

    async def listxattr(self, inode: int, ctx: Any = None) -> list[bytes]:
        raise FUSEError(errno.ENOSYS)

    async def removexattr(self, inode: int, name: bytes, ctx: Any = None) -> None:
        raise FUSEError(errno.ENOSYS)

    # -- outside changes (events.py) -------------------------------------------------------------

    async def invalidate(self, path: str, change_id: int | None = None) -> None:
        """Something changed ``path`` (``change_id``: the event's, when it has one): make the
        kernel ask again for its name, attributes and content, and for its folder's listing. Only
        what the kernel was told about needs it.

        The event of a write this mount made itself comes back too, and the kernel already holds
        what that write committed (its pages are what the writer wrote, its name is where the
        rename put it): such an event is told apart by its change id and the order events come
        in, without asking the store (own_writes.py), and nothing is dropped for it. Any other
        change is dropped."""
        if not self.own.event(path, change_id):
            await self._drop(path)

    def committed(self, event: dict[str, Any]) -> None:
        """A write of this process committed (store.events.subscribe_local; in the writing
        thread, before the write returns): its change id, for telling its event apart."""
        change_id = event.get("change_id")
        if isinstance(change_id, int):
            for path in tree_paths(event):
                self.own.committed(path, change_id)

    async def _drop(self, path: str) -> None:
        """Make the kernel (and the kept listings) forget ``path``, and the open descriptions of
        it holding no unsaved bytes read it again (an appender then appends to the new text)."""
        known = self.inodes.known(path)
        for handle in self.handles.on_inode(known) if known is not None else ():
            handle.reload(handle.node)
        self._drop_listings(path)
        self.written.pop_below(path)
        # A folder's node is kept until it goes (not when a file in it changes: this mount's own
        # saves come back as events, and each would cost the next save a query for the folder),
        # and the folders below it go with it (a guild or agent deleted with its folders).
        drop_folder(self._folders, path)
        ino = self.inodes.known(path)
        parent_ino = self.inodes.known(parent_of(path)) if path else None
        for target in (ino, parent_ino):
            if target is not None:
                await trio.to_thread.run_sync(functools.partial(_invalidate_inode, target))
        if parent_ino is not None:
            pyfuse3.invalidate_entry_async(parent_ino, os.fsencode(path.rsplit("/", 1)[-1]),
                                           ignore_enoent=True)

    def following(self, up: bool) -> None:
        """The change feed is up, or down (events may be missed until it is back)."""
        self.listings.following(up)

    async def invalidate_all(self) -> None:
        """After missed events (the listener reconnected): drop everything the kernel cached."""
        self.listings.clear()
        self._folders.clear()
        self.written.clear()
        self.own.clear()
        for handle in self.handles.all():  # (those holding unsaved bytes keep them)
            handle.reload(handle.node)
        for ino in self.inodes.bound():
            await trio.to_thread.run_sync(functools.partial(_invalidate_inode, ino))

    def discard_unsaved(self) -> list[str]:
        """At unmount: files still open with unsaved bytes are not committed (the writer had not
        finished); return their paths for the log."""
        return [h.path for h in self.handles.all() if h.needs_commit]


def _invalidate_inode(ino: int) -> None:
    try:
        pyfuse3.invalidate_inode(ino)
    except OSError as exc:
        if exc.errno != errno.ENOENT:  # the kernel no longer holds it: nothing to drop
            log.debug("invalidate_inode(%s) failed: %s", ino, exc)

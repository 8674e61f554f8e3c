"""Open files: the store's write handles (store.handles.WriteHandle, the same layer the WebDAV PUT
uses) with what FUSE keeps beside each one: its fh, its inode, and where it is in a close. The
open descriptions of one file share one body (store.handles.Body), as a disk's do.

A note is one version per save, not one per ``write(2)``: the handle keeps the whole body in
memory (a note is at most 256 KB; a write past that is refused as it comes) and the operations
layer commits it as one new version on ``flush``, ``fsync`` or ``release``, in a worker thread,
never on the mount's event loop. If the mount process dies before that, nothing was written.
"""
from __future__ import annotations

import itertools
from typing import Any

from fuse_mount.inodes import parent_of
from store.handles import Tree, WriteHandle


class OpenFile(WriteHandle):
    """One open file description (one ``fh``)."""

    def __init__(self, fh: int, ino: int, tree: Tree, path: str, *, writable: bool,
                 data: bytes | None = None, new: bool = False, node: Any = None,
                 share: OpenFile | None = None) -> None:
        super().__init__(tree, path, new=new, data=data, body=share.body if share is not None else None)
        self.fh, self.ino, self.writable = fh, ino, writable
        if share is None:
            # The last Node the store gave for this file (stat at open, or the commit's result).
            self.node = node
        # Opened with O_APPEND: each write goes to the end of the body as it is then, whatever
        # offset the kernel computed from a size it may have kept from before a change.
        self.appending = False
        # Closed by its process but kept (a side file held for the rename that usually follows).
        self.released = False
        # Flushed (a close) since its last write: what it holds is what a process closed, even if
        # the kernel's release has not arrived yet.
        self.flushed = False

    def write(self, offset: int, buf: bytes) -> int:
        taken = super().write(offset, buf)
        self.flushed = False
        return taken

    def truncate(self, size: int) -> None:
        super().truncate(size)
        self.flushed = False


class HandleTable:
    """fh -> OpenFile, and which handles are open on each inode (for getattr while a file is
    being written, path-based truncate, unlink and rename)."""

    def __init__(self, tree: Tree) -> None:
        self._tree = tree  # reads and writes go to the calling thread's Host tree
        self._serial = itertools.count(1)
        self._open: dict[int, OpenFile] = {}

    def __len__(self) -> int:
        return len(self._open)

    def open(self, ino: int, path: str, *, writable: bool, data: bytes | None = None,
             new: bool = False, node: Any = None, share: OpenFile | None = None) -> OpenFile:
        """A new open file; with ``share``, one more description of that handle's file, reading
        and writing the same body."""
        handle = OpenFile(next(self._serial), ino, self._tree, path, writable=writable, data=data, new=new,
                          node=node, share=share)
        self._open[handle.fh] = handle
        return handle

    def get(self, fh: int) -> OpenFile:
        return self._open[fh]

    def find(self, fh: int | None) -> OpenFile | None:
        return self._open.get(fh) if fh is not None else None

    def close(self, fh: int) -> OpenFile | None:
        return self._open.pop(fh, None)

    def on_inode(self, ino: int) -> list[OpenFile]:
        return [h for h in self._open.values() if h.ino == ino]

    def sharing(self, ino: int) -> OpenFile | None:
        """An open file on ``ino`` whose body a new description of it shares (the newest)."""
        return next((h for h in reversed(self._open.values()) if h.ino == ino and not h.orphaned), None)

    def pending_new(self, ino: int) -> OpenFile | None:
        """A handle that created ``ino`` and has not committed it yet."""
        return next((h for h in self._open.values() if h.ino == ino and h.new and not h.orphaned), None)

    def dirty_writer(self, ino: int) -> OpenFile | None:
        """The handle whose uncommitted body is the file's current content, if any: the newest
        (a file opened again starts from the bytes of the one before)."""
        writers = self.dirty_writers(ino)
        return writers[-1] if writers else None

    def dirty_writers(self, ino: int) -> list[OpenFile]:
        """The handles on ``ino`` holding bytes not committed yet, oldest first (descriptions of
        one open file share their body: any of them commits it)."""
        return [h for h in self._open.values() if h.ino == ino and h.needs_commit]

    def created_in(self, folder: str) -> list[OpenFile]:
        """One handle per file created in ``folder`` through the mount and not committed yet (a
        held side file, a note still being written): the store does not list them, a disk would."""
        found: dict[int, OpenFile] = {}
        for h in self._open.values():
            if h.new and not h.orphaned and h.ino not in found and parent_of(h.path) == folder:
                found[h.ino] = h
        return list(found.values())

    def moved(self, ino: int, new_path: str) -> None:
        for h in self.on_inode(ino):
            h.path = new_path

    def orphan(self, ino: int) -> None:
        for h in self.on_inode(ino):
            h.orphan()

    def all(self) -> list[OpenFile]:
        return list(self._open.values())

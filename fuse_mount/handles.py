"""Open files: what each one has read, and the bytes written to it since its last commit.

A note is one version per save, not one per ``write(2)``: editors and ``cp`` write in chunks, and
``open(O_TRUNC)`` arrives as an open followed by a truncate. So an open file keeps its whole body in
memory (a note is at most 256 KB) and the operations layer commits it as one new version on
``flush``, ``fsync`` or ``release`` — rclone's "write to a cache file, transfer when closed". If the
mount process dies before that, nothing was written: the store never sees half a note.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from fuse_mount.inodes import parent_of


@dataclass
class OpenFile:
    """One open file description (one ``fh``)."""

    fh: int
    ino: int
    path: str
    writable: bool
    # The body as of open (read lazily) plus this handle's writes; None until first needed.
    data: bytearray | None = None
    # Differs from what the store holds (changed since open or since the last commit).
    dirty: bool = False
    # Received bytes (write, ftruncate) since open or the last commit. A shell's `> file` closes
    # a duplicate descriptor before writing; flushing then would commit an empty version first.
    wrote: bool = False
    # Created through the mount and not committed yet: the store does not have it.
    new: bool = False
    # Created with O_EXCL ("it is not there"): the first commit is a create-only write
    # (If-None-Match: *), so a rename-away save cannot overwrite a version saved meanwhile.
    exclusive: bool = False
    # The file was unlinked (or renamed over) while open: its writes go nowhere, as on a disk.
    orphaned: bool = False
    # The last Node the store gave for this file (stat at open, or the commit's result).
    node: Any = None
    # Closed by its process but kept (a side file held for the rename that usually follows).
    released: bool = False
    # Flushed (a close) since its last write: what it holds is what a process closed, even if
    # the kernel's release has not arrived yet.
    flushed: bool = False

    @property
    def size(self) -> int:
        return len(self.data) if self.data is not None else 0

    def read(self, offset: int, size: int) -> bytes:
        assert self.data is not None
        return bytes(self.data[offset:offset + size])

    def write(self, offset: int, buf: bytes) -> int:
        assert self.data is not None
        end = offset + len(buf)
        if offset > len(self.data):
            self.data.extend(b"\0" * (offset - len(self.data)))
        self.data[offset:end] = buf
        self.dirty = self.wrote = True
        self.flushed = False
        return len(buf)

    def truncate(self, size: int) -> None:
        assert self.data is not None
        if size < len(self.data):
            del self.data[size:]
        else:
            self.data.extend(b"\0" * (size - len(self.data)))
        self.dirty = self.wrote = True
        self.flushed = False

    @property
    def needs_commit(self) -> bool:
        return self.dirty and not self.orphaned


class HandleTable:
    """fh -> OpenFile, and which handles are open on each inode (for getattr while a file is
    being written, path-based truncate, unlink and rename)."""

    def __init__(self) -> None:
        self._serial = itertools.count(1)
        self._open: dict[int, OpenFile] = {}

    def __len__(self) -> int:
        return len(self._open)

    def open(self, ino: int, path: str, *, writable: bool, data: bytes | None = None,
             new: bool = False, node: Any = None) -> OpenFile:
        handle = OpenFile(next(self._serial), ino, path, writable,
                          bytearray(data) if data is not None else None, dirty=new, new=new, node=node)
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

    def pending_new(self, ino: int) -> OpenFile | None:
        """A handle that created ``ino`` and has not committed it yet."""
        return next((h for h in self._open.values() if h.ino == ino and h.new and not h.orphaned), None)

    def dirty_writer(self, ino: int) -> OpenFile | None:
        """The handle whose uncommitted body is the file's current content, if any."""
        return next((h for h in self._open.values() if h.ino == ino and h.needs_commit), None)

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
            h.orphaned = True

    def all(self) -> list[OpenFile]:
        return list(self._open.values())

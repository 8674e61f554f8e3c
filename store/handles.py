"""Buffered writes: a file being written is a handle whose bytes become one version when committed.

A note is one version per save, not one per write: editors and ``cp`` write in chunks, a WebDAV PUT
arrives as a stream, and ``open(O_TRUNC)`` is an open followed by a truncate. So a handle keeps the
whole body in memory (a file is at most MAX_CONTENT_BYTES; a handle refuses to grow past it, so a
flood of bytes is never held) and commits it through the Host tree as one write, as rclone's VFS
handles write to a cache file and transfer it when closed. If the process dies first, nothing
was written: the store never sees half a file.

The life of a handle::

    h = WriteHandle(tree, path)                  # an existing file; its body is read when first needed
    h = WriteHandle(tree, path, new=True)        # a file being created (nothing in the store yet)
    h.write(offset, data) / h.append(data) / h.truncate(size) / h.read(offset, size)
    h.flush()      # close(2): commits if this handle wrote since its last commit
    h.commit()     # fsync, release, the end of a PUT: commits if the body differs from the store's
    h.orphan()     # the file was deleted or renamed over while open: its writes go nowhere

A failed commit raises the store's error once and forgets the body's changes, so a later release
does not report (or write) it again. A write past the cap is refused as it comes and spoils the
handle: the bytes before it are not what the writer meant, so the commit writes nothing and reports
that refusal instead. Front ends: WebDAV's PUT spool appends then commits with the
request's conditions; the FUSE mount maps fh to a handle and calls flush, fsync, release.
"""
from __future__ import annotations

from typing import Protocol

from store.errors import StoreError, Unavailable
from store.storage import MAX_CONTENT_BYTES, too_large


class Tree(Protocol):
    """What a handle needs of the Host tree (store.host.HostTree)."""

    def read(self, path: str) -> bytes: ...

    def write(self, path: str, data: bytes, *, if_match: str | None = None, if_none_match: bool = False,
              if_unmodified_since: object = None) -> object: ...


class Body:
    """A file's bytes as they are being written, and what goes with them. Every open description
    of one file shares its Body (the FUSE mount), as a disk's descriptors share one file: two
    writers of different parts, or two appenders, both keep their bytes, whichever commits."""

    __slots__ = ("data", "new", "exclusive", "dirty", "node", "changes", "refusal", "current")

    def __init__(self, data: bytearray | None, *, new: bool) -> None:
        # The body as of open (read lazily) plus the writes since; None until first needed.
        self.data = data
        self.new = new          # a file being created: nothing in the store yet
        # Created with O_EXCL ("it is not there"): its first commit, by whichever description,
        # is a create-only write (If-None-Match: *).
        self.exclusive = False
        self.dirty = new        # differs from what the store holds
        self.node: object = None  # what the last commit returned
        # Changes to the body so far. A commit runs in a worker thread (the FUSE mount), and a
        # write may land while it runs: the commit settles only the changes it took, and a later
        # one is still dirty (committed at the next flush/release).
        self.changes = 0
        # A write that would pass the cap, refused as it came: the body is no longer what the
        # writer meant, so it is never committed; the commit reports this instead, once.
        self.refusal: StoreError | None = None
        # The bytes are the store's own as it last answered (read past every cache, or committed
        # here) or the writers' own (a file created or emptied), never a cache's copy: a cache
        # lags a change made elsewhere by that change's event, and a front end that saves what a
        # writer patched into a copy (FUSE's `>>`) reads the store again before the first write
        # into a clean body that is not current, or the save would undo that change.
        self.current = new


def _shared(name: str) -> property:
    return property(lambda self: getattr(self.body, name), lambda self, value: setattr(self.body, name, value))


class WriteHandle:
    """One open file description: its file's body (shared with the file's other descriptions when
    ``body`` is given) and whether this description wrote since its last commit."""

    _data = _shared("data")
    new = _shared("new")
    exclusive = _shared("exclusive")
    dirty = _shared("dirty")
    node = _shared("node")
    _changes = _shared("changes")
    refusal = _shared("refusal")
    current = _shared("current")

    def __init__(self, tree: Tree, path: str, *, new: bool = False, data: bytes | None = None,
                 body: Body | None = None) -> None:
        self.tree, self.path = tree, path
        self.body = body if body is not None else Body(
            bytearray(b"" if new else data) if (new or data is not None) else None, new=new)  # type: ignore[arg-type]
        self.wrote = False      # received bytes since open or the last commit
        # Changed the body (wrote, truncated, emptied it at open, or created the file) and has not
        # committed since: only such a description commits at its close, so a reader's close, or
        # a writer's that changed nothing, never saves another description's unfinished bytes.
        self.owes = new
        self.orphaned = False   # unlinked or renamed over while open
        # The last commit met a store that did not answer (Unavailable): nothing was refused, so
        # the body stays unsaved, for the next fsync, close or retry to save.
        self.unanswered = False

    # -- the body ------------------------------------------------------------------------------

    @property
    def data(self) -> bytearray:
        if self._data is None:
            self._data = bytearray(self.tree.read(self.path))
        return self._data

    @property
    def loaded(self) -> bool:
        """Whether the body is in memory (reading ``data`` of an unloaded handle reads the store)."""
        return self._data is not None

    def fill(self, data: bytes) -> None:
        """The body, read by the front end itself (the FUSE mount reads off its event loop, or
        from the content cache), unless it was loaded meanwhile."""
        if self._data is None:
            self._data = bytearray(data)

    @property
    def size(self) -> int:
        return len(self.data)

    def read(self, offset: int, size: int) -> bytes:
        return bytes(self.data[offset:offset + size])

    def write(self, offset: int, buf: bytes) -> int:
        """Write ``buf`` at ``offset`` (a gap reads as NUL bytes, as on a disk); the number of
        bytes taken. TooLarge, taking nothing, when the body would pass MAX_CONTENT_BYTES."""
        end = offset + len(buf)
        self._check(max(end, self.size))
        data = self.data
        if offset > len(data):
            data.extend(b"\0" * (offset - len(data)))
        data[offset:end] = buf
        self.dirty = self.wrote = self.owes = True
        self._changes += 1
        return len(buf)

    def append(self, buf: bytes) -> int:
        return self.write(self.size, buf)

    def empty(self) -> None:
        """open(O_TRUNC): the body is empty from now on (for every description of the file). Not
        a write: a close before any write does not commit it (see flush)."""
        self._data = bytearray()
        self.dirty = self.owes = self.current = True
        self._changes += 1

    def truncate(self, size: int) -> None:
        self._check(size)
        data = self.data
        if size < len(data):
            del data[size:]
        else:
            data.extend(b"\0" * (size - len(data)))
        self.dirty = self.wrote = self.owes = True
        self._changes += 1

    def _check(self, size: int) -> None:
        if self.refusal is not None:
            raise self.refusal
        if size > MAX_CONTENT_BYTES:
            self.refusal = too_large(self.path.rsplit("/", 1)[-1], size)
            self.dirty = self.wrote = True  # so that close reports it too
            raise self.refusal

    # -- committing ----------------------------------------------------------------------------

    @property
    def needs_commit(self) -> bool:
        return self.dirty and not self.orphaned

    def orphan(self) -> None:
        self.orphaned = True

    def flush(self) -> object | None:
        """close(2) of a descriptor: commit what this handle wrote. A handle that only created or
        truncated the file waits for release: a shell's ``> file`` closes a duplicate descriptor
        before it writes, and committing then would make an empty version first."""
        if not self.wrote:
            return None
        return self.commit()

    def commit(self, *, if_match: str | None = None, if_none_match: bool = False,
               if_unmodified_since: object = None) -> object | None:
        """The body as one new version (the tree's Node), or None when there is nothing to write.
        The conditions are the tree's (an editor's If-Match). A front end that must undo a refused
        create (FUSE forgets the name it gave the kernel) reads ``new`` before committing."""
        self.unanswered = False
        if not self.needs_commit:
            return None
        if self.refusal is not None:
            refusal, self.refusal = self.refusal, None
            self.dirty = self.wrote = self.new = self.owes = False
            raise refusal
        body, taken = bytes(self.data), self._changes
        try:
            node = self.tree.write(self.path, body, if_match=if_match, if_none_match=if_none_match,
                                   if_unmodified_since=if_unmodified_since)
        except Unavailable:
            self.unanswered = True
            raise
        except StoreError:
            # Refused and reported now: not again at release, unless bytes came after it.
            if self._changes == taken:
                self.dirty = self.wrote = self.new = self.owes = False
            raise
        self.new = False
        self.node = node
        self.current = True
        if self._changes == taken:
            self.dirty = self.wrote = self.owes = False
        return node

    def saved_as(self, node: object) -> None:
        """The body is now the store's version ``node`` (committed here, or carried by a move
        that wrote these bytes to another name)."""
        self.dirty = self.wrote = self.new = self.owes = False
        self.node = node
        self.current = True

    def refresh(self, node: object, data: bytes) -> None:
        """The store's own body ``node``, just read past every cache (so ``current``), unless this
        body holds bytes not committed yet."""
        if not self.dirty:
            self._data, self.node, self.new, self.current = bytearray(data), node, False, True

    def reload(self, node: object) -> None:
        """The file changed in the store (another writer committed it): read the new body when
        next needed, unless this body holds bytes not committed yet."""
        if not self.dirty:
            self._data, self.node, self.new, self.current = None, node, False, False

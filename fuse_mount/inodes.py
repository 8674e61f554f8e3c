"""Inode numbers for tree paths: the one place that knows which number names which path.

The kernel names files by inode number and counts how many times it has been told about each
(``lookup``, ``create``, a ``readdir`` entry); it gives the count back with ``forget``. A number
stays bound to its path for as long as the mount runs, so ``ls -i`` and tools that compare inodes
see a stable file; a rename carries the number to the new path, as on a local disk. A number whose
path is gone (unlinked, renamed over) is kept, detached, until the kernel forgets it, because the
kernel may still ask about it (``fstat`` on an open file) — see pyfuse3's "Lookup Counts".
"""
from __future__ import annotations

import bisect
import itertools
import posixpath
from collections.abc import Iterator

import pyfuse3

from store.paths import nfc

ROOT = pyfuse3.ROOT_INODE


def parent_of(path: str) -> str:
    """'org/1/plan.md' -> 'org/1'; 'org' -> '' (the root); '' -> ''."""
    return posixpath.dirname(path)


def join(parent: str, name: str) -> str:
    return f"{parent}/{name}" if parent else name


class InodeTable:
    """path <-> inode with lookup counts. Used from the trio thread only, so it takes no lock."""

    def __init__(self) -> None:
        self._next = itertools.count(ROOT + 1)
        self._by_path: dict[str, int] = {"": ROOT}
        self._by_inode: dict[int, str] = {ROOT: ""}
        self._lookups: dict[int, int] = {}
        # Inodes whose path is gone but that the kernel still holds: inode -> last path.
        self._detached: dict[int, str] = {}
        # Every path that is the parent of a numbered path: only those can have paths below them
        # to carry along on a remove or rename, so a note's rename (an editor's save) in a folder
        # of 10 000 numbered notes does not scan them all.
        self._parents: set[str] = set()

    def __len__(self) -> int:
        return len(self._by_inode)

    def bound(self) -> list[int]:
        """Every inode currently bound to a path."""
        return list(self._by_inode)

    # -- numbering -----------------------------------------------------------------------

    def inode_for(self, path: str) -> int:
        """The number for ``path``, assigning a fresh one on first sight."""
        path = nfc(path)
        ino = self._by_path.get(path)
        if ino is None:
            ino = next(self._next)
            self._by_path[path] = ino
            self._by_inode[ino] = path
            self._add_parents(path)
        return ino

    def known(self, path: str) -> int | None:
        """The number already given to ``path``, or None (events use this: an unseen path has
        nothing cached in the kernel)."""
        return self._by_path.get(nfc(path))

    def path_of(self, ino: int) -> str:
        """The path bound to ``ino``; KeyError if the inode is unknown or detached."""
        return self._by_inode[ino]

    def last_path(self, ino: int) -> str | None:
        """The bound path, or the path a detached inode had, for log lines and open files."""
        return self._by_inode.get(ino) or self._detached.get(ino)

    # -- lookup counts -------------------------------------------------------------------

    def remember(self, path: str) -> int:
        """The kernel has been told about ``path`` once more (lookup, create, readdir entry)."""
        ino = self.inode_for(path)
        if ino != ROOT:
            self._lookups[ino] = self._lookups.get(ino, 0) + 1
        return ino

    def forget(self, ino: int, count: int) -> None:
        left = self._lookups.get(ino, 0) - count
        if left > 0:
            self._lookups[ino] = left
            return
        self._lookups.pop(ino, None)
        # A bound inode keeps its number (stable while mounted); a detached one can go now.
        self._detached.pop(ino, None)

    # -- changes to the tree ---------------------------------------------------------------

    def remove(self, path: str) -> int | None:
        """``path`` is gone: unbind it (and everything below it). Returns its inode, if any."""
        path = nfc(path)
        ino = self._by_path.pop(path, None)
        if ino is not None:
            self._detach(ino, path)
        if path in self._parents:
            prefix = path + "/"
            for child in [p for p in self._by_path if p.startswith(prefix)]:
                self._detach(self._by_path.pop(child), child)
        return ino

    def rename(self, old: str, new: str) -> int:
        """``old`` now lives at ``new``: the inode moves with it (and paths below it follow);
        whatever was bound to ``new`` is detached. Returns the moved inode."""
        old, new = nfc(old), nfc(new)
        if old == new:
            return self.inode_for(old)
        self.remove(new)
        ino = self._by_path.pop(old, None)
        if ino is None:
            return self.inode_for(new)
        self._by_path[new] = ino
        self._by_inode[ino] = new
        self._add_parents(new)
        if old not in self._parents:
            return ino
        prefix = old + "/"
        for child in [p for p in self._by_path if p.startswith(prefix)]:
            cino = self._by_path.pop(child)
            moved = new + child[len(old):]
            self._by_path[moved] = cino
            self._by_inode[cino] = moved
            self._add_parents(moved)
        return ino

    def _add_parents(self, path: str) -> None:
        parent = parent_of(path)
        while parent not in self._parents:
            self._parents.add(parent)
            if not parent:
                return
            parent = parent_of(parent)

    def _detach(self, ino: int, path: str) -> None:
        self._by_inode.pop(ino, None)
        if self._lookups.get(ino, 0) > 0:
            self._detached[ino] = path


class DirectoryListing:
    """One open directory's entries, listed once at ``opendir`` (or on rewind) and handed out in
    name order. The kernel resumes a listing with the offset of the last entry it took; that offset
    names the entry (a sort key), not a position, so entries created or removed between two
    ``readdir`` calls never make another entry be skipped or repeated."""

    def __init__(self) -> None:
        self.entries: list[tuple[tuple[int, str], object]] = []
        self._keys: list[tuple[int, str]] = []
        self._offsets: dict[int, tuple[int, str]] = {}
        self._serial = itertools.count(1)

    def fill(self, dot: object, dotdot: object, children: list[tuple[str, object]]) -> None:
        """``.`` and ``..`` first, then the children sorted by name."""
        self.entries = [((0, "."), dot), ((0, ".."), dotdot)]
        self.entries += sorted((((1, name), item) for name, item in children), key=lambda e: e[0])
        self._keys = [key for key, _ in self.entries]
        self._offsets.clear()

    def add(self, children: list[tuple[str, object]]) -> None:
        """Also list ``children`` whose names are not listed yet (files only this mount knows
        of), without changing the entries a shared pass holds."""
        if not children:
            return  # the usual pass: no set of a 10 000-entry folder's names built for nothing
        listed = set(self._keys)
        extra = [((1, name), item) for name, item in children if (1, name) not in listed]
        if extra:
            self.entries = sorted(self.entries + extra, key=lambda e: e[0])
            self._keys = [key for key, _ in self.entries]
            self._offsets.clear()

    def shared(self) -> tuple[list[tuple[tuple[int, str], object]], list[tuple[int, str]]]:
        """The filled entries, to be handed to another pass with ``share`` (they are not changed
        after ``fill``; each pass keeps its own offsets)."""
        return self.entries, self._keys

    def share(self, filled: tuple[list[tuple[tuple[int, str], object]], list[tuple[int, str]]]) -> None:
        self.entries, self._keys = filled
        self._offsets.clear()

    def after(self, offset: int) -> Iterator[tuple[tuple[int, str], object]]:
        """The entries after the one ``offset`` named (all of them for 0). An iterator, not a
        copy: the kernel takes a few dozen entries per call, so a 10 000-entry folder is read in
        hundreds of calls, and copying the rest of the list at each would cost its square."""
        if offset == 0:
            return iter(self.entries)
        key = self._offsets.get(offset)
        if key is None:
            return iter(())
        return itertools.islice(self.entries, bisect.bisect_right(self._keys, key), None)

    def offset_for(self, key: tuple[int, str]) -> int:
        """A fresh offset that names ``key`` (what ``readdir_reply`` gets as next_id)."""
        off = next(self._serial)
        self._offsets[off] = key
        return off

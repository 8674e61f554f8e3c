"""One small driver per surface, so the rule suite (test_rules.py) is written once and run three
times, as rclone's vfstest runs one set of tests against every backend:

- ``tree``: the Host tree itself (store.host.HostTree), the one tree WebDAV and FUSE call;
- ``webdav``: plain HTTP methods (PUT, GET, MOVE, DELETE, PROPFIND, MKCOL) to the real gateway;
- ``fuse``: plain ``os`` calls on a real ``hostfinder mount``.

Every driver takes tree paths (``org/1/guilds/2/plan.md``) and either succeeds or raises
``Refused`` carrying what that surface answered in its own vocabulary (a store error class name,
an HTTP status, an errno name) and the sentence a person reads there (the exception's message,
the response body, the mount's log line). ``Surface.refuses(Refusal.X)`` then checks the answer
against the surface's own entry for X, so a test reads like the rule and a surface that answers
otherwise fails by name.
"""
from __future__ import annotations

import ctypes
import enum
import errno
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, unquote
from xml.etree import ElementTree as ET

import pytest
import requests

from store.errors import StoreError
from store.host import HostTree

T = TypeVar("T")


class Refusal(enum.Enum):
    """The refusals the rules name, independent of any surface."""
    NOT_FOUND = "nothing there"
    NOT_A_NOTE = "a name that cannot be a note in a note folder"
    NO_FILES_HERE = "a folder of the layout that takes no files (agents/, guilds/...)"
    NO_FOLDERS = "notes are flat: no new folders"
    LAYOUT = "a folder of the layout cannot be deleted or moved"
    READ_ONLY = "read-only by nature (history archive, collections and records)"
    RESERVED = "task.md and memory.md cannot be deleted or moved"
    EMBEDDED = "a live task embeds the note"
    PRIVATE_EMBED = "a task cannot embed a memory"
    TOO_LARGE = "over the 256 KB write cap"
    NOT_TEXT = "a body that is not UTF-8 text"
    STALE = "a conditional write whose condition no longer holds"
    EXISTS = "the destination exists and the caller asked not to replace it"
    TAKEN = "a create-only write onto a file that is there"
    LOCKED = "another client holds a WebDAV lock on the path"


class Refused(Exception):
    """What a surface answered instead of doing it: ``answer`` in the surface's vocabulary and
    ``sentence``, the text a person reads there."""

    def __init__(self, answer: str | int, sentence: str) -> None:
        super().__init__(f"{answer}: {sentence}")
        self.answer = answer
        self.sentence = sentence


class Surface(ABC):
    """The driver interface. Paths are tree paths without a leading slash."""

    name: str
    # Refusal -> the answers this surface may give for it. A set has more than one member only
    # where the surface's own contract says so (FUSE: "EROFS or EACCES" for read-only files).
    ANSWERS: dict[Refusal, frozenset[str | int]]
    # Why a rule does not apply on this surface (skipped with that reason), by rule name.
    NOT_APPLICABLE: dict[str, str] = {}

    # -- what every driver implements (a failure raises Refused) ---------------------------------

    @abstractmethod
    def read(self, path: str) -> bytes: ...

    @abstractmethod
    def write(self, path: str, data: bytes) -> None:
        """Create or replace the whole file, as one save."""

    @abstractmethod
    def create_new(self, path: str, data: bytes) -> None:
        """Create ``path`` only if it is not there: If-None-Match: *, or open(O_CREAT | O_EXCL)."""

    @abstractmethod
    def rename(self, src: str, dst: str) -> None:
        """Rename, replacing whatever ``dst`` holds."""

    @abstractmethod
    def rename_noreplace(self, src: str, dst: str) -> None:
        """Rename only if ``dst`` is free: Overwrite: F, or renameat2(RENAME_NOREPLACE)."""

    @abstractmethod
    def delete(self, path: str) -> None: ...

    @abstractmethod
    def rmdir(self, path: str) -> None: ...

    @abstractmethod
    def mkdir(self, path: str) -> None: ...

    @abstractmethod
    def names(self, folder: str) -> list[str]:
        """The folder's entries as this surface lists them, sorted."""

    # Conditional writes on an entity tag: not every surface has them (see NOT_APPLICABLE).
    def etag(self, path: str) -> str:
        raise NotImplementedError(f"{self.name} has no entity tags")

    def write_if_match(self, path: str, data: bytes, etag: str) -> None:
        raise NotImplementedError(f"{self.name} has no conditional writes on an entity tag")

    def settles(self, check: Callable[[], bool]) -> None:
        """``check()`` holds once the surface's last call has taken effect: at once here."""
        assert check(), f"{self.name}: not so after the call returned"

    def skip_unless_applies(self, rule: str) -> None:
        reason = self.NOT_APPLICABLE.get(rule)
        if reason:
            pytest.skip(f"{self.name}: {reason}")

    @contextmanager
    def refuses(self, refusal: Refusal, *, says: str | None = None) -> Iterator[None]:
        """The block must be refused with this surface's answer for ``refusal``; ``says``: a
        phrase the sentence a person reads on this surface must contain."""
        try:
            yield
        except Refused as got:
            expected = self.ANSWERS[refusal]
            assert got.answer in expected, (
                f"{self.name} answered {got.answer!r} where the rule ({refusal.value}) expects "
                f"{' or '.join(map(repr, sorted(expected, key=str)))}: {got.sentence}")
            if says is not None:
                assert says in got.sentence, f"{self.name}'s sentence does not say {says!r}: {got.sentence!r}"
        else:
            pytest.fail(f"{self.name} did it, where the rule refuses it ({refusal.value})")


# ---------------------------------------------------------------------------------------------

class TreeSurface(Surface):
    """store.host.HostTree, called directly as the front ends call it."""

    name = "tree"
    ANSWERS = {
        Refusal.NOT_FOUND: frozenset({"NotFound"}),
        Refusal.NOT_A_NOTE: frozenset({"NotANote"}),
        Refusal.NO_FILES_HERE: frozenset({"NotANote"}),
        Refusal.NO_FOLDERS: frozenset({"NotANote"}),
        Refusal.LAYOUT: frozenset({"Forbidden"}),
        Refusal.READ_ONLY: frozenset({"ReadOnly"}),
        Refusal.RESERVED: frozenset({"Forbidden"}),
        Refusal.EMBEDDED: frozenset({"Embedded"}),
        Refusal.PRIVATE_EMBED: frozenset({"Invalid"}),
        Refusal.TOO_LARGE: frozenset({"TooLarge"}),
        Refusal.NOT_TEXT: frozenset({"Invalid"}),
        Refusal.STALE: frozenset({"PreconditionFailed"}),
        Refusal.EXISTS: frozenset({"AlreadyExists"}),
        Refusal.TAKEN: frozenset({"PreconditionFailed"}),
        Refusal.LOCKED: frozenset({"Locked"}),
    }

    def __init__(self, tree: HostTree) -> None:
        self.tree = tree

    def _do(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except StoreError as exc:
            raise Refused(type(exc).__name__, "\n".join([exc.message, *exc.problems])) from None

    def read(self, path: str) -> bytes:
        return self._do(self.tree.read, path)

    def write(self, path: str, data: bytes) -> None:
        self._do(self.tree.write, path, data)

    def write_if_match(self, path: str, data: bytes, etag: str) -> None:
        self._do(self.tree.write, path, data, if_match=etag)

    def create_new(self, path: str, data: bytes) -> None:
        self._do(self.tree.write, path, data, if_none_match=True)

    def etag(self, path: str) -> str:
        return self._do(self.tree.stat, path).etag

    def rename(self, src: str, dst: str) -> None:
        self._do(self.tree.move, src, dst)

    def rename_noreplace(self, src: str, dst: str) -> None:
        self._do(self.tree.move, src, dst, overwrite=False)

    def delete(self, path: str) -> None:
        self._do(self.tree.delete, path)

    def rmdir(self, path: str) -> None:
        self._do(self.tree.delete, path)

    def mkdir(self, path: str) -> None:
        self._do(self.tree.mkdir, path)

    def names(self, folder: str) -> list[str]:
        return sorted(n.name for n in self._do(self.tree.list, folder))


# ---------------------------------------------------------------------------------------------

class WebDavSurface(Surface):
    """Plain HTTP to the gateway's /dav/, as a WebDAV client sends it (Basic auth)."""

    name = "webdav"
    ANSWERS = {
        Refusal.NOT_FOUND: frozenset({404}),
        Refusal.NOT_A_NOTE: frozenset({403}),
        Refusal.NO_FILES_HERE: frozenset({403}),
        Refusal.NO_FOLDERS: frozenset({403}),
        Refusal.LAYOUT: frozenset({403}),
        Refusal.READ_ONLY: frozenset({403}),
        Refusal.RESERVED: frozenset({403}),
        Refusal.EMBEDDED: frozenset({409}),
        Refusal.PRIVATE_EMBED: frozenset({400}),
        Refusal.TOO_LARGE: frozenset({413}),
        Refusal.NOT_TEXT: frozenset({400}),
        Refusal.STALE: frozenset({412}),
        Refusal.EXISTS: frozenset({412}),   # RFC 4918 9.9.4: Overwrite: F onto an existing resource
        Refusal.TAKEN: frozenset({412}),
        Refusal.LOCKED: frozenset({423}),
    }

    def __init__(self, base_url: str, session: requests.Session) -> None:
        self.base = base_url.rstrip("/") + "/dav"
        self.s = session

    def url(self, path: str) -> str:
        return f"{self.base}/{quote(path.lstrip('/'))}"

    def _req(self, method: str, path: str, ok: tuple[int, ...], **kw: Any) -> requests.Response:
        r = self.s.request(method, self.url(path), timeout=30, **kw)
        if r.status_code not in ok:
            raise Refused(r.status_code, r.text)
        return r

    def read(self, path: str) -> bytes:
        return self._req("GET", path, (200,)).content

    def write(self, path: str, data: bytes) -> None:
        self._req("PUT", path, (201, 204), data=data)

    def write_if_match(self, path: str, data: bytes, etag: str) -> None:
        self._req("PUT", path, (201, 204), data=data, headers={"If-Match": etag})

    def create_new(self, path: str, data: bytes) -> None:
        self._req("PUT", path, (201, 204), data=data, headers={"If-None-Match": "*"})

    def etag(self, path: str) -> str:
        return self._req("HEAD", path, (200,)).headers["ETag"]

    def rename(self, src: str, dst: str) -> None:
        self._req("MOVE", src, (201, 204), headers={"Destination": self.url(dst), "Overwrite": "T"})

    def rename_noreplace(self, src: str, dst: str) -> None:
        self._req("MOVE", src, (201, 204), headers={"Destination": self.url(dst), "Overwrite": "F"})

    def delete(self, path: str) -> None:
        self._req("DELETE", path, (204,))

    def rmdir(self, path: str) -> None:
        self._req("DELETE", path.rstrip("/") + "/", (204,))

    def mkdir(self, path: str) -> None:
        self._req("MKCOL", path, (201,))

    def names(self, folder: str) -> list[str]:
        r = self._req("PROPFIND", folder.rstrip("/") + "/", (207,), headers={"Depth": "1"})
        hrefs = [h.text or "" for h in ET.fromstring(r.content).findall(".//{DAV:}response/{DAV:}href")]
        return sorted(unquote(h.rstrip("/")).rsplit("/", 1)[-1] for h in hrefs[1:])


# ---------------------------------------------------------------------------------------------

class FuseSurface(Surface):
    """Plain os calls on a running `hostfinder mount`. A syscall carries no sentence: the mount
    logs one line per refusal with the store's sentence, and that line is what a person reads."""

    name = "fuse"
    ANSWERS = {
        Refusal.NOT_FOUND: frozenset({"ENOENT"}),
        Refusal.NOT_A_NOTE: frozenset({"EPERM"}),
        # The folder is 0555: the kernel's "Permission denied", as for any read-only folder.
        Refusal.NO_FILES_HERE: frozenset({"EACCES"}),
        Refusal.NO_FOLDERS: frozenset({"EPERM"}),
        Refusal.LAYOUT: frozenset({"EACCES"}),
        # DESIGN's error table: "EROFS or EACCES" (a 0444 file opened for writing is EACCES).
        Refusal.READ_ONLY: frozenset({"EROFS", "EACCES"}),
        Refusal.RESERVED: frozenset({"EACCES"}),
        Refusal.EMBEDDED: frozenset({"EBUSY"}),
        Refusal.PRIVATE_EMBED: frozenset({"EINVAL"}),
        Refusal.TOO_LARGE: frozenset({"EFBIG"}),
        Refusal.NOT_TEXT: frozenset({"EINVAL"}),
        # fuse_mount/errors.py: a precondition the store refuses is ESTALE.
        Refusal.STALE: frozenset({"ESTALE"}),
        Refusal.EXISTS: frozenset({"EEXIST"}),
        Refusal.TAKEN: frozenset({"EEXIST"}),   # the kernel's own answer to O_EXCL on a name it finds
        # fuse_mount/errors.py: "Locked: a WebDAV client holds a lease on the path" is EBUSY.
        Refusal.LOCKED: frozenset({"EBUSY"}),
    }
    NOT_APPLICABLE = {
        "if_match": ("a POSIX write carries no precondition: the mount writes last-writer-wins like "
                     "a local disk (fuse_mount/errors.py), so If-Match has no equivalent here"),
    }

    def __init__(self, root: Path, log_path: Path) -> None:
        self.root = root
        self.log_path = log_path

    def p(self, path: str) -> Path:
        return self.root / path

    # A file created and closed with nothing written (touch, an empty save) is committed when the
    # kernel releases it, which it does after close() has returned (fuse_mount/operations.py: a
    # flush with nothing written does not commit, so a shell's `> file` is one version).
    SETTLE_SECONDS = 5.0

    def settles(self, check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + self.SETTLE_SECONDS
        while not check():
            assert time.monotonic() < deadline, f"fuse: not so within {self.SETTLE_SECONDS} s of the call"
            time.sleep(0.01)

    def _log_size(self) -> int:
        return self.log_path.stat().st_size

    def _do(self, fn: Callable[..., T], *args: Any) -> T:
        start = self._log_size()
        try:
            return fn(*args)
        except OSError as exc:
            with open(self.log_path, "rb") as f:
                f.seek(start)
                logged = f.read().decode(errors="replace")
            name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            raise Refused(name, logged or os.strerror(exc.errno or 0)) from None

    def read(self, path: str) -> bytes:
        return self._do(self.p(path).read_bytes)

    def write(self, path: str, data: bytes) -> None:
        def save() -> None:
            with open(self.p(path), "wb") as f:  # open(O_TRUNC), write, close: one version
                f.write(data)
        self._do(save)

    def create_new(self, path: str, data: bytes) -> None:
        def save() -> None:
            with open(self.p(path), "xb") as f:  # O_CREAT | O_EXCL: "it is not there"
                f.write(data)
        self._do(save)

    def rename(self, src: str, dst: str) -> None:
        self._do(os.rename, self.p(src), self.p(dst))

    def rename_noreplace(self, src: str, dst: str) -> None:
        def renameat2() -> None:
            libc = ctypes.CDLL(None, use_errno=True)
            at_fdcwd, noreplace = -100, 1
            if libc.renameat2(at_fdcwd, os.fsencode(self.p(src)), at_fdcwd, os.fsencode(self.p(dst)), noreplace):
                code = ctypes.get_errno()
                raise OSError(code, os.strerror(code))
        self._do(renameat2)

    def delete(self, path: str) -> None:
        self._do(os.unlink, self.p(path))

    def rmdir(self, path: str) -> None:
        self._do(os.rmdir, self.p(path))

    def mkdir(self, path: str) -> None:
        self._do(os.mkdir, self.p(path))

    def names(self, folder: str) -> list[str]:
        return sorted(self._do(os.listdir, self.p(folder)))

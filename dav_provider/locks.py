"""WsgiDAV's lock storage interface (LockStorageDict's methods) over store.locks.

Locks live in PostgreSQL so that a lock taken through one gateway process is honoured by every
other. A listing asks for the locks of every member; the live leases are read once per request
(there are few) and kept in a per-thread cache that the DAV app resets at each request start and
that every change here empties. While the process's watch (store/login_watch.py) says nothing
happened to any lock since a read found none at all, that read is not repeated: most writes
happen with no lock anywhere, and each saves a round trip. A lock taken through another process
reaches this one by notification (sql/060) within milliseconds of its commit; a write in that
window is not checked against it, as a write racing the LOCK request itself would not be. A lock
on a side file is seen by its holder alone (``viewing``): each user's side file is their own."""
from __future__ import annotations

import threading
import time
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, unquote

from wsgidav import util
from wsgidav.dav_error import PRECONDITION_CODE_LockConflict, DAVError, DAVErrorCondition
from wsgidav.lock_man.lock_manager import LockManager, generate_lock_token, normalize_lock_root, validate_lock

from dav_provider import MOUNT_PATH
from store import locks as leases
from store.db import Database
from store.host import is_side_path
from store.login_watch import LoginWatch
from store.paths import nfc

LOCK_TIME_OUT_DEFAULT = 604800  # 1 week, as LockStorageDict
LOCK_TIME_OUT_MAX = 4 * 604800

_local = threading.local()


def reset_request_cache() -> None:
    """Forget what this thread read for the previous request, and whose request it was."""
    _local.leases = None
    _local.viewer = None


def viewing(principal_name: str) -> None:
    """The login this thread's request runs as (HostDAVProvider.tree sets it): a lock on a side
    file is seen by its holder alone, since each user's side file of that name is their own."""
    _local.viewer = principal_name


def _seen(lock: dict[str, Any]) -> bool:
    viewer = getattr(_local, "viewer", None)
    if viewer is None or lock.get("principal") in (None, viewer):
        return True
    return not is_side_path(tree_path(lock["root"]))


def _granting(on: bool) -> None:
    _local.granting = on


def tree_path(ref_url: str) -> str:
    """A WsgiDAV ref URL ('/org/1/a%20b.md') as a Host tree path ('org/1/a b.md')."""
    return nfc(unquote(ref_url)).strip("/")


def _ref_url(path: str) -> str:
    return quote("/" + path)


class PgLockStorage:
    """LockStorageDict's interface, stored in path_leases."""

    def __init__(self, db: Database, *, watch: LoginWatch | None = None) -> None:
        self.db = db
        self.watch = watch
        # (the watch's lease generation, changes made here) when a read found no lock at all.
        self._none_at: tuple[int, int] | None = None
        self._changes = 0
        self._known_lock = threading.Lock()

    def __repr__(self) -> str:
        return "PgLockStorage"

    def open(self) -> None:
        pass

    def close(self) -> None:
        pass

    def cleanup(self) -> None:
        with self.db.transaction() as conn:
            leases.purge(conn)

    def clear(self) -> None:
        with self.db.transaction() as conn:
            leases.clear_all(conn)
        self._changed()

    def _changed(self) -> None:
        """A lock changed through this process: known at once here, without waiting for our own
        NOTIFY to come back."""
        with self._known_lock:
            self._changes += 1
            self._none_at = None
        reset_request_cache()

    def _to_lock(self, lease: dict[str, Any]) -> dict[str, Any]:
        lock = {k: v for k, v in lease.items() if k not in ("path", "expires_at")}
        lock["root"] = _ref_url(lease["path"]) if lease["path"] else "/"
        lock["owner"] = lock.get("owner", "").encode("utf-8")
        lock["expire"] = lease["expires_at"].timestamp()
        return lock

    def get(self, token: str) -> dict[str, Any] | None:
        with self.db.connection() as conn:
            lease = leases.get(conn, token)
        return self._to_lock(lease) if lease else None

    def create(self, path: str, lock: dict[str, Any]) -> dict[str, Any]:
        assert lock.get("token") is None
        root = normalize_lock_root(path)
        timeout = lock.get("timeout")
        timeout = LOCK_TIME_OUT_DEFAULT if timeout is None else float(timeout)
        if timeout < 0 or timeout > LOCK_TIME_OUT_MAX:
            timeout = LOCK_TIME_OUT_MAX
        lock["root"] = root
        lock["timeout"] = timeout
        lock["expire"] = time.time() + timeout
        validate_lock(lock)
        lock["token"] = generate_lock_token()
        owner = lock.get("owner") or b""
        data = {"type": lock["type"], "scope": lock["scope"], "depth": lock["depth"],
                "owner": owner.decode("utf-8", "replace") if isinstance(owner, bytes) else str(owner),
                "timeout": timeout, "principal": lock.get("principal")}
        with self.db.transaction() as conn:
            leases.create(conn, lock["token"], tree_path(root), data,
                          datetime.fromtimestamp(lock["expire"], timezone.utc))
        self._changed()
        return lock

    def refresh(self, token: str, *, timeout: float) -> dict[str, Any]:
        if timeout < 0 or timeout > LOCK_TIME_OUT_MAX:
            timeout = LOCK_TIME_OUT_MAX
        with self.db.transaction() as conn:
            current = leases.get(conn, token)
            if current is None:
                raise ValueError("Lock must exist")
            data = {k: current[k] for k in ("type", "scope", "depth", "owner", "principal") if k in current}
            data["timeout"] = timeout
            lease = leases.refresh(conn, token, datetime.fromtimestamp(time.time() + timeout, timezone.utc), data)
        self._changed()
        return self._to_lock(lease)  # type: ignore[arg-type]

    def delete(self, token: str) -> bool:
        with self.db.transaction() as conn:
            done = leases.delete(conn, token)
        self._changed()
        return done

    def get_lock_list(self, path: str, *, include_root: bool, include_children: bool,
                      token_only: bool) -> list[Any]:
        target = tree_path(normalize_lock_root(path))
        cached = getattr(_local, "leases", None)
        if cached is None:
            # A grant always reads (HostLockManager.acquire): it decides under PostgreSQL's lock.
            watched = self.watch is not None and not getattr(_local, "granting", False)
            generation = self.watch.leases() if watched else None  # type: ignore[union-attr]
            known = None if generation is None else (generation, self._changes)
            if known is not None and known == self._none_at:
                cached = _local.leases = []
            else:
                with self.db.connection() as conn:
                    cached = _local.leases = [self._to_lock(x) for x in leases.under(conn, "")]
                if not cached and known is not None:
                    with self._known_lock:
                        if known[1] == self._changes:
                            self._none_at = known
        out = []
        for lock in cached:
            if lock["expire"] < time.time() or not _seen(lock):
                continue
            lpath = tree_path(lock["root"])
            if (include_root and lpath == target) or (
                    include_children and (target == "" or lpath.startswith(target + "/"))):
                out.append(lock["token"] if token_only else lock)
        return out


    def locked_at_or_above(self, path: str) -> bool:
        """Whether a live lock is rooted at ``path`` (a decoded DAV path, as WsgiDAV's PATH_INFO)
        or at a folder above it: a write there must pass WsgiDAV's lock checks (a lock-null name,
        a locked file, a locked folder's members). No query while the watch says no lock exists
        anywhere."""
        target = nfc(path).strip("/")  # already decoded: a name may hold "%41" itself
        for lock in self.get_lock_list("/", include_root=True, include_children=True, token_only=False):
            root = tree_path(lock["root"])
            if root == "" or root == target or target.startswith(root + "/"):
                return True
        return False


class HostLockManager(LockManager):
    """WsgiDAV's LockManager, granting locks one at a time across gateway processes, with RFC
    4918's rule for shared locks.

    WsgiDAV serialises acquire() with a lock of its own process only; here each grant also holds a
    PostgreSQL advisory lock and reads the live locks afresh, so a LOCK through another gateway
    that won a moment earlier is seen.

    WsgiDAV asks a writer for the token of EVERY lock on the resource, so with two shared locks
    neither holder can write (RFC 4918 6.2 and 7: a shared lock lets each holder write with its own
    token). Here an exclusive lock still needs its own token, and each set of shared locks on one
    root needs the token of one of them, held by the same principal."""

    def acquire(self, **kwargs: Any) -> dict[str, Any]:  # type: ignore[override]
        with leases.one_grant_at_a_time(self.storage.db):
            _local.leases = None  # read afresh under the grant's lock
            _granting(True)
            try:
                return super().acquire(**kwargs)
            finally:
                _granting(False)

    def is_url_locked_by_token(self, url: str, lock_token: str) -> bool:
        """As WsgiDAV's (is ``url`` at or below the token's lock?), comparing tree paths: a name's
        NFD and NFC spellings are one note. Lock roots are kept in NFC, and macOS Finder unlocks
        and refreshes at the URL it locked, in NFD: compared as text, every UNLOCK of an accented
        name answered 409, every refresh 412, and the note stayed locked to its next save."""
        root = self.get_lock(lock_token, key="root")
        if not root:
            return False
        locked, path = tree_path(root), tree_path(url)
        return locked == "" or path == locked or path.startswith(locked + "/")

    def _check_lock_permission(self, url: str, lock_type: str, lock_scope: str, lock_depth: str,
                               token_list: list[str], principal: str) -> None:
        """WsgiDAV's, with a refused LOCK's no-conflicting-lock hrefs as URLs a client can use, as
        _get_write_conflicts gives them (WsgiDAV names the roots below the mount: /org/1/x.md)."""
        try:
            super()._check_lock_permission(url, lock_type, lock_scope, lock_depth, token_list, principal)
        except DAVError as exc:
            if exc.err_condition is not None:
                exc.err_condition.hrefs = [h if h.startswith(MOUNT_PATH + "/") else MOUNT_PATH + h
                                           for h in exc.err_condition.hrefs]
            raise

    def _get_write_conflicts(self, url: str, depth: str, token_list: list[str], principal: str) -> DAVErrorCondition:
        errcond = DAVErrorCondition(PRECONDITION_CODE_LockConflict)
        if not self.storage.get_lock_list("/", include_root=True, include_children=True, token_only=True):
            return errcond  # no lock anywhere (the common case, known without a query): nothing to walk
        covering: list[dict[str, Any]] = []
        u = url
        while u:
            covering += [lock for lock in self.get_url_lock_list(u) if u == url or lock["depth"] == "infinity"]
            u = util.get_uri_parent(u)
        if depth == "infinity":
            covering += self.storage.get_lock_list(url, include_root=False, include_children=True, token_only=False)

        def held(lock: dict[str, Any]) -> bool:
            return lock["principal"] == principal and lock["token"] in token_list

        shared: dict[str, list[dict[str, Any]]] = {}
        # The 423's no-conflicting-lock names each lock's root as a URL a client can use (RFC 4918
        # 16): lock roots are kept below the mount (/org/1/x.md), hrefs start at it (/dav/org/...).
        for lock in covering:
            if lock["scope"] == "shared":
                shared.setdefault(lock["root"], []).append(lock)
            elif not held(lock):
                errcond.add_href(MOUNT_PATH + lock["root"])
        for root, locks in shared.items():
            if not any(held(lock) for lock in locks):
                errcond.add_href(MOUNT_PATH + root)
        return errcond

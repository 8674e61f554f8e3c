"""WsgiDAV's lock storage interface (LockStorageDict's methods) over store.locks.

Locks live in PostgreSQL so that a lock taken through one gateway process is honoured by every
other. A listing asks for the locks of every member; the live leases are read once per request,
without their owners (read when a lock is shown), only those that can matter to it (an
organisation's, ``request_scope``), and kept in a per-thread cache that the DAV app resets at each
request start and that every change here empties. A login holds at most store.locks'
MAX_LIVE_PER_HOLDER of them, and an owner is capped, so what one member can make every request
read is bounded. While the process's watch (store/login_watch.py) says nothing
happened to any lock since a read found none at all, that read is not repeated: most writes
happen with no lock anywhere, and each saves a round trip. A lock taken through another process
reaches this one by notification (sql/060) within milliseconds of its commit; a write in that
window is not checked against it, as a write racing the LOCK request itself would not be. A lock
on a side file is seen by its holder alone (``viewing``): each user's side file is their own."""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote, unquote, urlsplit

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


def reset_request_cache(environ: dict[str, Any] | None = None) -> None:
    """Forget what this thread read for the previous request, and whose request it was.
    ``environ``: the new request, whose scope (``request_scope``) bounds the leases it reads."""
    _local.leases = None
    _local.viewer = None
    _local.scope = request_scope(environ) if environ is not None else ""


# One organisation's folder in a request's path: the request then reads only the leases on that
# folder, above it or below it. Conservative on purpose: a path that could be normalised to
# another place ("." or ".." segments, "//", a "%" WsgiDAV may decode again), a Destination
# elsewhere, or a tagged If header (naming resources anywhere) reads every lease, as before.
_ORG_PATH = re.compile(r"(?:" + re.escape(MOUNT_PATH) + r")?/(org/[1-9][0-9]{0,18})(?:/[^/%]+)*/?")


def request_scope(environ: dict[str, Any]) -> str:
    """The tree folder every lock that can matter to this request lies on, above or below: an
    organisation's folder ("org/7") when the request stays inside it, else "" (the whole store).
    A lock anywhere else cannot cover, conflict with, or be shown by it: read only these, one
    organisation's locks cost nothing to the others' requests."""
    match = _ORG_PATH.fullmatch(environ.get("PATH_INFO", ""))
    # (an If header of tagged lists starts with a resource, "<...>"; untagged ones with "(")
    if match is None or "/." in environ["PATH_INFO"] or environ.get("HTTP_IF", "").lstrip().startswith("<"):
        return ""
    destination = environ.get("HTTP_DESTINATION")
    if destination is not None:
        there = _ORG_PATH.fullmatch(urlsplit(destination).path)
        if there is None or there.group(1) != match.group(1) or "/." in destination:
            return ""
    return match.group(1)


def viewing(principal_name: str) -> None:
    """The login this thread's request runs as (HostDAVProvider.tree sets it): a lock on a side
    file is seen by its holder alone, since each user's side file of that name is their own."""
    _local.viewer = principal_name


def _seen_by(viewer: str | None, lock: dict[str, Any]) -> bool:
    """Whether the request's login (None: not known yet) sees ``lock``, a lock on a side file."""
    return viewer is None or lock.get("principal") in (None, viewer)


def _granting(on: bool) -> None:
    _local.granting = on


def tree_path(ref_url: str) -> str:
    """A WsgiDAV ref URL ('/org/1/a%20b.md') as a Host tree path ('org/1/a b.md')."""
    return nfc(unquote(ref_url)).strip("/")


def _ref_url(path: str) -> str:
    return quote("/" + path)


def owner_text(owner: Any) -> str:
    """A LOCK's <D:owner> XML (bytes, as WsgiDAV hands it over) as the text a lease stores."""
    owner = owner or b""
    return owner.decode("utf-8", "replace") if isinstance(owner, bytes) else str(owner)


class _Owners:
    """The owners of the locks one read left out (leases.covering(owners=False)), read at once the
    first time a lock of that read is shown: most requests only ask which paths are locked, and
    owners (up to leases.MAX_OWNER_BYTES each) are most of the leases' bytes."""

    def __init__(self, db: Database, tokens: list[str]) -> None:
        self._db, self._tokens, self._owners = db, tokens, None

    def of(self, token: str) -> bytes:
        if self._owners is None:
            with self._db.connection() as conn:
                self._owners = leases.owners(conn, self._tokens)
        return self._owners.get(token, "").encode("utf-8")


class _Lock(dict):
    """A lock dict whose ``owner`` is read when first asked for (``lock["owner"]``, as WsgiDAV's
    lockdiscovery and propfind.py read it); a lock that was unlocked meanwhile shows none."""

    def __init__(self, owners: _Owners, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._owners = owners

    def __missing__(self, key: str) -> Any:
        if key != "owner":
            raise KeyError(key)
        value = self["owner"] = self._owners.of(self["token"])
        return value


class PgLockStorage:
    """LockStorageDict's interface, stored in path_leases."""

    def __init__(self, db: Database, *, watch: LoginWatch | None = None) -> None:
        self.db = db
        self.watch = watch
        # (the watch's lease generation, changes made here) when reads found no lock in the scopes
        # of ``_empty_scopes`` ("": the whole store): until something changes, those reads are
        # skipped (most requests happen with no lock anywhere near them).
        self._empty_at: tuple[int, int] | None = None
        self._empty_scopes: set[str] = set()
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
            self._empty_at = None
        _local.leases = None   # (read again, in the same scope, by whatever the request asks next)

    def _to_lock(self, lease: dict[str, Any], owners: _Owners | None = None) -> dict[str, Any]:
        """WsgiDAV's lock dict of a lease; ``owners``: the lease was read without its owner, which
        the lock reads from there when it is shown."""
        lock = {k: v for k, v in lease.items() if k not in ("path", "expires_at")}
        lock["root"] = _ref_url(lease["path"]) if lease["path"] else "/"
        lock["expire"] = lease["expires_at"].timestamp()
        if owners is not None:
            return _Lock(owners, lock)
        lock["owner"] = lock.get("owner", "").encode("utf-8")
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
        data = {"type": lock["type"], "scope": lock["scope"], "depth": lock["depth"],
                "owner": owner_text(lock.get("owner")), "timeout": timeout, "principal": lock.get("principal")}
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
        return [lock["token"] if token_only else lock for lpath, lock in self._live()
                if (include_root and lpath == target)
                or (include_children and (target == "" or lpath.startswith(target + "/")))]

    def _live(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """(tree path, lock) of each live lock this request may see, read once per request."""
        cached = getattr(_local, "leases", None)
        if cached is None:
            # A grant always reads (HostLockManager.acquire): it decides under PostgreSQL's lock.
            watched = self.watch is not None and not getattr(_local, "granting", False)
            generation = self.watch.leases() if watched else None  # type: ignore[union-attr]
            known = None if generation is None else (generation, self._changes)
            scope = getattr(_local, "scope", "")
            if known is not None and known == self._empty_at and not self._empty_scopes.isdisjoint((scope, "")):
                cached = _local.leases = []
            else:
                with self.db.connection() as conn:
                    found = leases.under(conn, scope, owners=False)
                owners = _Owners(self.db, [x["token"] for x in found])
                # (tree path, on a side file, lock): a request asks this list several times (a PUT
                # eight), each over every live lock, so what each asks of a lock is worked out once.
                cached = _local.leases = [(x["path"], is_side_path(x["path"]), self._to_lock(x, owners))
                                          for x in found]
                if known is not None and not found:
                    with self._known_lock:
                        if known[1] == self._changes:
                            if self._empty_at != known:
                                self._empty_at, self._empty_scopes = known, set()
                            self._empty_scopes.add(scope)
        now, viewer = time.time(), getattr(_local, "viewer", None)
        for lpath, side, lock in cached:
            if lock["expire"] >= now and (not side or _seen_by(viewer, lock)):
                yield lpath, lock

    def locked_at_or_above(self, path: str) -> bool:
        """Whether a live lock is rooted at ``path`` (a decoded DAV path, as WsgiDAV's PATH_INFO)
        or at a folder above it: a write there must pass WsgiDAV's lock checks (a lock-null name,
        a locked file, a locked folder's members). No query while the watch says no lock is near."""
        target = nfc(path).strip("/")  # already decoded: a name may hold "%41" itself
        return any(root == "" or root == target or target.startswith(root + "/") for root, _ in self._live())


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
        # An owner over the store's cap is refused before the grant lock and the read of the live
        # locks (leases.create checks it again, with the holder's count, for every front end).
        leases.check_owner(owner_text(kwargs.get("lock_owner")))
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

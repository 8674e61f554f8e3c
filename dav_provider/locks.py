"""WsgiDAV's lock storage interface (LockStorageDict's methods) over store.locks.

Locks live in PostgreSQL so that a lock taken through one gateway process is honoured by every
other. A request reads, without their owners (read when a lock is shown), only the live leases
that can matter to it (``request_focus``): those on its path (and Destination) and on the folders
above, and for a folder's DELETE, MOVE, COPY, a depth-infinity LOCK or a Depth 1 PROPFIND those
below it or on its members; one indexed query at its first ask, kept in a per-thread cache that
the DAV app resets at each request start and that every change here empties. Asked of anything
else, it reads what that ask needs. Leases elsewhere in its organisation, however many, cost it
nothing (a member at MAX_LIVE_PER_HOLDER locks once made every request of every member of the
organisation read all of them). While the process's watch (store/login_watch.py) says nothing
happened to any lock since a read found none in the request's organisation (``request_scope``),
or none in the same focus, that read is not repeated: most writes happen with no lock near, and
each saves a round trip. A lock taken through another process reaches this one by notification
(sql/060) within milliseconds of its commit; a write in that window is not checked against it, as
a write racing the LOCK request itself would not be. A lock on a side file is seen by its holder
alone (``viewing``): each user's side file is their own."""
from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any, NamedTuple
from urllib.parse import quote, unquote, urlsplit

from wsgidav import util
from wsgidav.dav_error import PRECONDITION_CODE_LockConflict, DAVError, DAVErrorCondition
from wsgidav.lock_man.lock_manager import LockManager, generate_lock_token, normalize_lock_root, validate_lock

from dav_provider import MOUNT_PATH
from store import locks as leases
from store.db import Database
from store.host import is_side_path
from store.login_watch import LoginWatch
from store.paths import ancestors, nfc, parent_of

LOCK_TIME_OUT_DEFAULT = 604800  # 1 week, as LockStorageDict
LOCK_TIME_OUT_MAX = 4 * 604800

_local = threading.local()


def reset_request_cache(environ: dict[str, Any] | None = None) -> None:
    """Forget what this thread read for the previous request, and whose request it was.
    ``environ``: the new request, whose focus (``request_focus``) says which leases it reads at
    once, and whose scope (``request_scope``) which emptiness it may remember."""
    _local.window = None
    _local.viewer = None
    _local.scope = request_scope(environ) if environ is not None else ""
    _local.focus = request_focus(environ) if environ is not None else None


# One organisation's folder in a request's path: a read that finds no lease on that folder, above
# it or below it lets the request's process skip later reads inside it until a lock changes.
# Conservative on purpose: a path that could be normalised to another place ("." or ".."
# segments, "//", a "%" WsgiDAV may decode again), a Destination elsewhere, or a tagged If header
# (naming resources anywhere) has the whole store as its scope.
_ORG_PATH = re.compile(r"(?:" + re.escape(MOUNT_PATH) + r")?/(org/[1-9][0-9]{0,18})(?:/[^/%]+)*/?")


def request_scope(environ: dict[str, Any]) -> str:
    """The tree folder every lock that can matter to this request lies on, above or below: an
    organisation's folder ("org/7") when the request stays inside it, else "" (the whole store).
    A lock anywhere else cannot cover, conflict with, or be shown by it: once a read found none
    there, the process skips the reads inside it until a lock changes, so one organisation's
    locks cost nothing to the others' requests (what each request reads: ``request_focus``)."""
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


class Focus(NamedTuple):
    """The leases a request reads at once, in one query: those on ``paths`` and on every folder
    above them (a lock on a folder, depth infinity, covers everything below it; one of depth 0 its
    members), those strictly below each folder of ``below`` (a folder's DELETE, MOVE or COPY, a
    depth-infinity LOCK or PROPFIND) and those on the direct members of each of ``children`` (a
    Depth 1 PROPFIND: each member's lockdiscovery)."""
    paths: tuple[str, ...]
    below: tuple[str, ...] = ()
    children: tuple[str, ...] = ()


def request_focus(environ: dict[str, Any]) -> Focus:
    """The leases that can matter to this request (``Focus``), as tree paths. WsgiDAV asks only
    of these for the requests it serves; should it ask of anything else (a path spelt so that it
    normalises elsewhere), the storage reads what that ask needs on its own (``_Window``), so this
    decides what is read at once, never what is seen."""
    method = environ.get("REQUEST_METHOD", "").upper()
    # (PATH_INFO is WSGI's latin-1 reading of the client's UTF-8 bytes; the Destination, a URL,
    # is decoded by unquote)
    path = _request_path(util.re_encode_wsgi(environ.get("PATH_INFO", ""), fallback=True))
    paths, below, children = [path], [], []
    depth = environ.get("HTTP_DEPTH", "").strip().lower()
    if method in ("DELETE", "MOVE") or (method == "LOCK" and depth != "0") \
            or (method == "PROPFIND" and depth not in ("0", "1")):
        below.append(path)
    elif method == "PROPFIND" and depth == "1":
        children.append(path)
    if method in ("MOVE", "COPY") and environ.get("HTTP_DESTINATION"):
        there = unquote(urlsplit(environ["HTTP_DESTINATION"]).path)
        there = _request_path(there[len(MOUNT_PATH):] if there.startswith(MOUNT_PATH + "/") else there)
        paths.append(there)
        below.append(there)
    return Focus(tuple(paths), tuple(below), tuple(children))


def _request_path(path_info: str) -> str:
    """A decoded DAV path (PATH_INFO below the mount) as a tree path."""
    return nfc(path_info).strip("/")


def _ancestry(path: str) -> list[str]:
    """``path`` and every folder above it, up to the root ""."""
    return [*ancestors(path), path]


def _below(path: str, folder: str) -> bool:
    """Whether ``path`` lies strictly below ``folder``."""
    return path != "" and (folder == "" or path.startswith(folder + "/"))


class _Window:
    """The live leases one request read (without owners), and which paths they are all the
    leases of: ``exact`` (those on these paths), ``below`` (strictly below these folders),
    ``children`` (on these folders' direct members). An ask outside them reads what it lacks and
    widens the window (``PgLockStorage._live``)."""

    def __init__(self) -> None:
        self.exact: set[str] = set()
        self.below: list[str] = []
        self.children: list[str] = []
        # (tree path, on a side file, lock): a request asks of its locks several times (a PUT
        # eight), so what each asks of a lock is worked out once.
        self.locks: list[tuple[str, bool, dict[str, Any]]] = []
        self._tokens: set[str] = set()

    def cover(self, focus: Focus) -> None:
        for path in focus.paths:
            self.exact.update(_ancestry(path))
        self.below += focus.below
        self.children += focus.children

    def add(self, lock: tuple[str, bool, dict[str, Any]]) -> None:
        if lock[2]["token"] not in self._tokens:
            self._tokens.add(lock[2]["token"])
            self.locks.append(lock)

    def has_root(self, path: str) -> bool:
        """Whether every lease on ``path`` is here."""
        return path in self.exact or any(_below(path, f) for f in self.below) \
            or (path != "" and parent_of(path) in self.children)

    def has_below(self, path: str) -> bool:
        """Whether every lease strictly below ``path`` is here."""
        return any(path == f or _below(path, f) for f in self.below)

    def lacks(self, focus: Focus) -> Focus | None:
        """What is still to be read for every lease of ``focus`` to be here, or None."""
        paths = tuple(a for p in focus.paths for a in _ancestry(p) if not self.has_root(a))
        below = tuple(f for f in focus.below if not self.has_below(f))
        children = tuple(f for f in focus.children if f not in self.children and not self.has_below(f))
        return Focus(paths, below, children) if paths or below or children else None


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
    """The owners of the locks one read left out (leases.near(owners=False)), read at once the
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
        # ((the watch's lease generation, changes made here), what was found empty then): the
        # scopes (an organisation's folder, "" the whole store) and request focuses (``Focus``)
        # where reads found no lock. Until something changes, those reads are skipped (most
        # requests happen with no lock anywhere near them). One attribute, read once, so a
        # reader never pairs one generation with another's set. At most MAX_EMPTY focuses.
        self._empty: tuple[tuple[int, int], set[str | Focus]] | None = None
        self._changes = 0
        self._known_lock = threading.Lock()

    MAX_EMPTY = 10_000

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
            self._empty = None
        _local.window = None   # (read again, in the same focus, by whatever the request asks next)

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
        return [lock["token"] if token_only else lock
                for lpath, lock in self._live(Focus((target,), (target,) if include_children else ()))
                if (include_root and lpath == target) or (include_children and _below(lpath, target))]

    def locks_near(self, url: str, depth: str) -> bool:
        """Whether a live lock this request sees lies on ``url`` (a ref URL) or on a folder above
        it, or (``depth`` "infinity") anywhere below it: with none, nothing can stop a change of
        ``url`` (``HostLockManager._get_write_conflicts``)."""
        target = tree_path(normalize_lock_root(url))
        above = set(_ancestry(target))
        deep = depth == "infinity"
        return any(lpath in above or (deep and _below(lpath, target))
                   for lpath, _ in self._live(Focus((target,), (target,) if deep else ())))

    def listing_has_locks(self, url: str) -> bool:
        """Whether a live lock this request sees lies on the folder ``url`` (a ref URL) or on one
        of its members: with none, every lockdiscovery of its Depth 1 listing is empty
        (lockdiscovery shows the locks rooted at the resource itself, as WsgiDAV's does)."""
        target = tree_path(normalize_lock_root(url))
        return any(lpath == target or (lpath != "" and parent_of(lpath) == target)
                   for lpath, _ in self._live(Focus((target,), (), (target,))))

    def _live(self, wanted: Focus) -> Iterator[tuple[str, dict[str, Any]]]:
        """(tree path, lock) of each live lock this request may see, among them at least every
        one of ``wanted`` (its paths, the folders above them, and what lies below ``below`` and
        on the members of ``children``). The request's focus is read at its first ask, in one
        query; an ask beyond it reads what it lacks, once."""
        window = getattr(_local, "window", None)
        if window is None:
            window = _local.window = _Window()
            focus = getattr(_local, "focus", None)
            if focus is not None:
                self._read(window, focus, getattr(_local, "scope", ""))
        lacking = window.lacks(wanted)
        if lacking is not None:
            self._read(window, lacking, None)
        now, viewer = time.time(), getattr(_local, "viewer", None)
        for lpath, side, lock in window.locks:
            if lock["expire"] >= now and (not side or _seen_by(viewer, lock)):
                yield lpath, lock

    def _read(self, window: _Window, focus: Focus, scope: str | None) -> None:
        """Read the live leases of ``focus`` into ``window`` (one query), unless the watch says
        none can be there; ``scope``: the request's, whose emptiness a read may remember."""
        # A grant always reads (HostLockManager.acquire): it decides under PostgreSQL's lock.
        watched = self.watch is not None and not getattr(_local, "granting", False)
        generation = self.watch.leases() if watched else None  # type: ignore[union-attr]
        known = None if generation is None else (generation, self._changes)
        request_scope = getattr(_local, "scope", "")
        state = self._empty
        if known is not None and state is not None and state[0] == known:
            empty = state[1]
            if focus in empty or "" in empty:
                window.cover(focus)
                return
            if request_scope in empty and all(p == request_scope or _below(p, request_scope) for p in
                                             (*focus.paths, *focus.below, *focus.children)):
                window.cover(focus)
                return
        paths = {a for p in focus.paths for a in _ancestry(p)}
        with self.db.connection() as conn:
            found, near_scope = leases.near(conn, paths=sorted(paths), below=focus.below,
                                            children=focus.children, scope=scope if known is not None else None,
                                            owners=False)
        owners = _Owners(self.db, [x["token"] for x in found])
        window.cover(focus)
        for x in found:
            window.add((x["path"], is_side_path(x["path"]), self._to_lock(x, owners)))
        if known is not None and (not found or near_scope is False):
            with self._known_lock:
                state = self._empty
                # (a read from before a newer generation knows less: it never replaces that one's)
                if known[1] == self._changes and (state is None or state[0][0] <= known[0]):
                    if state is None or state[0] != known:
                        state = self._empty = (known, set())
                    if not found and len(state[1]) < self.MAX_EMPTY:
                        state[1].add(focus)
                    if near_scope is False:
                        state[1].add(scope)  # type: ignore[arg-type]

    def locked_at_or_above(self, path: str) -> bool:
        """Whether a live lock is rooted at ``path`` (a decoded DAV path, as WsgiDAV's PATH_INFO)
        or at a folder above it: a write there must pass WsgiDAV's lock checks (a lock-null name,
        a locked file, a locked folder's members). No query while the watch says no lock is near."""
        target = nfc(path).strip("/")  # already decoded: a name may hold "%41" itself
        above = _ancestry(target)
        return any(root in above for root, _ in self._live(Focus((target,))))


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
            _local.window = None  # read afresh under the grant's lock
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
        if not self.storage.locks_near(url, depth):
            return errcond  # no lock near (the common case, often known without a query): nothing to walk
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

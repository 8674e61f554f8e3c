"""HostDAVProvider: resolves a request path to a resource over the Host tree.

One HostTree per request (in the environ), built for the principal the domain controller put
there. A folder's listing keeps its Nodes for the request, so PROPFIND depth 1 resolves every
member from the listing instead of one query per child."""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

from wsgidav.dav_error import (HTTP_CONFLICT, HTTP_FORBIDDEN, HTTP_NOT_FOUND,
                               PRECONDITION_CODE_PropfindFiniteDepth, DAVError)
from wsgidav import util as wsgidav_util
from wsgidav.dav_provider import DAVProvider

from dav_provider import headers, propfind
from dav_provider.resources import CREATED, MISSING, NODES, FileResource, FolderResource, resource_for, store_call
from dav_provider.locks import viewing
from dav_provider.view import render_note
from store import properties
from store.access import PRINCIPAL_KEY
from store.db import Database
from store.errors import NotFound, StoreError
from store.filecache import FileCache
from store.host import HostTree
from store.paths import nfc

TREE = "hostfinder.tree"
PARENT_OF_FILE = "hostfinder.parent_of_file"
MARKDOWN_KINDS = ("note", "task", "memory", "history")
# A rendered note is the one page a browser shows from here: no scripts, no fetches, no sniffing.
HTML_VIEW_HEADERS = [("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'"),
                     ("X-Content-Type-Options", "nosniff")]


def _inside_an_organisation(tree: HostTree, path: str) -> bool:
    """Whether ``path`` is below an organisation's folder this user sees (/org/<id>/...)."""
    parts = path.strip("/").split("/")
    if len(parts) < 3 or parts[0] != "org":
        return False
    try:
        tree.stat(f"/org/{parts[1]}")
    except StoreError:
        return False
    return True


class HostDAVProvider(DAVProvider):
    def __init__(self, db: Database, *, cache: FileCache | None = None) -> None:
        super().__init__()
        self.db = db
        self.cache = cache

    def tree(self, environ: dict[str, Any]) -> HostTree | None:
        tree = environ.get(TREE)
        if tree is None:
            principal = environ.get(PRINCIPAL_KEY)
            if principal is None:
                return None
            tree = environ[TREE] = HostTree(self.db, principal, cache=self.cache, honour_leases=False)
            viewing(principal.name)
        return tree

    def get_resource_inst(self, path: str, environ: dict[str, Any]) -> FolderResource | FileResource | None:
        tree = self.tree(environ)
        if tree is None:
            return None
        key = path.rstrip("/") or "/"
        cached = environ.get(NODES, {}).get(key)
        if cached is not None:
            return resource_for(path, environ, cached)
        if key in environ.get(MISSING, ()):
            return None
        if key == environ.get(PARENT_OF_FILE):
            # The folder of the file this PUT replaces (see _check_parent): it exists and is
            # visible, or the file could not have been found; WsgiDAV only asks is_collection.
            return FolderResource(path, environ, None)
        try:
            node = tree.stat(path)
        except NotFound:
            res = self._lock_null(path, environ)
            if res is None and environ.get("REQUEST_METHOD") == "PUT":
                # Nothing in this request makes the name exist before the write, which forgets
                # this (forget_nodes); a LOCK may, so only a PUT remembers a miss.
                environ.setdefault(MISSING, set()).add(key)
            return res
        except Exception as exc:
            store_call(_raise, exc)
            raise
        # WsgiDAV resolves a path several times per request (the dir browser, the request
        # server, a PUT's parent, lock checks): one query each time would be waste. The nodes
        # are forgotten as soon as the request changes anything (resources.forget_nodes).
        environ.setdefault(NODES, {})[path.rstrip("/") or "/"] = node
        return resource_for(path, environ, node)

    def locked_at_or_above(self, path: str) -> bool:
        """Whether a WebDAV lock covers ``path`` (dav_provider.fastput leaves those to WsgiDAV)."""
        return self.lock_manager is None or self.lock_manager.storage.locked_at_or_above(path)

    def _lock_null(self, path: str, environ: dict[str, Any]) -> FileResource | None:
        """A name locked before its first write (Finder: LOCK, then PUT) stays virtual until the
        body arrives, so an abandoned upload leaves no empty note; WsgiDAV still needs a resource
        to report the lock on. Only in a folder this principal can see: stat() says NotFound for
        another organisation's paths too, and its pending names must stay unknown here."""
        if self.lock_manager is None or not self.lock_manager.storage.get_lock_list(
                quote(path.rstrip("/")), include_root=True, include_children=False, token_only=True):
            return None
        parent = path.rstrip("/").rsplit("/", 1)[0]
        try:
            folder = self.tree(environ).stat(parent)  # type: ignore[union-attr]
        except StoreError:
            return None
        return FileResource(path, environ, None) if folder.is_dir else None

    def custom_request_handler(self, environ: dict[str, Any], start_response: Callable[..., Any],
                               default_handler: Callable[..., Iterable[bytes]]) -> Iterable[bytes]:
        method = environ.get("REQUEST_METHOD")  # (the lock cache was reset at the request's start: app.py)
        self.tree(environ)  # whose request this is, before any lock is looked at (locks.viewing)
        headers.check_path(environ)
        headers.check_simple_headers(environ)
        headers.check_if(environ)
        headers.drop_overruled_conditions(environ)
        if method in ("COPY", "MOVE"):
            headers.check_destination(environ)
            self._check_destination(environ)
        elif method in ("PUT", "MKCOL", "LOCK"):
            self._check_parent(environ, method)
        elif method in ("GET", "HEAD") and "HTTP_RANGE" in environ:
            res = self.get_resource_inst(environ["PATH_INFO"], environ)
            headers.normalize_range(environ, res.node.size if isinstance(res, FileResource) and res.node else None)
        elif method == "PROPPATCH":
            self._check_proppatch(environ)
        elif method == "DELETE":
            self._check_unlocked(environ)
        headers.resolve_if_tags(environ, lambda path: self._if_tag_ref_url(environ, path))
        if method == "PROPFIND" and environ.get("HTTP_DEPTH", "infinity").strip().lower() == "infinity":
            if not isinstance(self.get_resource_inst(environ["PATH_INFO"], environ), FolderResource):
                # A file's depth is 0 whatever is asked (RFC 4918 9.1 allows refusing infinity on
                # collections only); simple clients check that a file exists with no Depth at all.
                environ["HTTP_DEPTH"] = "0"
            else:
                # Depth infinity over thousands of notes is a denial of service; RFC 4918 9.1 lets
                # a server refuse it with this precondition. Clients fall back to depth 1.
                raise DAVError(HTTP_FORBIDDEN, context_info="PROPFIND with Depth: infinity is not supported; "
                               "list one folder at a time with Depth: 1",
                               err_condition=PRECONDITION_CODE_PropfindFiniteDepth)
        if method == "PROPFIND":
            fast = propfind.answer(self, environ, start_response)  # a folder's listing, or None
            if fast is not None:
                return fast
            propfind.propname_for_wsgidav(environ)
        if method == "GET" and "html" in parse_qs(environ.get("QUERY_STRING", "")).get("view", []):
            return self._html_view(environ, start_response, default_handler)
        if method in ("COPY", "MOVE", "PUT"):
            return default_handler(environ, _created_when_new(environ, start_response))
        return default_handler(environ, start_response)

    def _check_parent(self, environ: dict[str, Any], method: str) -> None:
        """A new name whose folder is missing: inside an organisation this user sees, the 409 of a
        missing folder with a sentence (_no_folder); in a folder this user cannot see (another
        organisation's, or none) the tree's 404, as for anything else there. WsgiDAV would answer
        409 "PUT parent must be a collection" for both, telling that another's folder exists."""
        path = environ["PATH_INFO"]
        tree = self.tree(environ)
        if tree is None:
            return
        res = self.get_resource_inst(path, environ)
        if res is not None:
            if method == "PUT" and isinstance(res, FileResource) and res.node is not None:
                environ[PARENT_OF_FILE] = path.rstrip("/").rsplit("/", 1)[0] or "/"
            elif method == "PUT" and isinstance(res, FileResource):
                # A locked name not written yet (Finder's LOCK before its upload): the PUT creates
                # the file, 201 (RFC 9110 9.3.4), where WsgiDAV sees a resource and says 204.
                environ[CREATED] = True
            return
        parent = path.rstrip("/").rsplit("/", 1)[0] or "/"
        if self.get_resource_inst(parent, environ) is None:  # kept for WsgiDAV's own parent check
            self._no_folder(tree, parent, path)
        if method == "LOCK":
            # A lock on a name not written yet reserves it for the PUT that follows: a name no PUT
            # could write (a .txt file; a new folder, named with its trailing slash) is refused
            # now, with the sentence a PUT or MKCOL gets.
            store_call(tree.mkdir if path.endswith("/") else tree.check_write, path)

    def _check_destination(self, environ: dict[str, Any]) -> None:
        """MOVE/COPY: the destination must be a file name in a folder this user can see. The root
        or a layout folder as the destination is the tree's 403 sentence (WsgiDAV answered 500 or
        502), another organisation's folder its 404."""
        tree = self.tree(environ)
        if tree is None:
            return
        mount = environ.get("SCRIPT_NAME", "").rstrip("/")
        dest = unquote(urlsplit(environ["HTTP_DESTINATION"].strip()).path)[len(mount):]
        parent = dest.rstrip("/").rsplit("/", 1)[0] or "/"
        self._no_folder(tree, parent, dest)
        store_call(tree.check_write, dest)

    @staticmethod
    def _no_folder(tree: HostTree, parent: str, path: str) -> None:
        """Refuse a new name whose folder does not exist. Inside an organisation this user sees,
        that is RFC 4918's 409 for a missing intermediate collection (9.7.1, 9.8.5, 9.9.4), naming
        a folder the file could go in instead; anywhere else (another organisation, which is not
        there at all for this user) the tree's 404 stands."""
        try:
            store_call(tree.stat, parent)
            return
        except DAVError as exc:
            if exc.value != HTTP_NOT_FOUND or not _inside_an_organisation(tree, parent):
                raise   # (another organisation's folder, or one of no organisation: its 404)
        name = path.rstrip("/").rsplit("/", 1)[-1]
        instead, above = "", parent.rstrip("/")
        while "/" in above:   # the nearest folder above where this name could be saved
            above = above.rsplit("/", 1)[0]
            try:
                tree.check_write(f"{above}/{name}")
            except StoreError:
                continue
            instead = f", such as {above}/{name}"
            break
        flat = "; notes are flat (there are no folders inside a level's folder), so save it in an " \
               f"existing folder{instead}" if name.lower().endswith(".md") else ""
        raise DAVError(HTTP_CONFLICT, context_info=f"there is no folder {parent} to put {name} in{flat}")

    def _check_unlocked(self, environ: dict[str, Any]) -> None:
        """DELETE: WsgiDAV checks only the parent folder's locks (depth 0), so a locked note was
        deleted by anyone. RFC 4918 9.6.1: the resource and, for a folder, its members must not be
        locked without the token in the If header: 423 and nothing changes."""
        res = self.get_resource_inst(environ["PATH_INFO"], environ)
        if res is None or self.lock_manager is None:
            return
        if "wsgidav.conditions.if" not in environ:
            wsgidav_util.parse_if_header_dict(environ)
        self.lock_manager.check_write_permission(url=res.get_ref_url(), depth="infinity",
                                                 token_list=environ["wsgidav.ifLockTokenList"],
                                                 principal=environ.get("wsgidav.user_name"))

    def _if_tag_ref_url(self, environ: dict[str, Any], path: str) -> str:
        """The ref URL WsgiDAV compares an If header's tag with (headers.resolve_if_tags), for the
        DAV path the tag names. When that is the request's resource, or a COPY's or MOVE's
        destination, it is that resource's own get_ref_url(), whichever Unicode form the tag spells
        the name in (Finder's NFD) and with or without a folder's trailing slash; otherwise the
        path quoted as get_ref_url() quotes it."""
        name = nfc(path).strip("/")
        targets = [environ.get("PATH_INFO", "/")]
        if environ.get("REQUEST_METHOD") in ("COPY", "MOVE") and environ.get("HTTP_DESTINATION"):
            # As WsgiDAV's _copy_or_move reads it (headers.check_destination left only the path).
            mount = environ.get("SCRIPT_NAME", "").rstrip("/")
            try:
                targets.append(wsgidav_util.normalize_path(
                    unquote(urlsplit(environ["HTTP_DESTINATION"].strip()).path))[len(mount):] or "/")
            except (DAVError, ValueError):
                pass
        for target in targets:
            if nfc(target).strip("/") == name:
                try:
                    res = self.get_resource_inst(target, environ)
                except DAVError:
                    res = None   # (WsgiDAV, resolving it next, answers that error)
                if res is not None:
                    return res.get_ref_url()
        return quote(path)

    def _check_proppatch(self, environ: dict[str, Any]) -> None:
        """Refuse a PROPPATCH as a whole (403 and the sentence) where properties cannot go, rather
        than one failed status per property in a multistatus."""
        res = self.get_resource_inst(environ["PATH_INFO"], environ)
        if res is None:
            return  # WsgiDAV answers 404
        read_only = res.node is not None and not res.node.writable
        store_call(properties.check_path, nfc(environ["PATH_INFO"]).strip("/"), read_only=read_only)

    def _html_view(self, environ: dict[str, Any], start_response: Callable[..., Any],
                   default_handler: Callable[..., Iterable[bytes]]) -> Iterable[bytes]:
        res = self.get_resource_inst(environ["PATH_INFO"], environ)
        if not isinstance(res, FileResource) or res.node is None or res.node.kind not in MARKDOWN_KINDS:
            return default_handler(environ, start_response)
        text = store_call(self.tree(environ).read, res.path).decode("utf-8", "replace")  # type: ignore[union-attr]
        body = render_note(text, title="/" + res.node.path, mount=environ.get("SCRIPT_NAME", "").rstrip("/"))
        start_response("200 OK", [("Content-Type", "text/html; charset=utf-8"),
                                  ("Content-Length", str(len(body))),
                                  ("ETag", res.node.etag), ("Cache-Control", "no-cache"), *HTML_VIEW_HEADERS])
        return [body]


def _raise(exc: BaseException) -> None:
    raise exc


def _created_when_new(environ: dict[str, Any], start_response: Callable[..., Any]) -> Callable[..., Any]:
    """MOVE/COPY to a name that did not exist, or a PUT to a locked name not written yet: 201
    Created, not WsgiDAV's 204."""
    def wrapped(status: str, headers: list[tuple[str, str]], *exc_info: Any) -> Any:
        if status.startswith("204") and environ.get(CREATED):
            status = "201 Created"
        return start_response(status, headers, *exc_info)
    return wrapped

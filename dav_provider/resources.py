"""Folder and file resources over the Host tree: each method is one HostTree call.

A PUT body goes into a store write handle (store.handles, the same one the FUSE mount's open
files use) and becomes ONE version in end_write, and only when the whole body arrived
(with_errors False), so a broken upload leaves nothing behind. DELETE, MOVE and COPY have
the tree's domain meaning (handle_* return True): WsgiDAV's file-by-file fallback never runs."""
from __future__ import annotations

import io
from collections.abc import Callable
from email.utils import parsedate_to_datetime
from typing import Any, TypeVar

from wsgidav.dav_error import HTTP_BAD_REQUEST, HTTP_NOT_FOUND, DAVError
from wsgidav.dav_provider import DAVCollection, DAVNonCollection

from dav_provider.errors import dav_error, internal_error
from store.errors import StoreError
from store.handles import WriteHandle
from store.host import HostTree, Node

T = TypeVar("T")
NODES = "hostfinder.nodes"
# Paths this request found missing (a PUT's new name: WsgiDAV and our checks resolve it several
# times, each a lookup and a lock query otherwise). Forgotten with NODES.
MISSING = "hostfinder.missing"
CREATED = "hostfinder.created"
READ_ONLY_KINDS = ("history", "collection_json", "record")


def store_call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run one tree call; a store refusal becomes the DAVError of dav_provider.errors, and anything
    else a logged 500 whose body is a sentence (never the exception or a driver's message)."""
    try:
        return fn(*args, **kwargs)
    except (StoreError, DAVError) as exc:
        if isinstance(exc, DAVError):
            raise
        raise dav_error(exc) from exc
    except Exception as exc:
        raise internal_error(exc) from None


def tree_of(environ: dict[str, Any]) -> HostTree:
    return environ["hostfinder.tree"]


def _join(parent: str, name: str) -> str:
    return parent.rstrip("/") + "/" + name


def forget_nodes(environ: dict[str, Any]) -> None:
    """Drop the nodes this request has resolved so far: it is about to change the tree."""
    environ.pop(NODES, None)
    environ.pop(MISSING, None)


def resource_for(path: str, environ: dict[str, Any], node: Node) -> FolderResource | FileResource:
    if node.is_dir:
        return FolderResource(path, environ, node)
    return FileResource(path, environ, node)


class _Common:
    """Timestamps, names and the domain DELETE / MOVE / COPY shared by folders and files."""

    node: Node | None
    path: str
    environ: dict[str, Any]

    def get_property_value(self, name: str) -> Any:
        # RFC 4331's quota values are numbers; with none to give (there is no byte quota, only
        # the owner's count of notes) the properties are absent, 404 in their propstat. WsgiDAV
        # answered them 200 with empty elements, which clients read as 0 bytes free or fail on.
        if name in ("{DAV:}quota-available-bytes", "{DAV:}quota-used-bytes"):
            raise DAVError(HTTP_NOT_FOUND)
        return super().get_property_value(name)  # type: ignore[misc]

    def get_creation_date(self) -> float | None:
        return self.node.created_at.timestamp() if self.node else None

    def get_last_modified(self) -> float | None:
        return self.node.modified_at.timestamp() if self.node else None

    def handle_delete(self) -> bool:
        forget_nodes(self.environ)
        store_call(tree_of(self.environ).delete, self.path)
        return True

    def handle_move(self, dest_path: str) -> bool:
        self._note_created(dest_path)
        forget_nodes(self.environ)
        overwrite = self.environ.get("HTTP_OVERWRITE", "T") != "F"
        store_call(tree_of(self.environ).move, self.path, dest_path, overwrite=overwrite)
        return True

    def handle_copy(self, dest_path: str, *, depth_infinity: bool) -> bool:
        self._note_created(dest_path)
        forget_nodes(self.environ)
        overwrite = self.environ.get("HTTP_OVERWRITE", "T") != "F"
        store_call(tree_of(self.environ).copy, self.path, dest_path, overwrite=overwrite)
        return True

    def _note_created(self, dest_path: str) -> None:
        """WsgiDAV answers 204 to every handled MOVE/COPY; RFC 4918 9.8.5/9.9.4 want 201 when the
        destination is new. The provider's response wrapper reads this mark (CREATED)."""
        dest = self.provider.get_resource_inst(dest_path, self.environ)  # type: ignore[attr-defined]
        self.environ[CREATED] = dest is None or dest.node is None  # nothing, or a locked name not yet written

    def support_recursive_delete(self) -> bool:
        return True

    def support_recursive_move(self, dest_path: str) -> bool:
        return True


class FolderResource(_Common, DAVCollection):
    def __init__(self, path: str, environ: dict[str, Any], node: Node) -> None:
        DAVCollection.__init__(self, path, environ)
        self.node = node
        self._members: list[Node] | None = None

    def _list(self) -> list[Node]:
        if self._members is None:
            self._members = store_call(tree_of(self.environ).list, self.path)
            cache = self.environ.setdefault(NODES, {})
            for node in self._members:
                cache[_join(self.path, node.name)] = node
        return self._members

    def get_member_names(self) -> list[str]:
        return [n.name for n in self._list()]

    def get_member_list(self) -> list[Any]:
        return [resource_for(_join(self.path, n.name), self.environ, n) for n in self._list()]

    def get_member(self, name: str) -> Any:
        path = _join(self.path, name)
        node = self.environ.get(NODES, {}).get(path)
        if node is not None:
            return resource_for(path, self.environ, node)
        return self.provider.get_resource_inst(path, self.environ)

    def get_display_info(self) -> dict[str, str]:
        return {"type": "Directory"}

    def get_etag(self) -> None:
        return None

    def create_empty_resource(self, name: str) -> FileResource:
        """A file that does not exist yet (PUT or LOCK on a new name): nothing is written until a
        complete body arrives."""
        path = _join(self.path, name)
        store_call(tree_of(self.environ).check_write, path)
        return FileResource(path, self.environ, None)

    def create_collection(self, name: str) -> None:
        store_call(tree_of(self.environ).mkdir, _join(self.path, name))

    def prevent_locking(self) -> bool:
        return not (self.node and self.node.writable)


class _Spool(io.RawIOBase):
    """The file object WsgiDAV writes a PUT body into: each piece goes into the handle, which
    refuses a body past the store's cap as it arrives. WsgiDAV closes this object before
    end_write, so closing it commits nothing."""

    def __init__(self, handle: WriteHandle) -> None:
        super().__init__()
        self.handle = handle

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return store_call(self.handle.append, bytes(data))

    def close(self) -> None:
        pass


class FileResource(_Common, DAVNonCollection):
    def __init__(self, path: str, environ: dict[str, Any], node: Node | None) -> None:
        DAVNonCollection.__init__(self, path, environ)
        self.node = node
        self._spool: _Spool | None = None

    def get_content_length(self) -> int:
        return self.node.size if self.node else 0

    def get_content_type(self) -> str:
        return self.node.content_type if self.node else "application/octet-stream"

    def get_etag(self) -> str | None:
        return self.node.etag.strip('"') if self.node else None

    def get_property_value(self, name: str) -> Any:
        # RFC 4918 15.6: getetag is the ETag header's value, quotes included; WsgiDAV sends the
        # bare get_etag() here but adds the quotes in the header.
        if name == "{DAV:}getetag" and self.node is not None:
            return self.node.etag
        return super().get_property_value(name)

    def support_etag(self) -> bool:
        return self.node is not None

    def support_ranges(self) -> bool:
        return True

    def get_display_info(self) -> dict[str, str]:
        return {"type": "File"}

    def get_content(self) -> io.BytesIO:
        if self.node is None:
            # A name locked before its first PUT (Finder's and Office's first step): RFC 4918 7.3
            # makes it an empty resource until then, so GET reads nothing, as HEAD already said.
            return io.BytesIO(b"")
        return io.BytesIO(store_call(tree_of(self.environ).read, self.path))

    def prevent_locking(self) -> bool:
        return bool(self.node and self.node.kind in READ_ONLY_KINDS)

    def begin_write(self, *, content_type: str | None = None) -> _Spool:
        if self.node is not None and not self.node.writable:
            store_call(tree_of(self.environ).check_write, self.path)
        self._spool = _Spool(WriteHandle(tree_of(self.environ), self.path, new=True))
        return self._spool

    def end_write(self, *, with_errors: bool) -> None:
        spool, self._spool = self._spool, None
        if spool is None or with_errors:
            return  # a broken upload writes nothing
        env, handle = self.environ, spool.handle
        declared = env.get("CONTENT_LENGTH") or ""
        if declared.isdigit() and handle.size < int(declared):
            # The client went away mid-body (a phone losing its network): cheroot then ends
            # the body early without an error. A part of a save is not a save.
            raise DAVError(HTTP_BAD_REQUEST, context_info=(
                f"the body ended after {handle.size} of the {declared} bytes its Content-Length "
                "announced, so nothing was saved; the previous version is unchanged. Send the "
                "whole file again"))
        forget_nodes(env)
        self.node = store_call(handle.commit, if_match=env.get("HTTP_IF_MATCH"),
                               if_none_match=env.get("HTTP_IF_NONE_MATCH", "").strip() == "*",
                               if_unmodified_since=_http_date(env.get("HTTP_IF_UNMODIFIED_SINCE")))


def _http_date(value: str | None) -> Any:
    if not value:
        return None
    try:
        return parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None

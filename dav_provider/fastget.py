"""GET and HEAD of a file, answered before WsgiDAV's middleware stack.

A GET of a note is what clients send most (a file manager's previews, an editor opening files,
grep over a mount). WsgiDAV passes each one through six middlewares, its request resolver and its
generic resource path; with a remembered login (store.access.Door.remembered_basic) and the node
with its content from one statement (HostTree.stat), that machinery was most of a GET's time.

This path answers only the plain case, with WsgiDAV's own helpers for every decision so the
answer is the one WsgiDAV gives (tests/test_dav_fastget.py compares them): a GET or HEAD of an
existing file, without a query string, Range, an If header or a body, by a Basic login the door
already verified and that nothing has ended since. If-None-Match and If-Modified-Since are
evaluated as WsgiDAV does (304 with its headers; a date is already one it reads, or dropped if it
was none: dav_provider.headers.normalize_dates, called by app.FastPaths for every request); any
other outcome, and everything else (a new login, a wrong one, a throttled one, a folder, a
missing file, a lock-null name, a store error) returns None, and WsgiDAV answers as before.
"""
from __future__ import annotations

import base64
import binascii
from collections.abc import Callable, Iterable
from typing import Any

from wsgidav import util
from wsgidav.dav_error import HTTP_NOT_MODIFIED, DAVError

from dav_provider import headers
from dav_provider.resources import FileResource
from store.access import PRINCIPAL_KEY, Door
from store.errors import Unavailable

# Anything here in the request: WsgiDAV's path decides (ranges, lock tokens, preconditions that
# can fail with 412, a body a GET must not have).
_NOT_HERE = ("HTTP_RANGE", "HTTP_IF_RANGE", "HTTP_IF", "HTTP_IF_MATCH", "HTTP_IF_UNMODIFIED_SINCE",
             "HTTP_TRANSFER_ENCODING")


def answer(provider: Any, door: Door, environ: dict[str, Any],
           start_response: Callable[..., Any]) -> Iterable[bytes] | None:
    """The answer to a plain GET or HEAD of a file, or None to let WsgiDAV answer."""
    method = environ.get("REQUEST_METHOD")
    if method not in ("GET", "HEAD") or environ.get("QUERY_STRING"):
        return None
    if any(k in environ for k in _NOT_HERE) or environ.get("CONTENT_LENGTH", "0") not in ("", "0"):
        return None
    if environ.get("HTTP_DEPTH", "0") != "0":
        return None
    path = admit(provider, door, environ)
    if path is None:
        return None
    try:
        res = provider.get_resource_inst(path, environ)
    except Exception as exc:  # a store error: WsgiDAV's path answers it with its sentence,
        _raise_if_unavailable(exc)  # unless the database is away or busy (asked again, it waits again)
        return None
    if not isinstance(res, FileResource) or res.node is None:
        return None
    node = res.node
    etag = util.checked_etag(res.get_etag(), allow_none=True) or "[]"
    last_modified = res.get_last_modified()
    modified = int(last_modified) if last_modified is not None else -1
    if "HTTP_IF_NONE_MATCH" in environ or "HTTP_IF_MODIFIED_SINCE" in environ:
        # (As WsgiDAV: 304 for an If-Modified-Since later than the last change, not for one equal
        # to it. Dates are whole seconds, and a note saved twice within one second keeps its
        # Last-Modified: a client holding the first save would be told its copy is current, as
        # davfs2 then was. An ETag, If-None-Match, says 304 exactly.)
        try:
            util.evaluate_http_conditionals(res, modified, etag, environ)
        except DAVError as exc:
            if exc.value != HTTP_NOT_MODIFIED:
                return None
            # What WsgiDAV's ErrorPrinter sends for a 304.
            start_response("304 Not Modified", [("Content-Length", "0"), ("Date", util.get_rfc1123_time())])
            return [b""]
    try:
        # The bytes stat() just fetched with the node (HostTree keeps them for this read).
        content = b"" if method == "HEAD" else provider.tree(environ).read(path)
    except Exception as exc:
        _raise_if_unavailable(exc)
        return None
    response = [("Content-Length", str(node.size if method == "HEAD" else len(content))),
                ("Last-Modified", util.get_rfc1123_time(last_modified if last_modified is not None else -1)),
                ("Content-Type", res.get_content_type()),
                ("Date", util.get_rfc1123_time()),
                ("ETag", f'"{etag}"'),
                ("Accept-Ranges", "bytes")]
    start_response("200 OK", response)
    return [content]


def _raise_if_unavailable(exc: BaseException) -> None:
    """Raise the store's Unavailable behind ``exc`` (itself, or the cause of the DAVError the
    provider made of it): the gateway answers it 503 with its sentence."""
    cause = exc if isinstance(exc, Unavailable) else exc.__cause__
    if isinstance(cause, Unavailable):
        raise cause from None


def admit(provider: Any, door: Door, environ: dict[str, Any]) -> str | None:
    """The request's DAV path when a fast path may answer it (a Basic login the door already
    verified and nothing has ended since, a path WsgiDAV would accept), with what WsgiDAV would
    have set in ``environ`` for the provider; None to leave the request to WsgiDAV."""
    login = _basic(environ.get("HTTP_AUTHORIZATION", ""))
    if login is None:
        return None
    principal = door.remembered_basic(*login, client=environ.get("REMOTE_ADDR"))
    if principal is None:
        return None
    try:
        # As WsgiDAVApp.__call__ does, into a local: WsgiDAV normalises PATH_INFO itself if this
        # path hands the request on (what is set in environ below is what WsgiDAV would set).
        path = util.normalize_path(util.re_encode_wsgi(environ["PATH_INFO"]))
        headers.check_path(environ)
    except (DAVError, UnicodeError, ValueError):
        return None
    environ[PRINCIPAL_KEY] = principal
    environ["wsgidav.provider"] = provider  # resources find their provider here (WsgiDAV sets it too)
    return path


def _basic(header: str) -> tuple[str, str] | None:
    """(email, secret) of a well-formed Basic header in UTF-8, else None (WsgiDAV's path, and
    the gateway's refusal before it, answer the rest)."""
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        return None
    email, sep, secret = decoded.partition(":")
    return (email, secret) if sep and email and secret else None

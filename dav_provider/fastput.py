"""A plain PUT of a file, answered before WsgiDAV's middleware stack.

Saving is the other thing clients do all day (an editor's save, rclone copy, a sync client's
upload). Through WsgiDAV a PUT resolves its path three times (the dir browser, the request
server, the parent check), each a query, before the write's own transaction; this path goes
straight to the write (HostTree.put), where a note's or a script's save is one statement.

It answers only the plain case: a Basic login the door already verified (as dav_provider.fastget),
a body of known length within the store's cap, no If, If-Match, If-None-Match or
If-Unmodified-Since header, no Content-Encoding or Content-Range, and no WebDAV lock on the file
or any folder above it (the lock storage knows without a query while no lock exists anywhere).
The body is read first and whole; the lock check comes after it, so a LOCK granted while the body
arrived is honoured, and the write runs inside the lock manager's write transaction, as WsgiDAV's
PUT does, so a LOCK arriving during it is refused. Then one write. Whatever the store refuses (a
folder, a read-only file, another organisation's path, a name that cannot be a note) wrote
nothing, so the request goes on to WsgiDAV with the same body, and the client gets WsgiDAV's
answer and sentence, as does a body that ended before its Content-Length. A lost database is
not replayed: a write whose connection died may have committed, so the client gets 503. The success answer is the one
WsgiDAV sends (util.send_status_response: 201 with its page, or 204, and the ETag);
tests/test_dav_fastput.py compares them.
"""
from __future__ import annotations

import io
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import quote

from wsgidav import util
from wsgidav.dav_error import HTTP_CREATED, HTTP_NO_CONTENT, DAVError

from dav_provider.fastget import admit
from store.access import PRINCIPAL_KEY, Door
from store.errors import StoreError, Unavailable
from store.storage import MAX_CONTENT_BYTES

# Anything here: WsgiDAV's path decides (preconditions and lock tokens, encodings it refuses).
_NOT_HERE = ("HTTP_IF", "HTTP_IF_MATCH", "HTTP_IF_NONE_MATCH", "HTTP_IF_UNMODIFIED_SINCE",
             "HTTP_IF_MODIFIED_SINCE", "HTTP_CONTENT_ENCODING", "HTTP_CONTENT_RANGE",
             "HTTP_TRANSFER_ENCODING", "HTTP_X_OC_MTIME")
_CHUNK = 64 * 1024


def answer(provider: Any, door: Door, environ: dict[str, Any],
           start_response: Callable[..., Any]) -> Iterable[bytes] | None:
    """The answer to a plain PUT of a file, or None to let WsgiDAV answer (with the body intact)."""
    if environ.get("REQUEST_METHOD") != "PUT" or environ.get("QUERY_STRING"):
        return None
    if any(k in environ for k in _NOT_HERE):
        return None
    declared = environ.get("CONTENT_LENGTH", "")
    # An empty body (Finder's placeholder before a LOCKed upload) and anything over the cap
    # (the door refused it already) take WsgiDAV's path.
    if not declared.isdigit() or not 0 < int(declared) <= MAX_CONTENT_BYTES:
        return None
    path = admit(provider, door, environ)
    if path is None:
        return None
    tree = provider.tree(environ)
    body = _read_body(environ, int(declared))
    if len(body) == int(declared):
        try:
            # As WsgiDAV's PUT does: the URL is marked as being written while the write runs, so
            # a LOCK of it in this process meanwhile is refused (423), not granted over the write.
            with provider.lock_manager.write_transaction(url=quote(path), token_list=[],
                                                         principal=environ[PRINCIPAL_KEY].name):
                if not provider.locked_at_or_above(path):
                    node, existed = tree.put(path, body)
                    etag = util.checked_etag(node.etag.strip('"'), allow_none=True)
                    extra = [("ETag", f'"{etag}"')] if etag is not None else None
                    return util.send_status_response(environ, start_response, HTTP_NO_CONTENT if existed
                                                     else HTTP_CREATED, add_headers=extra)
        except Unavailable:
            raise  # the write may have committed as the connection died: 503, never a second write
        except (StoreError, DAVError):
            pass  # nothing was written (a refusal, or a lock): WsgiDAV answers, with its sentence
    environ["wsgi.input"] = io.BytesIO(body)  # the same body, for WsgiDAV to read again
    return None


def _read_body(environ: dict[str, Any], length: int) -> bytes:
    """Up to ``length`` bytes of the body; fewer when the client stopped sending (cheroot ends
    the body early without an error, and the door's timeouts bound each read)."""
    stream = environ["wsgi.input"]
    parts: list[bytes] = []
    left = length
    while left > 0:
        piece = stream.read(min(left, _CHUNK))
        if not piece:
            break
        parts.append(piece)
        left -= len(piece)
    return b"".join(parts)

"""How much of a request the gateway will read, and the one WSGI-level guard that holds it.

Every body is bounded by what its route can accept: a WebDAV PUT by the store's note cap (256 KB),
a WebDAV XML body (PROPFIND, PROPPATCH, LOCK) by ``XML_BODY``, any other WebDAV body by
``OTHER_BODY``, and an API or web-app body by ``API_BODY``. A declared Content-Length over the cap is refused (413 with a
sentence) before a byte of the body is read; a chunked body is decoded here, at most cap + 1 bytes,
so no application ever meets chunk framing (a size that is not hexadecimal is a 400, not an
exception inside WsgiDAV). The parking front (gateway/door.py) uses the same caps to decide how much
of a body it buffers before a worker sees the request.

Headers a view stores or parses as numbers are bounded too: ``X-Tool-Call-Id`` goes into
file_changes, ``X-Run-Id`` is an id; a Range header with a number no file could reach is a 416, and
a LOCK Timeout of more than 10 digits of seconds a 400 (WsgiDAV would fail on it with a 500).
"""
from __future__ import annotations

import io
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote
from xml.parsers import expat

from cheroot.errors import MaxSizeExceeded

from store.properties import MAX_PER_PATH
from store.storage import MAX_CONTENT_BYTES as MAX_WRITE, too_large

HEADER_BYTES = 64 * 1024      # request line and headers together (cheroot's max_request_header_size)
XML_BODY = 1024 * 1024        # a PROPPATCH of every property a file may hold (64 x 4 KB) fits many times
XML_DEPTH = 64                # elements nested in a WebDAV XML body (clients send fewer than 10)
PROPPATCH_NAMES = 2 * MAX_PER_PATH   # properties one PROPPATCH sets and removes: each a file may hold, twice
PROPFIND_NAMES = 128          # properties one PROPFIND names (Finder names about 10; allprop names none)
API_BODY = 2 * 1024 * 1024    # a 256 KB note as JSON with every character escaped (\u0001 is 6 bytes)
OTHER_BODY = 64 * 1024        # WebDAV GET, DELETE, MOVE ... carry no body a route reads
MAX_BODY = max(MAX_WRITE, XML_BODY, API_BODY, OTHER_BODY)

# Header (WSGI environ key) -> (name, longest value accepted).
HEADER_CAPS: dict[str, tuple[str, int]] = {
    "HTTP_X_TOOL_CALL_ID": ("X-Tool-Call-Id", 200),   # a model's call id is ~40 characters
    "HTTP_X_RUN_ID": ("X-Run-Id", 32),                # an id: 19 digits at most
}
# A byte position no note reaches: Python refuses int() of over 4300 digits (a 500 inside WsgiDAV).
_RANGE_NUMBER = re.compile(r"[0-9]{16,}")
# A LOCK Timeout WsgiDAV would parse with int(): Second-4100000000 (what Windows asks) has 10 digits.
_TIMEOUT_NUMBER = re.compile(r"second-\s*[0-9]{11,}", re.IGNORECASE)
DAV_PREFIX = "/dav"
_XML_METHODS = frozenset({"PROPFIND", "PROPPATCH", "LOCK", "REPORT", "SEARCH"})


def body_cap(method: str, path: str) -> int:
    """The most bytes of body the route behind ``method path`` can accept (``path`` is the request
    target as sent: the prefix decides, and /dav/ and /api/ are plain ASCII; leading slashes count
    as one, as the door reads them)."""
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    if path == DAV_PREFIX or path.startswith(DAV_PREFIX + "/"):
        if method == "PUT":
            return MAX_WRITE
        return XML_BODY if method in _XML_METHODS else OTHER_BODY
    # The API, and everything else (the operator's web app posts its forms there): JSON or a form
    # holding at most a note or a record, escaped.
    return API_BODY


def _what(method: str, path: str) -> str:
    if path.startswith(DAV_PREFIX):
        if method == "PUT":
            return f"a file holds at most {MAX_WRITE:,} bytes (256 KB) of UTF-8"
        if method in _XML_METHODS:
            return f"a {method} body is at most {XML_BODY} bytes of XML"
        return f"a {method} request carries at most {OTHER_BODY} bytes of body"
    if path.startswith("/api"):
        return f"an API request body is at most {API_BODY} bytes"
    return (f"a form here takes at most {API_BODY:,} bytes (2 MB; a note holds at most {MAX_WRITE:,}): "
            "shorten what was typed and send it again")


# The door's refusals of a request head over HEADER_BYTES (gateway/door.py), in the format of the
# part of the tree asked (gateway/server.py Gateway.refusal).
URI_TOO_LONG = ("414 URI Too Long",
                f"the Request-URI (the path and its query) is over {HEADER_BYTES:,} bytes, the most the request "
                "line and headers may take together here; send a shorter path and query")
HEADERS_TOO_LARGE = ("431 Request Header Fields Too Large",
                     f"the request's headers are over {HEADER_BYTES:,} bytes, the most the request line and "
                     "headers may take together here; send fewer or shorter headers (in a browser, a Cookie "
                     "header grown that large goes once this site's cookies are cleared)")


@dataclass(frozen=True)
class Refusal:
    """An answer the guard gives instead of the application."""
    status: str
    sentence: str


def guard(environ: dict[str, Any], path: str) -> Refusal | None:
    """Check the request against every bound; on success a chunked body has been decoded into
    ``wsgi.input`` (with CONTENT_LENGTH set) so the application reads plain bytes. ``path`` is the
    full path (before a mount strips its prefix)."""
    method = environ.get("REQUEST_METHOD", "GET")
    for key, (name, longest) in HEADER_CAPS.items():
        value = environ.get(key)
        if value is not None and len(value) > longest:
            return Refusal("400 Bad Request", f"the {name} header is {len(value)} characters long; "
                                              f"send at most {longest}")
    ranges = environ.get("HTTP_RANGE")
    if ranges and _RANGE_NUMBER.search(ranges):
        return Refusal("416 Range Not Satisfiable",
                       f"the Range header names a byte position of 16 digits or more, beyond any file "
                       f"here (notes are at most {MAX_WRITE} bytes); ask for bytes=0- or a smaller range")
    timeout = environ.get("HTTP_TIMEOUT")
    if timeout and _TIMEOUT_NUMBER.search(timeout):
        return Refusal("400 Bad Request", "the Timeout header asks for a lock of 11 digits or more of seconds; "
                                          "send Second-<seconds> with at most 10 digits, or Infinite")
    cap = body_cap(method, path)
    chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
    length = environ.get("CONTENT_LENGTH", "")
    if chunked:
        refusal = _decode_chunked(environ, method, path, cap)
        return refusal or _xml_shape(environ, method, path)
    if length.isascii() and length.isdigit() and int(length) > cap:
        if method == "PUT" and path.startswith(DAV_PREFIX):  # a file: the store's own sentence for it
            name = unquote(path.rstrip("/").rsplit("/", 1)[-1])
            return Refusal("413 Content Too Large", f"{too_large(name, int(length))}. Nothing was read or stored")
        return Refusal("413 Content Too Large", f"the body is {int(length)} bytes; {_what(method, path)}. "
                                                "Nothing was read or stored")
    return _xml_shape(environ, method, path)


def _xml_shape(environ: dict[str, Any], method: str, path: str) -> Refusal | None:
    """A WebDAV XML body nested deeper than ``XML_DEPTH``, or naming more properties than a file
    can hold or a client asks for: a 400 here. WsgiDAV serialises a PROPPATCH value recursively,
    so 50 000 nested elements were a RecursionError (a 500 in the property's status); and it
    handles each named property on its own (a PROPPATCH of 20 000 properties took the store's
    check, a query, 20 000 times: 32 such requests stopped the gateway for minutes). Counted with
    expat, which does not recurse; the body is at most ``XML_BODY`` bytes and the door has it in
    memory already."""
    if method not in _XML_METHODS or not (path == DAV_PREFIX or path.startswith(DAV_PREFIX + "/")):
        return None
    length = environ.get("CONTENT_LENGTH", "")
    if not (length.isascii() and length.isdigit() and int(length) > 0):
        return None
    body = environ["wsgi.input"].read(int(length))
    environ["wsgi.input"] = io.BytesIO(body)
    # Where a property is named: propertyupdate > set|remove > prop > NAME; propfind > prop > NAME.
    name_depth, most = {"PROPPATCH": (4, PROPPATCH_NAMES), "PROPFIND": (3, PROPFIND_NAMES)}.get(method, (0, 0))
    depth = names = 0

    def start(*_: Any) -> None:
        nonlocal depth, names
        depth += 1
        if depth > XML_DEPTH:
            raise _TooDeep
        if depth == name_depth:
            names += 1
            if names > most:
                raise _TooMany

    def end(*_: Any) -> None:
        nonlocal depth
        depth -= 1

    def doctype(*_: Any) -> None:
        raise _Doctype   # no entities are expanded here: WsgiDAV refuses a DTD itself

    parser = expat.ParserCreate()
    parser.StartElementHandler, parser.EndElementHandler = start, end
    parser.StartDoctypeDeclHandler = doctype
    try:
        parser.Parse(body, True)
    except _Doctype:
        return None
    except _TooDeep:
        return Refusal("400 Bad Request", f"the XML body is nested more than {XML_DEPTH} elements deep; "
                                          "WebDAV bodies need a handful of levels")
    except _TooMany:
        if method == "PROPPATCH":
            return Refusal("400 Bad Request", f"the PROPPATCH changes more than {PROPPATCH_NAMES} properties; a "
                                              f"file holds at most {MAX_PER_PATH}: send at most {PROPPATCH_NAMES} "
                                              "(set and remove together). Nothing was changed")
        return Refusal("400 Bad Request", f"the PROPFIND names more than {PROPFIND_NAMES} properties; name at "
                                          "most that many, or ask for allprop")
    except expat.ExpatError:
        return None   # malformed XML: WsgiDAV's own parser answers it (a 400 naming the error)
    return None


class _TooDeep(Exception):
    pass


class _Doctype(Exception):
    pass


class _TooMany(Exception):
    pass


def _decode_chunked(environ: dict[str, Any], method: str, path: str, cap: int) -> Refusal | None:
    """Read a chunked body (at most ``cap`` + 1 bytes) into memory, refusing one too large or with
    broken framing. cheroot's ChunkedRFile reads a whole chunk at once, so its own bound (``maxlen``,
    counted with the framing) is set first: a declared 1 GB chunk is refused before it is read."""
    stream = environ["wsgi.input"]
    if hasattr(stream, "maxlen"):
        stream.maxlen = cap + HEADER_BYTES
    over = False
    try:
        data = stream.read(cap + 1)
        over = len(data) > cap
    except ValueError:
        return Refusal("400 Bad Request", "the chunked body is malformed: each chunk starts with its size "
                                          "in hexadecimal and a CRLF; send valid chunked encoding or a Content-Length")
    except MaxSizeExceeded:
        over = True
    except OSError as exc:
        if "Too Large" not in str(exc):  # ChunkedRFile's own refusal is an IOError with this text
            raise
        over = True
    if over:
        return Refusal("413 Content Too Large", f"the chunked body is over {cap} bytes; {_what(method, path)}. "
                                                "Nothing was stored")
    refusal = _skip_trailers(stream)
    if refusal is not None:
        return refusal
    environ["wsgi.input"] = io.BytesIO(data)
    environ["CONTENT_LENGTH"] = str(len(data))
    environ.pop("HTTP_TRANSFER_ENCODING", None)
    return None


def _skip_trailers(stream: Any) -> Refusal | None:
    """Read and drop the trailer fields after the last chunk, up to the empty line that ends the
    body (RFC 9112 7.1.2: a recipient may discard them; none is used here). Left unread, the first
    trailer line (or that empty line) was read as the connection's next request line: a 400
    "Malformed Request-Line", and the next request was never answered. Bounded by the stream's
    ``maxlen``, as the chunks are; the door has the whole body, trailers included, in memory
    before a worker reads it (``_Parked._chunks_done``), so this never waits on the client."""
    trailer_lines = getattr(stream, "read_trailer_lines", None)
    if trailer_lines is None or not getattr(stream, "closed", False):
        return None   # not cheroot's ChunkedRFile, or a body not read to its last chunk
    try:
        for _ in trailer_lines():
            pass
    except ValueError:
        return Refusal("400 Bad Request", "the trailer fields after the last chunk are malformed: each is a "
                                          "'Name: value' line ending in CRLF, and an empty line (CRLF) ends "
                                          "them; send them so, or send none. Nothing was stored")
    except MaxSizeExceeded:
        return _trailers_too_large(stream)
    except OSError as exc:
        if "Too Large" not in str(exc):  # ChunkedRFile's own refusal is an IOError with this text
            raise
        return _trailers_too_large(stream)
    return None


def _trailers_too_large(stream: Any) -> Refusal:
    return Refusal("413 Content Too Large", f"the chunked body with its trailer fields is over "
                                            f"{stream.maxlen} bytes; send fewer or shorter trailer fields "
                                            "(none are needed here). Nothing was stored")

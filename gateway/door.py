"""The server's door: no worker thread waits for a client.

cheroot (11.x) hands every freshly accepted connection straight to a worker thread
(``ConnectionManager._run`` calls ``server.process_conn`` on accept), and the worker then blocks in
``readline()`` until the request line arrives or the socket timeout passes. Only connections that
already finished a request are parked in its selector. So 16 connections that send nothing (or send a
header a byte at a time, or a body slowly) hold all 16 workers and the gateway stops answering.

Here one selector thread, the *parking front*, owns every connection while it is not being answered:
fresh ones (after a non-blocking TLS handshake), keep-alive ones between requests, and those whose
request is still arriving. It reads with non-blocking ``recv`` and hands a connection to a worker
only when the whole request is in memory: the head, and a body up to its route's cap
(gateway/limits.py), or as soon as the request is known to be refused (a declared length over the
cap, framing cheroot will reject). A worker therefore never waits on a client's bytes. Deadlines:
the head within ``HEADER_TIMEOUT`` of when the front began waiting for it (an idle keep-alive
connection is closed then too), and a body may make no progress for at most ``BODY_TIMEOUT``.

One shortcut: a worker that has just answered looks, for at most ``NEXT_REQUEST_MS`` and 64 KB
held against ``buffer_budget``, for the same client's next request, and answers it too when it is
whole by then, there is no connection waiting for a worker and another worker is idle
(``DoorConnection._next_request``). Keep-alive clients send their next request within a fraction
of a millisecond, and the front's round (park, wake, read, queue, wake a worker) was about a fifth
of a small request's time. What arrived of a request that is not whole goes to the front as a
pipelined request would.

Answers go the same way in the other direction: a worker sends what the socket takes at once and
leaves the rest with the front (``_SpillWriter``), which sends it as the client reads and only then
reads or answers the connection's next request. What a client has not taken is kept in memory
(at most ``SPILL_BYTES`` an answer, ``spill_budget`` in all) and past that in an unlinked temporary
file (``_Pending``; at most ``SPILL_FILE_BYTES`` an answer, ``spill_disk_budget`` in all): a very
large answer to a client that never reads costs disk, not a worker (when the worker sent what was
past 16 MB itself, 36 clients each asking for a 25 MB export and reading nothing held all 32
workers of two processes, and the gateway answered no one). Such a client also costs its
connection, after ``BODY_TIMEOUT`` without progress. Only past the disk's bounds too, or when the
file cannot be written (a full disk), does the worker send the rest itself, and then a client that
takes nothing for ``SPILL_STALL`` seconds is closed rather than waited for 30 s.

A parked connection costs a socket and its buffered bytes, not a thread, so there is no
per-address cap (clients behind one NAT or proxy share an address); ``max_open`` bounds the total
so file descriptors cannot run out (at the bound, an idle or slow connection among those parked
longest gives way to a newcomer), and ``buffer_budget`` the bytes of unfinished requests held at
once: past it, requests silent for ``stall_seconds`` or arriving slower than ``MIN_BODY_RATE`` are
closed (408) to make room, and only when none is is the connection asking for more answered 503
and closed.

Under `serve --workers`, every worker's front listens on the one shared socket, and one that
holds more connections than another worker leaves a newcomer to it for a few milliseconds
(gateway/balance.py), so connections spread evenly over the processes.

Also here: a header reader refusing two different Content-Length headers, or one with
Transfer-Encoding (RFC 9112 6.3: request smuggling), and the WSGI environ key through which the
gateway asks cheroot to close the connection after a refusal whose body it did not read. A request
line or headers over ``HEADER_BYTES`` are refused here (414, 431), in the format of the part of
the tree the path names (the gateway's ``refusal``); a target starting with "//" is a path, not
an authority (``_OriginForm``).
"""
from __future__ import annotations

import contextlib
import errno
import logging
import math
import os
import resource
import select
import selectors
import socket
import ssl
import tempfile
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from cheroot import connections, server as cheroot_server, wsgi
from cheroot.errors import MaxSizeExceeded
from cheroot.makefile import StreamReader

from dav_provider.errors import METHODS as DAV_METHODS
from gateway.balance import YIELD_SECONDS, Balance
from gateway.limits import HEADERS_TOO_LARGE, HEADER_BYTES, MAX_BODY, URI_TOO_LONG, body_cap

log = logging.getLogger(__name__)

HEADER_TIMEOUT = 10.0    # seconds for the request line and headers to arrive
BODY_TIMEOUT = 30.0      # seconds a body (or a client taking our answer) may make no progress
CLOSE_CONNECTION = "hostfinder.close_connection"   # environ: a callable closing after this answer
CLIENT_GONE = "hostfinder.client_gone"   # environ: a callable, True once the client has hung up
# POLLRDHUP (Linux) also reports a client that only shut its sending side while still reading; a
# browser's EventSource never does, and such a stream just ends and reconnects. Where the platform
# has no POLLRDHUP, a hang-up often shows as POLLIN alone: the stream's heartbeat finds it instead.
_HUNG_UP = getattr(select, "POLLRDHUP", 0) | select.POLLHUP | select.POLLERR | select.POLLNVAL
_CHUNK_LINE = 1024       # longest chunk-size line (with extensions) worth waiting for
# Answer bytes one connection may leave with the front in memory when its client reads slowly (a
# 10 000-note PROPFIND fits); past this, or past the process's ``spill_budget`` of such bytes, the
# rest goes to a temporary file (in TMPDIR, else /tmp: memory again where that is a tmpfs), at
# most SPILL_FILE_BYTES an answer and ``spill_disk_budget`` in all. Past those (a larger export)
# the worker sends the rest itself.
SPILL_BYTES = 16 * 1024 * 1024
SPILL_FILE_BYTES = 256 * 1024 * 1024
# Answer files open at once: each is a descriptor beside its connection's, so open_files_allowed
# leaves room for them under the process's limit.
ANSWER_FILES = 128
_SEND_BLOCK = 256 * 1024   # bytes the front hands the kernel per writable event
# What the front reads of an answer's file per writable event over TLS (a plain socket takes it
# straight from the file, os.sendfile): more would mostly be read again, as a slow client's
# socket takes a few KB at a time.
_FILE_BLOCK = 64 * 1024
STOP_SEND_SECONDS = 5.0    # a stopping server still sends an answer under way, this long per stall
SPILL_STALL = 2.0          # past the spill bounds, a worker waits this long per stall of a client's reading
# How long a worker that has just answered waits for the same client's next request before it
# parks the connection with the front (DoorConnection.communicate). A client on a keep-alive
# connection (an editor, davfs2, rclone, a file manager listing and reading) sends its next request
# within a fraction of a millisecond of reading the answer; answering it in the same worker saves
# the front's round (register, wake, read, queue, wake a worker): ~50 µs of a request's ~250 µs.
NEXT_REQUEST_MS = 2
_LOOK_BYTES = 64 * 1024   # what that look reads at most: a note's save fits; larger bodies go to the front
_TRAILER_BYTES = 8 * 1024  # trailer fields after the last chunk (RFC 9112 7.1.2); none are used
# When the budget for unfinished requests is full, a request arriving slower than this (over a
# window of RATE_WINDOW seconds) gives way to one that is arriving: a phone on a poor link still
# sends tens of KB a second, a client holding memory with a byte a second does not.
MIN_BODY_RATE = 4096       # bytes a second
RATE_WINDOW = 1.0          # seconds
# At ``max_open`` connections, an idle or slow one parked at least this long is closed to let a
# new one in (ParkingManager._evict_oldest).
EVICT_AFTER = 1.0
EVICT_SCAN = 256           # how many of the connections parked longest that choice looks at
_HEX = frozenset(b"0123456789abcdefABCDEF")


def _answer(status: bytes, sentence: bytes, *, headers: bytes = b"") -> bytes:
    """A whole plain-text answer the front sends itself before closing the connection."""
    return (b"HTTP/1.1 %s\r\nContent-Type: text/plain; charset=utf-8\r\n%sConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (status, headers, len(sentence), sentence))


_BUSY_ANSWER = _answer(b"503 Service Unavailable", b"the server is holding too many unfinished requests in memory "
                       b"just now; send the request again in a few seconds\n", headers=b"Retry-After: 5\r\n")
_CHUNK_ANSWER = _answer(b"400 Bad Request", b"the chunked body is malformed: each chunk starts with its size in "
                        b"hexadecimal digits (no sign, no 0x) and a CRLF, then exactly that many bytes and a CRLF, "
                        b"and trailers end within 8 KB; send valid chunked encoding or a Content-Length\n")
_CODING_ANSWER = _answer(b"501 Not Implemented", b"the only Transfer-Encoding this server reads is chunked; "
                         b"send the body as it is (with a Content-Length) or chunked\n")
_LF_ANSWER = _answer(b"400 Bad Request", b"the request's lines end in a bare LF; HTTP lines end in CRLF\n")
_TIMEOUT_ANSWER = _answer(b"408 Request Timeout", b"the request did not arrive in time: headers within 10 s, "
                          b"a body never idle for 30 s\n")
# A request the client stopped sending (it shut its side of the connection) before it was whole.
_HEAD_CUT_ANSWER = _answer(b"400 Bad Request", b"the request ended before its head did: the request line and "
                           b"headers end with an empty line (CRLF CRLF); send the whole request\n")
_CHUNKS_CUT_ANSWER = _answer(b"400 Bad Request", b"the chunked body ended before its last chunk: a chunked body "
                             b"ends with a chunk of size 0 and an empty line (0 CRLF CRLF); send the whole body\n")
# Every method some path of this server answers (the web app and the API: Flask's routes; WebDAV:
# dav_provider.errors.METHODS, which its own 405s list). CONNECT names no path, only a host to
# tunnel to, so its 405 lists them all; OPTIONS on a path says which of them that path takes.
SERVED_METHODS = tuple(dict.fromkeys(("OPTIONS", "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", *DAV_METHODS)))
_CONNECT_ANSWER = _answer(
    b"405 Method Not Allowed",
    b"CONNECT asks a proxy for a tunnel, and this server is not a proxy: it answers requests for its own "
    b"paths (/dav/ for WebDAV, /api/ for the HTTP API, / for the web app) with %s; send the request to this "
    b"server's URL, and if a client uses this server as its proxy, remove that setting\n"
    % ", ".join(SERVED_METHODS).encode(),
    headers=b"Allow: %s\r\n" % ", ".join(SERVED_METHODS).encode())


def _cut_short(got: int, announced: int) -> bytes:
    return _answer(b"400 Bad Request", b"the request body ended after %d of the %d bytes its Content-Length "
                   b"announced; send the whole body, with a Content-Length that counts its bytes\n" % (got, announced))


class _Reader(StreamReader):
    """cheroot's socket reader, able to take back bytes the front already read (``unread``) and to
    give up what it buffered beyond the request it answered (``take_buffered``). Both touch the
    buffer of _pyio.BufferedReader, which cheroot's own ``has_data`` reads too."""

    def unread(self, data: bytes) -> None:
        with self._read_lock:
            self._read_buf = bytes(data) + self._read_buf[self._read_pos:]
            self._read_pos = 0

    def readline(self, size: int | None = -1) -> bytes:
        """The next line, straight from the buffer when it is there (the front hands a worker
        the whole request, so it always is): _pyio's readline goes through peek and read, a
        dozen Python calls per line, and cheroot reads the request line and each header this way
        (a tenth of a small request's time in the worker)."""
        with self._read_lock:
            buf, pos = self._read_buf, self._read_pos
            stop = len(buf) if size is None or size < 0 else min(len(buf), pos + size)
            end = buf.find(b"\n", pos, stop)
            if end >= 0:
                self._read_pos = end + 1
                self.bytes_read += end + 1 - pos
                return buf[pos:end + 1]
        return super().readline(size)

    def take_buffered(self) -> bytes:
        with self._read_lock:
            data = self._read_buf[self._read_pos:]
            self._read_buf, self._read_pos = b"", 0
        return bytes(data)

    def held(self) -> tuple[bytes, int]:
        """The buffer and where the next read starts in it, without copying: what a request line
        began with once it has been read (a refusal's format depends on its path)."""
        return self._read_buf, self._read_pos


class _OriginForm:
    """Stands in for the request's reader while cheroot reads the request line, making a target
    that starts with "//" start with one slash. "//databases" is a path with an empty first
    segment (RFC 9112 3.2.1 origin-form), which cheroot reads as an authority and refuses with
    "Absolute URI not allowed if server is not a proxy"; the paths here have no empty segment
    (gateway/server.py reads repeated slashes as one outside /dav/)."""

    def __init__(self, rfile: Any) -> None:
        self.rfile = rfile

    def readline(self, *args: Any) -> bytes:
        line = self.rfile.readline(*args)
        method, space, rest = line.partition(b" ")
        if rest.startswith(b"//"):
            return method + space + b"/" + rest.lstrip(b"/")
        return line


def _path_of(start: bytes) -> str:
    """The path of the request line that ``start`` begins (it may be cut short), for the format
    of a refusal: the prefix is what matters."""
    parts = start.lstrip(b"\r\n").split(b" ", 2)
    target = parts[1] if len(parts) > 1 else b"/"
    if not target.startswith(b"/"):
        target = urlsplit(target).path or b"/"   # (absolute-form: http://host/path)
    return "/" + target.split(b"?", 1)[0].decode("latin-1").lstrip("/")


class _StrictHeaders(dict):
    """A header dict refusing a second, different Content-Length (cheroot keeps the last one)."""

    def __setitem__(self, key: bytes, value: bytes) -> None:
        if key == b"Content-Length" and key in self and self[key] != value:
            raise ValueError("the request has two different Content-Length headers; send exactly one")
        super().__setitem__(key, value)


class StrictHeaderReader(cheroot_server.HeaderReader):
    """cheroot's header reader plus the RFC 9112 6.3 checks; a ValueError becomes cheroot's 400."""

    def __call__(self, rfile: Any, hdict: dict | None = None) -> dict:
        strict = super().__call__(rfile, _StrictHeaders())
        if b"Transfer-Encoding" in strict and b"Content-Length" in strict:
            raise ValueError("the request has both Transfer-Encoding and Content-Length; send one of them")
        if hdict is None:
            return dict(strict)
        hdict.update(strict)
        return hdict


class _Held:
    """Stands in for the connection's writer while cheroot formats the response head."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.parts.append(bytes(data))


class DoorRequest(cheroot_server.HTTPRequest):
    """cheroot's request, sending the response head together with the first piece of the body.
    cheroot sends them in two writes; with TCP_NODELAY that is two packets and two wake-ups of the
    client for every small answer (most GETs and every PUT), measured at about a third of a
    keep-alive request's time in the front (bench/door.py --hop)."""

    header_reader = StrictHeaderReader()
    _head = b""

    def read_request_line(self) -> bool:
        buf, at = self.conn.rfile.held()
        rfile, self.rfile = self.rfile, _OriginForm(self.rfile)
        try:
            return super().read_request_line()
        except MaxSizeExceeded:
            # (the front hands a worker a head over HEADER_BYTES whole, so ``buf`` holds its start)
            self._refuse_head(*URI_TOO_LONG, _path_of(buf[at:at + 1024]))
            return False
        finally:
            self.rfile = rfile

    def read_request_headers(self) -> bool:
        try:
            if not super().read_request_headers():
                return False
        except MaxSizeExceeded:
            self._refuse_head(*HEADERS_TOO_LARGE, _path_of(b"- " + bytes(getattr(self, "uri", None) or b"/")))
            return False
        if self.request_protocol in (b"HTTP/1.1", "HTTP/1.1") and b"Host" not in self.inheaders:
            # RFC 9112 3.2: a server MUST answer 400 to an HTTP/1.1 request without Host.
            self.simple_response("400 Bad Request", "an HTTP/1.1 request must carry a Host header")
            self.close_connection = True
            return False
        return True

    def _refuse_head(self, status: str, sentence: str, path: str) -> None:
        """Answer a request whose head is over its limit, in the format of the part of the tree
        its path names (the gateway's ``refusal``; plain text while the server is starting), and
        close: the rest of the head was not read. cheroot's own answer was a plain-text 413 or 414
        in its words, whatever was asked."""
        self.close_connection = True
        refusal = getattr(self.server.wsgi_app, "refusal", None)
        if refusal is not None:
            headers, body = refusal(path, status, sentence)
        else:
            body = (sentence + "\n").encode("utf-8")
            headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
        head = "".join(f"{name}: {value}\r\n" for name, value in [*headers, ("Connection", "close")])
        try:
            self.conn.wfile.write(f"{self.server.protocol} {status}\r\n{head}\r\n".encode("latin-1") + body)
        except socket.error as exc:
            if exc.args[0] not in cheroot_server.errors.socket_errors_to_ignore:
                raise

    def send_headers(self) -> None:
        wfile, held = self.conn.wfile, _Held()
        self.conn.wfile = held
        try:
            super().send_headers()
        finally:
            self.conn.wfile = wfile
        self._head = b"".join(held.parts)

    def _flush_head(self) -> None:
        head, self._head = self._head, b""
        if head:
            try:
                self.conn.wfile.write(head)
            except socket.error as exc:
                if exc.args[0] not in cheroot_server.errors.socket_errors_to_ignore:
                    raise

    def write(self, chunk: bytes) -> None:
        if not self._head:
            super().write(chunk)
            return
        head, self._head = self._head, b""
        if self.chunked_write and chunk:
            chunk = b"%x\r\n%s\r\n" % (len(chunk), chunk)
        self.conn.wfile.write(head + chunk)

    def respond(self) -> None:
        """cheroot's respond, with the held head sent before the end of a chunked body and in
        any case before the request is done (a response without a body: HEAD, 204, 304)."""
        mrbs = self.server.max_request_body_size
        if self.chunked_read:
            self.rfile = cheroot_server.ChunkedRFile(self.conn.rfile, mrbs)
        else:
            cl = int(self.inheaders.get(b"Content-Length", 0))
            if mrbs and mrbs < cl:
                if not self.sent_headers:
                    self.simple_response("413 Request Entity Too Large",
                                         "The entity sent with the request exceeds the maximum allowed bytes.")
                return
            self.rfile = cheroot_server.KnownLengthRFile(self.conn.rfile, cl)
        try:
            self.server.gateway(self).respond()
            self.ready and self.ensure_headers_sent()
        finally:
            self._flush_head()
        if self.chunked_write:
            self.conn.wfile.write(b"0\r\n\r\n")


_TLS_RECORD = 16 * 1024


def send_some(sock: Any, data: bytes | bytearray, limit: int | None = None) -> int:
    """Send from the start of ``data`` on a non-blocking socket until it would block (at most
    ``limit`` bytes); the count sent. Over TLS, in records of 16 KB: an SSL_write that meets a
    full socket may have taken part of its buffer without saying so, and must be retried with
    at least the same bytes, which the next call does (it starts at the same place, with a record
    the same size)."""
    tls = isinstance(sock, ssl.SSLSocket)
    end = len(data) if limit is None else min(len(data), limit)
    sent = 0
    with memoryview(data) as view:
        while sent < end:
            piece = view[sent:min(end, sent + _TLS_RECORD)] if tls else view[sent:end]
            try:
                n = sock.send(piece)
            except (BlockingIOError, InterruptedError, ssl.SSLWantWriteError, ssl.SSLWantReadError):
                break
            sent += n
            if not tls:
                break   # a plain socket took what it could in one call
    return sent


class _Pending:
    """An answer's bytes the client has not taken yet, in order: those memory may hold
    (``ParkingManager.may_spill``) in ``memory``, the rest in an unlinked temporary file made when
    first needed. A file rather than more memory or the worker's time: a table's export to each of
    a few dozen clients that read nothing is gigabytes, which either ran a process out of memory
    or, sent by the workers themselves, held every worker. The file is closed as soon as its last
    byte is sent or given up, so it holds a descriptor only while it holds something to send."""

    __slots__ = ("memory", "_file", "_start", "_end")

    def __init__(self) -> None:
        self.memory = bytearray()
        self._file: Any = None
        self._start = self._end = 0   # the file's bytes not sent yet: [_start, _end)

    def __len__(self) -> int:
        return len(self.memory) + self._end - self._start

    def __bool__(self) -> bool:
        return bool(self.memory) or self._end > self._start

    @property
    def on_disk(self) -> int:
        """Bytes in the file, sent or not: the disk holds them all until the file is closed."""
        return self._end

    def keep(self, data: bytes) -> None:
        assert not self._end   # (once bytes went to the file, every later one follows them there)
        self.memory += data

    def store(self, data: bytes) -> None:
        """Add ``data`` at the end of the file; an OSError (a full disk) leaves what was held as it
        was (bytes written past ``_end`` are never read)."""
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="hostfinder-answer-", buffering=0)
            fd, done = self._file.fileno(), 0
            with memoryview(data) as view:
                while done < len(view):
                    done += os.pwrite(fd, view[done:], self._end + done)
        except OSError:
            if not self._end:
                self._close()
            raise
        self._end += len(data)

    def block(self, size: int) -> bytes:
        """The next bytes to send, at most ``size``: from memory while it holds any, then from the file."""
        if self.memory:
            return bytes(self.memory[:size])
        return os.pread(self._file.fileno(), min(size, self._end - self._start), self._start) if self else b""

    def send_some(self, sock: Any, limit: int) -> int:
        """Send from the start without waiting, at most ``limit`` bytes; the count sent, for
        ``consume``. What the socket refused is offered again, the same bytes, next time (TLS
        needs that: see the module's ``send_some``)."""
        if self.memory:
            return send_some(sock, self.memory, limit)
        count = min(limit, self._end - self._start)
        if count <= 0:
            return 0
        if isinstance(sock, ssl.SSLSocket):
            return send_some(sock, self.block(min(count, _FILE_BLOCK)))
        try:
            return os.sendfile(sock.fileno(), self._file.fileno(), self._start, count)
        except (BlockingIOError, InterruptedError):
            return 0

    def consume(self, count: int) -> tuple[int, int, int]:
        """Forget the first ``count`` bytes, sent; what this frees (``ParkingManager.unspill``):
        bytes of memory, bytes of disk and files. The disk's are freed together, when the file's
        last byte is sent and it is closed."""
        memory = min(count, len(self.memory))
        del self.memory[:memory]
        self._start += count - memory
        if self._file is not None and self._start >= self._end:
            return (memory, *self._close())
        return memory, 0, 0

    def clear(self) -> tuple[int, int, int]:
        """Forget everything (the file too); what this frees, as ``consume`` says it."""
        memory = len(self.memory)
        self.memory = bytearray()
        return (memory, *self._close())

    def _close(self) -> tuple[int, int]:
        disk, files = self._end, int(self._file is not None)
        if self._file is not None:
            self._file.close()
        self._file, self._start, self._end = None, 0, 0
        return disk, files


class _SpillWriter:
    """The connection's writer. What the socket takes at once is sent; the rest is kept
    (``_Pending``), and the front sends it once the worker has finished the request
    (``ParkingManager.put`` or ``DoorConnection.close``). A client that reads its answers slowly,
    or never, then holds memory or disk (bounded) instead of a worker thread: with cheroot's
    writer each such client held a thread for 30 s per stall, and 40 clients that never read
    stopped the gateway."""

    def __init__(self, conn: DoorConnection) -> None:
        self.conn = conn
        self.pending = _Pending()
        self.bytes_written = 0

    def write(self, data: bytes) -> int:
        data = bytes(data)
        self.bytes_written += len(data)
        if data:
            rest = data if self.pending else data[self._send_now(data):]
            if rest:
                self._keep(rest)
        return len(data)

    def _keep(self, rest: bytes) -> None:
        manager = self.conn.manager
        if manager is None:
            self._send_blocking(rest, stall=STOP_SEND_SECONDS)   # (the server is stopping: no front to send it)
            return
        where = manager.may_spill(self.pending, len(rest))
        if where == "memory":
            self.pending.keep(rest)
            return
        if where == "disk":
            try:
                self.pending.store(rest)
                return
            except OSError as exc:
                # (the file this store was to make, if it was the first, is closed: its place too)
                manager.unspill(0, len(rest), 0 if self.pending.on_disk else 1)
                log.warning("could not keep an answer for a slow reader in a temporary file (%s); "
                            "the worker sends it itself", exc)
        # Past every bound on what is kept (or with no room on disk): this worker sends the rest
        # itself, but gives a client that takes nothing only SPILL_STALL seconds (not 30), so a few
        # dozen more such clients cannot hold every worker. A client that reads goes on.
        self._send_blocking(rest, stall=SPILL_STALL)

    def _send_now(self, data: bytes) -> int:
        """As much of ``data`` as the socket takes without waiting."""
        sock = self.conn.socket
        timeout = sock.gettimeout()
        sock.setblocking(False)
        try:
            return send_some(sock, data)
        finally:
            sock.settimeout(timeout)

    def _send_blocking(self, data: bytes, *, stall: float) -> None:
        """Past the spill bounds: everything kept, then ``data``, sent by this thread, waiting at
        most ``stall`` seconds each time the client takes nothing; a client that takes nothing for
        that long is closed. Not ``sendall``: on a plain socket its timeout bounds the whole
        answer, which would cut off a client reading steadily, only slower than that."""
        sock = self.conn.socket
        timeout = sock.gettimeout()
        sock.settimeout(stall)
        try:
            while self.pending:
                block = self.pending.block(_SEND_BLOCK)
                _send_waiting(sock, block)
                self._release(self.pending.consume(len(block)))
            _send_waiting(sock, data)
        except (TimeoutError, socket.timeout):
            self.abandon()
            log.info("closing a connection whose client took none of its answer for %s s (the answers "
                     "kept for slow readers are at their bounds, or the server is stopping)", stall)
            raise ConnectionAbortedError(errno.ECONNABORTED, "the client is not reading") from None
        except BaseException:
            self.abandon()   # (the connection is closing: nothing of this answer is for the front)
            raise
        finally:
            sock.settimeout(timeout)

    def _release(self, freed: tuple[int, int, int]) -> None:
        # (Through the server, not ``conn.manager``: the bytes were counted, stopping or not.)
        manager = getattr(self.conn.server, "_connections", None)
        if isinstance(manager, ParkingManager) and any(freed):
            manager.unspill(*freed)

    def abandon(self) -> None:
        """The connection is going without its client reading the rest: forget it."""
        self._release(self.pending.clear())

    def finish(self, timeout: float) -> None:
        """The server is stopping: send what is kept in memory, waiting at most ``timeout`` per
        stall, so an answer already under way is not cut off; then forget whatever the client did
        not take, and the file part. (cheroot stops its connections one after another: sending
        each one's file too, up to 256 MB to a reader that is merely slow, could hold a stop
        for most of an hour, past any service manager's patience.)"""
        if self.pending.memory:
            try:
                self.conn.socket.settimeout(timeout)
                while self.pending.memory:
                    block = self.pending.block(_SEND_BLOCK)
                    self.conn.socket.sendall(block)
                    self._release(self.pending.consume(len(block)))
            except (OSError, ssl.SSLError, ValueError):
                pass
        self.abandon()

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def _send_waiting(sock: Any, data: bytes) -> None:
    """All of ``data`` on a socket with a timeout, which bounds each wait, not the whole."""
    with memoryview(data) as view:
        sent = 0
        while sent < len(view):
            sent += sock.send(view[sent:sent + _SEND_BLOCK])   # (each call waits at most the timeout)


class DoorConnection(cheroot_server.HTTPConnection):
    RequestHandlerClass = DoorRequest
    parked: _Parked | None = None
    _door_closed = False
    counted = False   # in this worker's connection count (gateway/balance.py)

    def __init__(self, server: Any, sock: Any, makefile: Any = None) -> None:
        super().__init__(server, sock, makefile or cheroot_server.MakeFile)
        self.rfile = _Reader(sock, "rb", self.rbufsize)
        self.wfile = _SpillWriter(self)

    @property
    def manager(self) -> ParkingManager | None:
        manager = getattr(self.server, "_connections", None)
        return manager if isinstance(manager, ParkingManager) and not manager._stop_requested else None

    def communicate(self) -> bool:
        """cheroot's communicate, going on with the client's next request when it is already here
        whole (``_next_request``); True when the connection stays open (the front parks it)."""
        while True:
            keep = super().communicate()
            if not keep or not self._next_request():
                return keep

    def _next_request(self) -> bool:
        """Whether this worker may answer the connection's next request at once: it is already
        wholly here (pipelined, or arriving within ``NEXT_REQUEST_MS``: a client may send the
        head and the body in two writes), needs nothing from the front (no refusal of its own, no
        100 Continue) and no other connection is waiting for a worker, nor would be (another
        worker is idle). What arrived of a request that is not whole by then goes back to the
        reader, and the front takes it from there (``ParkingManager.put``): a worker never waits
        on a client's bytes beyond this one short look."""
        manager, pool = self.manager, self.server.requests
        if manager is None or self.wfile.pending or pool.qsize or not pool.idle:
            return False
        # What the look may read is held against the front's budget for unfinished requests.
        room = manager.reserve(_LOOK_BYTES)
        if not room:
            return False
        try:
            return self._look(room)
        finally:
            manager.release(room)

    def _look(self, room: int) -> bool:
        # ``data`` is what came, as it came: the front is handed that when the request is not
        # answered here, since parsing may edit ``state.buf`` (a refused Expect is stripped).
        data = self.rfile.take_buffered()
        state = _Parked(data)   # parses what has come so far, once (ready() goes on from there)
        deadline = time.monotonic() + NEXT_REQUEST_MS / 1000
        poller: select.poll | None = None
        while True:
            if state.ready() or state.send_continue or len(data) >= room:
                break
            # Over TLS, bytes already decrypted wait in the SSL object, not on the socket.
            if not (isinstance(self.socket, ssl.SSLSocket) and self.socket.pending()):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                if poller is None:
                    poller = select.poll()
                    poller.register(self.socket.fileno(), select.POLLIN)
                if not poller.poll(math.ceil(left * 1000)):
                    break
            more = self._receive(room - len(data))
            if more is None:
                break   # the client closed, or the connection failed: the front sees to it
            data += more   # (nothing, when a TLS record is not whole yet: look again)
            state.buf += more
        if state.ready() and state.refusal is None and not state.send_continue:
            self.rfile.unread(bytes(state.buf))
            return True
        self.rfile.unread(data)
        return False

    def _receive(self, limit: int) -> bytes | None:
        """What the client has sent so far, at most ``limit`` bytes, without waiting; None
        when nothing came and the client closed or the connection failed (the front meets the
        same end and closes it)."""
        parts: list[bytes] = []
        size = 0
        timeout = self.socket.gettimeout()
        self.socket.setblocking(False)
        try:
            while size < limit:
                try:
                    data = self.socket.recv(limit - size)
                except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                    break   # (a TLS record not yet whole, or one the socket must first send)
                except (OSError, ssl.SSLError):
                    data = b""
                if not data:
                    return b"".join(parts) or None
                parts.append(data)
                size += len(data)
        finally:
            self.socket.settimeout(timeout)
        return b"".join(parts)

    def close(self) -> None:
        """cheroot closes a connection when its answer is written; one whose answer is still
        partly with us goes to the front, which sends the rest and then closes it."""
        manager = self.manager
        if self.wfile.pending and manager is not None:
            manager.drain(self, then_close=True)
            return
        if self._door_closed:
            return   # (closing twice would shut down a descriptor that may be a newcomer's by now)
        self._door_closed = True
        if self.counted:
            self.server.balance.closed()
        self.wfile.finish(timeout=STOP_SEND_SECONDS)   # nothing left, or the server is stopping
        super().close()


class DoorWSGIGateway(wsgi.Gateway_10):
    """WSGI 1.0 as cheroot does it, plus ``environ[CLOSE_CONNECTION]`` and
    ``environ[CLIENT_GONE]``."""

    def get_environ(self) -> dict[str, Any]:
        env = super().get_environ()
        env[CLOSE_CONNECTION] = self._close_after
        env[CLIENT_GONE] = self._client_gone
        return env

    def _close_after(self) -> None:
        self.req.close_connection = True

    def _client_gone(self) -> bool:
        """True once the client has closed the connection (or it failed), without reading or
        waiting. An answer that waits for something to send (the web app's live stream) asks
        this: otherwise it learns of a closed tab only when a write fails, and the first write
        after a close still succeeds."""
        try:
            poller = select.poll()
            poller.register(self.req.conn.socket.fileno(), select.POLLIN | _HUNG_UP)
            return any(events & _HUNG_UP for _, events in poller.poll(0))
        except (OSError, ValueError):   # (a socket already closed has no descriptor)
            return True


class _Parked:
    """What the front knows of a connection's next request while it arrives."""

    __slots__ = ("buf", "since", "progress", "handshaking", "head_end", "body_end", "chunked",
                 "chunk_pos", "decoded", "counted", "cap", "send_continue", "refusal", "draining", "close_after",
                 "window_start", "window_bytes", "last_rate")

    def __init__(self, data: bytes = b"", *, handshaking: bool = False) -> None:
        now = time.monotonic()
        self.buf = bytearray(data)
        self.since = self.progress = now
        # The arrival rate over the last whole window of RATE_WINDOW seconds (see slow()).
        self.window_start, self.window_bytes = now, len(data)
        self.last_rate: float | None = None
        self.handshaking = handshaking
        self.head_end: int | None = None
        self.body_end: int | None = None
        self.chunked = False
        self.chunk_pos = 0
        self.decoded = 0
        self.counted = 0
        self.cap = 0
        self.send_continue = False
        # An answer the front gives itself and then closes: framing no parser after it may read
        # differently (a chunk size of -6 or 0x5 means something else, or nothing, to each).
        self.refusal: bytes | None = None
        # The previous answer is still being sent (the client reads slowly): nothing more is
        # read or answered on this connection until it has gone, and then it closes if asked.
        self.draining = False
        self.close_after = False

    @property
    def begun(self) -> bool:
        """Whether a request has begun to arrive: blank lines alone are none (RFC 9112 2.2 lets
        them precede a request, and a client may leave the CRLF after a chunked body's end), so
        a connection holding only them is idle, closed quietly, never sent a 408 or 503."""
        return self.head_end is not None or bool(self.buf.lstrip(b"\r\n"))

    def arrived(self, now: float, size: int) -> None:
        """``size`` more bytes of the request came at ``now`` (already added to ``buf``)."""
        self.progress = now
        if len(self.buf) == size:
            # The request's first bytes: its rate is counted from now, not from when the
            # connection was parked (a keep-alive connection idle for a minute is not slow).
            self.window_start, self.window_bytes, self.last_rate = now, 0, None
        elif now - self.window_start >= RATE_WINDOW:
            self.last_rate = self.window_bytes / (now - self.window_start)
            self.window_start, self.window_bytes = now, 0
        self.window_bytes += size

    def slow(self, now: float) -> bool:
        """Whether the request is arriving slower than MIN_BODY_RATE: over the window under way
        once it is whole, else over the last whole one (a new request has not had a window yet).
        A client that sends most of a body at once and then a byte a second is slow from its
        second window on, where 'silent for so long' never says so."""
        elapsed = now - self.window_start
        if elapsed >= RATE_WINDOW:
            return self.window_bytes / elapsed < MIN_BODY_RATE
        return self.last_rate is not None and self.last_rate < MIN_BODY_RATE

    def expired(self, now: float, header_timeout: float, body_timeout: float) -> bool:
        if self.draining:
            return now - self.progress > body_timeout   # the client stopped reading our answer
        if self.head_end is None:
            return now - self.since > header_timeout
        return now - self.progress > body_timeout

    def ready(self) -> bool:
        """True when a worker can answer without waiting for the client: the request is complete,
        or is already known to be refused (cheroot or the guard answer without reading on)."""
        if self.head_end is None and not self._parse_head():
            return len(self.buf) > HEADER_BYTES + 2   # cheroot answers 413/414 from what is here
        if self.chunked:
            return self._chunks_done()
        return self.body_end is None or len(self.buf) >= self.body_end

    def _parse_head(self) -> bool:
        end = self.buf.find(b"\r\n\r\n")
        if end < 0:
            if self.buf.find(b"\n\n") >= 0 and self.buf.find(b"\r\n") < 0:
                self.head_end = len(self.buf)
                return self._refuse(_LF_ANSWER)   # rather than a 408 ten seconds later
            return False
        self.head_end = end + 4
        lines = bytes(self.buf[:end]).lstrip(b"\r\n").split(b"\r\n")
        parts = lines[0].split(b" ")
        method = parts[0].decode("latin-1")
        target = (parts[1] if len(parts) > 1 else b"/").split(b"?", 1)[0].decode("latin-1")
        lengths, transfer, expect = set(), b"", False
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip()
            if name == b"content-length":
                lengths.add(value)
            elif name == b"transfer-encoding":
                transfer += value.lower()
            elif name == b"expect" and value.lower() == b"100-continue":
                expect = True
        self.cap = body_cap(method, target)
        if method == "CONNECT":
            # (cheroot's own answer is a 405 with no Allow and no body)
            return self._refuse(_CONNECT_ANSWER)
        if transfer and transfer != b"chunked" and not lengths:
            return self._refuse(_CODING_ANSWER)
        if transfer:
            # Chunked with a Content-Length too is cheroot's 400 (StrictHeaderReader), at once.
            self.chunked = transfer == b"chunked" and not lengths
            self.chunk_pos = self.head_end
            if expect and self.chunked:
                self._continue()
            return True
        if len(lengths) != 1:
            return True                               # no body, or two lengths (cheroot's 400)
        text = lengths.pop()
        # (At most 18 digits before int(): past 4 300 it raises, and nothing sends more than a cap.)
        if not (text.isdigit() and len(text) <= 18 and int(text) <= self.cap):
            if expect:
                self._strip_expect()   # refused unread: no "100 Continue" invites the body first
            return True                               # over the cap or not a number: refused unread
        self.body_end = self.head_end + int(text)
        if expect and len(self.buf) < self.body_end:
            self._continue()
        return True

    def _continue(self) -> None:
        """The front sends the 100 itself (caller), so the client sends its body now; cheroot
        must not send a second one later."""
        self._strip_expect()
        self.send_continue = True

    def _strip_expect(self) -> None:
        """Drop Expect: 100-continue from the head (cheroot answers it with a 100 of its own)."""
        assert self.head_end is not None
        head = bytes(self.buf[:self.head_end])
        kept = [ln for ln in head.split(b"\r\n") if not ln.lower().startswith(b"expect:")]
        new_head = b"\r\n".join(kept)
        delta = len(head) - len(new_head)
        self.buf[:self.head_end] = new_head
        self.head_end -= delta
        if self.body_end is not None:
            self.body_end -= delta
        self.chunk_pos = self.head_end

    def _refuse(self, answer: bytes) -> bool:
        self.refusal = answer
        return True

    def cut_short(self) -> bytes | None:
        """The 400 for a request whose client shut its sending side before the request was whole
        (a body shorter than its Content-Length, a chunked body without its last chunk, a head
        without its empty line), or None when no request had begun: the client may still read,
        and a close without an answer would leave it guessing."""
        if not self.begun or self.refusal is not None:
            return None
        if self.head_end is None:
            return _HEAD_CUT_ANSWER
        if self.chunked:
            return _CHUNKS_CUT_ANSWER
        if self.body_end is not None and len(self.buf) < self.body_end:
            return _cut_short(len(self.buf) - self.head_end, self.body_end - self.head_end)
        return None

    def _chunks_done(self) -> bool:
        while True:
            eol = self.buf.find(b"\r\n", self.chunk_pos)
            if eol < 0:
                if len(self.buf) - self.chunk_pos > _CHUNK_LINE or self.buf.find(b"\n", self.chunk_pos) >= 0:
                    # (a size line ended by a bare LF: the CRLF waited for would never come, and the
                    # client got a 408 after BODY_TIMEOUT instead of this 400 at once)
                    return self._refuse(_CHUNK_ANSWER)
                return False
            size_text = bytes(self.buf[self.chunk_pos:eol]).split(b";", 1)[0].strip(b" \t")
            # Hex digits only (RFC 9112 7.1): int(x, 16) also takes "-6", "+5", "0x5" and "1_0",
            # and a negative size would send this loop back over the same bytes for ever.
            if not size_text or len(size_text) > 16 or not _HEX.issuperset(size_text):
                return self._refuse(_CHUNK_ANSWER)
            size = int(size_text, 16)
            if size == 0:
                # The last chunk: done at the empty line ending the (usually absent) trailers,
                # which may take at most _TRAILER_BYTES (so this scan is bounded too).
                rest = self.buf[eol:eol + _TRAILER_BYTES + 4]
                if rest.startswith(b"\r\n\r\n") or rest.find(b"\r\n\r\n") >= 0:
                    return True
                if len(self.buf) - eol > _TRAILER_BYTES + 4:
                    return self._refuse(_CHUNK_ANSWER)
                return False
            after = eol + 2 + size + 2
            line = eol + 2 - self.chunk_pos
            if self.counted + line + size > self.cap + HEADER_BYTES:
                # The framing itself (size lines with their extensions, and the data) passes the
                # guard's maxlen, which cheroot's ChunkedRFile refuses (413) from the size line:
                # a worker answers now. Counting decoded bytes only, a one-byte chunk behind a
                # 1 KB extension let one connection fill the front's whole buffer budget.
                return True
            if self.decoded + size > self.cap:
                # The guard's 413. cheroot reads this chunk whole before the guard can refuse
                # it (the framing is within maxlen, above): wait for its bytes, so no worker
                # waits on them.
                return len(self.buf) >= after
            if len(self.buf) < after:
                return False
            if self.buf[after - 2:after] != b"\r\n":
                # More data than the size said (or less, and other bytes): the 400 now, where
                # cheroot would wait out BODY_TIMEOUT for a size line that is not coming.
                return self._refuse(_CHUNK_ANSWER)
            self.decoded += size
            self.counted += line + size
            self.chunk_pos = after


class ParkingManager(connections.ConnectionManager):
    """cheroot's ConnectionManager with the parking front described above."""

    def __init__(self, server: Any, *, max_open: int) -> None:
        super().__init__(server)
        server.socket.setblocking(False)
        self.max_open = max_open
        # Bytes of unfinished requests held by the front, across all connections: each is bounded
        # by its cap, but 500 connections each stalling one byte short of a 2 MB body would hold
        # 1 GB. Past ``server.buffer_budget`` a connection asking for more memory is answered 503.
        self._buffered = 0
        self._spilled = 0    # answer bytes kept in memory for slow readers (_SpillWriter)
        self._spilled_to_disk = 0   # and in their temporary files (sent or not, until closed)
        self._answer_files = 0      # those files open now (each a descriptor: at most ANSWER_FILES)
        self._count_lock = threading.Lock()
        self._front: threading.Thread | None = None   # the thread running the selector loop
        # `serve --workers`: every worker's connection count, and when this one, having left a
        # newcomer to an emptier worker, listens again (gateway/balance.py).
        self.balance: Balance | None = server.balance
        self._listen_again: float | None = None

    def _account(self, delta: int) -> int:
        with self._count_lock:
            self._buffered += delta
            return self._buffered

    def reserve(self, most: int) -> int:
        """Room in the budget for unfinished requests, at most ``most`` bytes, held until
        ``release``: what a worker looking for a connection's next request may read (0: none)."""
        with self._count_lock:
            room = min(most, self.server.buffer_budget - self._buffered)
            if room <= 0:
                return 0
            self._buffered += room
            return room

    def release(self, room: int) -> None:
        self._account(-room)

    def may_spill(self, pending: _Pending, more: int) -> str | None:
        """Where a connection whose answer already leaves ``pending`` with the front may keep
        ``more`` bytes, counted from now: "memory" within ``SPILL_BYTES`` for the answer and the
        process's ``spill_budget`` (and while none went to its file: the bytes stay in order),
        else "disk" within ``SPILL_FILE_BYTES`` and the process's ``spill_disk_budget``; None past
        those too (the worker sends them itself)."""
        with self._count_lock:
            if (not pending.on_disk and len(pending.memory) + more <= SPILL_BYTES
                    and self._spilled + more <= self.server.spill_budget):
                self._spilled += more
                return "memory"
            if (pending.on_disk + more <= SPILL_FILE_BYTES
                    and self._spilled_to_disk + more <= self.server.spill_disk_budget
                    and (pending.on_disk or self._answer_files < ANSWER_FILES)):
                self._spilled_to_disk += more
                self._answer_files += 0 if pending.on_disk else 1
                return "disk"
            return None

    def unspill(self, memory: int, disk: int = 0, files: int = 0) -> None:
        with self._count_lock:
            self._spilled -= memory
            self._spilled_to_disk -= disk
            self._answer_files -= files

    # -- the selector loop ---------------------------------------------------------------------

    def _run(self, expiration_interval: float) -> None:
        self._front = threading.current_thread()
        last_check = time.monotonic()
        while not self._stop_requested:
            timeout, insist = expiration_interval, False
            if self._listen_again is not None:
                left = self._listen_again - time.monotonic()
                if left > 0:
                    timeout = min(timeout, left)
                else:
                    # A newcomer still waiting now was not taken by the emptier worker: ours.
                    self._selector.register(self.server.socket.fileno(), selectors.EVENT_READ, data=self.server)
                    self._listen_again, insist = None, True
            try:
                ready = list(self._selector.select(timeout=timeout))
            except OSError:
                self._remove_invalid_sockets()
                continue
            for fd, conn in ready:
                if conn is self.server:
                    if insist or not self._leave_newcomer():
                        self._accept()
                    continue
                if conn.parked is None:
                    # Closed earlier in this round (evicted to make room by _accept or
                    # _make_room): its descriptor may already be a newcomer's.
                    continue
                try:
                    self._readable(fd, conn)
                except Exception:  # one client's surprise must not stop the front for all
                    log.exception("closing a connection after an unexpected error in the front")
                    with contextlib.suppress(KeyError, ValueError):
                        self._selector.unregister(fd)
                    self._drop(conn)
            now = time.monotonic()
            if now - last_check > expiration_interval:
                self._expire_parked(now)
                last_check = now

    def _leave_newcomer(self) -> bool:
        """Whether to leave the waiting connection to a worker holding fewer connections: the
        listening socket is then out of this front's selector for ``YIELD_SECONDS``."""
        if self.balance is None or not self.balance.crowded():
            return False
        self._selector.unregister(self.server.socket.fileno())
        self._listen_again = time.monotonic() + YIELD_SECONDS
        return True

    def _accept(self) -> None:
        for _ in range(self.server.accept_batch):
            try:
                sock, addr = self.server.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                log.warning("accept failed: %s", exc)
                return
            if len(self._selector) > self.max_open and not self._evict_oldest():
                # Every descriptor we may use is taken, by connections parked less than
                # EVICT_AFTER: refuse the newcomer rather than fail later in someone's request.
                sock.close()
                continue
            connections.prevent_socket_inheritance(sock)
            sock.setblocking(False)
            if self.server.nodelay and not isinstance(self.server.bind_addr, (str, bytes)):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            adapter = self.server.ssl_adapter
            handshaking = False
            if adapter is not None:
                try:
                    sock = adapter.context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
                except (OSError, ssl.SSLError):
                    sock.close()
                    continue
                handshaking = True
            conn = self.server.ConnectionClass(self.server, sock)
            if self.balance is not None:
                self.balance.opened()
                conn.counted = True
            conn.ssl_env = {}
            if not isinstance(self.server.bind_addr, (str, bytes)) and addr:
                conn.remote_addr, conn.remote_port = addr[0], addr[1]
            conn.parked = _Parked(handshaking=handshaking)
            self._park(conn)

    def _evict_oldest(self) -> bool:
        """At ``max_open``: close a connection parked ``EVICT_AFTER`` at least, to make room for a
        new one: among those parked longest, an idle one, else one whose request stalls or
        arrives slowly or whose answer is not being taken. Without this, clients that each
        trickle a byte now and then could hold every descriptor and shut everyone else out for as
        long as they liked; now they push out one another and idle connections, and a newcomer
        gets in. The selector lists connections in the order they were parked, oldest first."""
        now = time.monotonic()
        idle: tuple[int, DoorConnection] | None = None
        slow: tuple[int, DoorConnection] | None = None
        listing = self._selector.connections
        try:
            # Among the EVICT_SCAN parked longest (further only while none qualifies): the first
            # idle one (between requests, nothing held), else the first whose request has stalled
            # or arrives slowly. One sending or receiving at speed is spared; with none to close,
            # the newcomer is refused.
            for seen, (fd, conn) in enumerate(listing):
                if seen >= EVICT_SCAN and slow is not None:
                    break   # (past the window only while none was found: all busy at speed there)
                state = conn.parked if conn is not self.server else None
                if state is None or now - state.since < EVICT_AFTER:
                    continue
                if not state.draining and not state.begun and not state.handshaking:
                    idle = (fd, conn)
                    break
                stalled = now - state.progress > self.server.stall_seconds   # (taking no answer, or sending nothing)
                if slow is None and (stalled or (not state.draining and state.slow(now))):
                    slow = (fd, conn)
        finally:
            listing.close()   # (it holds the selector's lock until closed)
        found = idle or slow
        if found is None:
            return False
        fd, conn = found
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(fd)
        if not conn.parked.draining and conn.parked.begun:
            _send_quietly(conn.socket, _BUSY_ANSWER)
        self._drop(conn)
        return True

    def _readable(self, fd: int, conn: DoorConnection) -> None:
        state = conn.parked
        assert state is not None
        if state.draining:
            self._writable(fd, conn, state)
            return
        if state.handshaking and not self._handshake(fd, conn, state):
            return
        outcome = self._pump(conn, state)
        if outcome == "closed":
            self._selector.unregister(fd)
            self._drop(conn)
        elif outcome == "ready":
            self._selector.unregister(fd)
            self._hand_off(conn)

    def _handshake(self, fd: int, conn: DoorConnection, state: _Parked) -> bool:
        try:
            conn.socket.do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            return False
        except (OSError, ssl.SSLError, ValueError):
            self._selector.unregister(fd)
            self._drop(conn)
            return False
        state.handshaking = False
        state.since = time.monotonic()
        conn.ssl_env = self.server.ssl_adapter.get_environ(conn.socket)
        return True

    def _pump(self, conn: DoorConnection, state: _Parked) -> str:
        """Read what the client has sent so far; 'ready', 'closed' or 'waiting'."""
        sock = conn.socket
        limit = HEADER_BYTES + MAX_BODY + 65536
        while True:
            try:
                data = sock.recv(65536)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except (OSError, ssl.SSLError):
                return "closed"
            if not data:
                # The client shut its sending side: a request it began will never be whole. It
                # may still read, so it is told why (nothing of the request reached a worker).
                if (answer := state.cut_short()) is not None:
                    _send_quietly(sock, answer)
                return "closed"
            state.buf += data
            state.arrived(time.monotonic(), len(data))
            if (self._account(len(data)) > self.server.buffer_budget and not state.ready()
                    and not self._make_room(conn)):
                _send_quietly(sock, _BUSY_ANSWER)
                return "closed"
            if state.refusal is not None:
                break
            if len(state.buf) > limit or not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
                break
        if state.ready():
            return self._refused(conn, state) or "ready"
        if state.send_continue:
            state.send_continue = False
            _send_quietly(sock, b"HTTP/1.1 100 Continue\r\n\r\n")
        return "waiting"

    def _make_room(self, arriving: DoorConnection) -> bool:
        """Over the budget: close the requests that have stalled longest (no byte for
        ``server.stall_seconds``) or that arrive slower than MIN_BODY_RATE, each with 408, until
        the budget holds again. A body that is arriving wins over one that is not: clients that
        send most of a body and then a byte now and then (even one a second) could otherwise hold
        the whole budget and turn every upload away."""
        if threading.current_thread() is not self._front:
            return False   # (a worker resuming a connection: only the front closes others)
        now = time.monotonic()
        stalled = sorted((c.parked.progress, fd, c) for fd, c in list(self._selector.connections)
                         if c is not self.server and c is not arriving and c.parked is not None
                         and not c.parked.draining and c.parked.begun
                         and (now - c.parked.progress > self.server.stall_seconds or c.parked.slow(now)))
        if self._buffered - sum(len(c.parked.buf) for _, _, c in stalled) > self.server.buffer_budget:
            return False   # closing them all would not be enough: close none
        for _, fd, conn in stalled:
            if self._buffered <= self.server.buffer_budget:
                break
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(fd)
            _send_quietly(conn.socket, _TIMEOUT_ANSWER)
            self._drop(conn)
        return self._buffered <= self.server.buffer_budget

    @staticmethod
    def _refused(conn: DoorConnection, state: _Parked) -> str | None:
        """'closed' after sending the front's own refusal, when the request earned one."""
        if state.refusal is None:
            return None
        _send_quietly(conn.socket, state.refusal)
        return "closed"

    def _hand_off(self, conn: DoorConnection) -> None:
        state, conn.parked = conn.parked, None
        assert state is not None
        self._account(-len(state.buf))
        conn.rfile.unread(bytes(state.buf))
        conn.socket.settimeout(self.server.timeout)
        conn.last_used = time.time()
        self.server.process_conn(conn)

    def _park(self, conn: DoorConnection) -> None:
        self._selector.register(conn.socket.fileno(), selectors.EVENT_READ, data=conn)

    def _expire_parked(self, now: float) -> None:
        for fd, conn in list(self._selector.connections):
            if conn is self.server or conn.parked is None or not conn.parked.expired(
                    now, self.server.header_timeout, self.server.body_timeout):
                continue
            self._selector.unregister(fd)
            if not conn.parked.draining and conn.parked.begun:
                _send_quietly(conn.socket, _TIMEOUT_ANSWER)
            self._drop(conn)

    def _drop(self, conn: DoorConnection) -> None:
        """Close a parked connection and forget the bytes it held."""
        if conn.parked is not None:
            self._account(-len(conn.parked.buf))
            conn.parked = None
        conn.wfile.abandon()
        conn.close()

    # -- answers the client has not read yet -----------------------------------------------------

    def drain(self, conn: DoorConnection, *, then_close: bool) -> None:
        """Take over sending the rest of ``conn``'s answer (called by the worker that wrote it)."""
        if conn.parked is None:
            conn.parked = _Parked()
        conn.parked.draining, conn.parked.close_after = True, then_close
        conn.parked.progress = time.monotonic()
        conn.socket.setblocking(False)
        self._selector.register(conn.socket.fileno(), selectors.EVENT_WRITE, data=conn)

    def _writable(self, fd: int, conn: DoorConnection, state: _Parked) -> None:
        pending = conn.wfile.pending
        try:
            sent = pending.send_some(conn.socket, _SEND_BLOCK)
        except (OSError, ssl.SSLError, ValueError):
            self._selector.unregister(fd)
            self._drop(conn)
            return
        if not sent:
            return
        self.unspill(*pending.consume(sent))
        state.progress = time.monotonic()
        if pending:
            return
        self._selector.unregister(fd)
        state.draining = False
        if state.close_after:
            self._drop(conn)
        else:
            state.since = state.progress   # the next request's deadline starts now
            self._resume(conn, state)

    # -- cheroot's interface -------------------------------------------------------------------

    def put(self, conn: DoorConnection) -> None:
        """A worker answered a request and the connection stays open: park it again. Bytes the
        worker's reader already holds (a pipelined request) come back to the front first, and
        are answered only once the client has taken this answer (no worker waits on it).
        cheroot calls this in its worker loop's ``finally``, where an exception stops the whole
        server (threadpool.py says so): a surprise here closes this connection only."""
        try:
            self._put(conn)
        except Exception:
            log.exception("closing a connection after an unexpected error between its requests")
            with contextlib.suppress(Exception):   # (it may be closed already)
                self._selector.unregister(conn.socket.fileno())
            with contextlib.suppress(Exception):
                self._drop(conn)

    def _put(self, conn: DoorConnection) -> None:
        conn.last_used = time.time()
        state = conn.parked = _Parked(conn.rfile.take_buffered())
        self._account(len(state.buf))
        conn.socket.setblocking(False)
        if conn.wfile.pending:
            self.drain(conn, then_close=False)
            return
        self._resume(conn, state)

    def _resume(self, conn: DoorConnection, state: _Parked) -> None:
        """Go on with a connection between requests: answer a pipelined request that is already
        whole, or wait for the next one."""
        if state.buf and state.ready():
            if self._refused(conn, state):
                self._drop(conn)
            else:
                self._hand_off(conn)
            return
        if state.send_continue:
            # A head asking for 100 Continue came with the previous request or just after its
            # answer (a worker read it): the client waits for the 100 before sending its body.
            state.send_continue = False
            _send_quietly(conn.socket, b"HTTP/1.1 100 Continue\r\n\r\n")
        if isinstance(conn.socket, ssl.SSLSocket) and conn.socket.pending():
            outcome = self._pump(conn, state)
            if outcome == "closed":
                self._drop(conn)
                return
            if outcome == "ready":
                self._hand_off(conn)
                return
        self._park(conn)

    @property
    def can_add_keepalive_connection(self) -> bool:
        return len(self._selector) <= self.max_open


def _send_quietly(sock: Any, data: bytes) -> None:
    try:
        sock.send(data)
    except (OSError, ssl.SSLError, ValueError):
        pass


def open_files_allowed() -> int:
    """Raise this process's soft limit on open files to the hard limit (as servers do; the default
    soft limit is often 1024) and say how many connections the front may keep: the rest is left for
    PostgreSQL connections, the FUSE device, logs."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = 65536 if hard == resource.RLIM_INFINITY else hard
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return max(64, min(soft - 256 - ANSWER_FILES, 16384))


class DoorServer(wsgi.Server):
    """cheroot's WSGI server with the parking front, the strict header reader, a bound on the
    request head and the close-after-refusal hook."""

    ConnectionClass = DoorConnection
    header_timeout = HEADER_TIMEOUT
    body_timeout = BODY_TIMEOUT
    buffer_budget = 256 * 1024 * 1024   # bytes of unfinished requests the front holds at most
    spill_budget = 256 * 1024 * 1024    # bytes of answers slow readers have not taken yet, in memory
    spill_disk_budget = 1024 ** 3       # and past that (or SPILL_BYTES), in temporary files
    stall_seconds = 2.0                 # a body silent this long gives way when the budget is full
    # Connections taken per wake-up of the front. 64 for a socket of its own; `serve --workers`
    # sets 1 (gateway/workers.adopt): every worker's front wakes for a new connection on the
    # shared socket, and one that took a burst of them whole left the others idle (16 clients
    # connecting at once all went to one process about one time in three).
    accept_batch = 64
    balance: Balance | None = None   # `serve --workers`: the workers' connection counts

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.gateway = DoorWSGIGateway
        self.max_request_header_size = HEADER_BYTES

    def error_log(self, msg: str = "", level: int = 20, traceback: bool = False) -> None:
        """cheroot writes its own errors to stderr; here they go through logging, escaped."""
        log.log(level, "%s", msg, exc_info=traceback)

    def prepare(self) -> None:
        super().prepare()
        plain = self._connections
        plain._selector.close()   # cheroot's own manager, replaced before it ever ran
        self._connections = ParkingManager(self, max_open=open_files_allowed())

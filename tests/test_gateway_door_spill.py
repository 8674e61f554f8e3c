"""Answers larger than the door keeps in memory for a client that reads slowly or never: the rest
waits in a temporary file and the front sends it, so no worker waits on such a client (a 25 MB
export to each of 36 clients that read nothing held every worker of two processes), the reader
gets every byte, and no file is left open."""
from __future__ import annotations

import contextlib
import errno
import os
import random
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import requests

from tests.conftest import RunningServer, free_port
from tests.test_gateway_door import AUTH, _complete, _read_answers, _self_signed, address
from gateway import door
from gateway.door import DoorServer
from gateway.server import Gateway, make_server

PAYLOAD = random.Random(15).randbytes(3 * 1024 * 1024)   # (not one repeated line: an offset slip shows)
# The servers' kernel send buffer per connection, fixed: on loopback it grows to 4 MB by itself,
# and a 3 MB answer to a client that reads nothing then fits in the kernel, past the door's bounds.
SEND_BUFFER = 32768


@pytest.fixture
def small_memory(monkeypatch) -> None:
    """An answer keeps at most 256 KB in memory (not 16 MB), so a few MB go to its file."""
    monkeypatch.setattr(door, "SPILL_BYTES", 256 * 1024)


def _large_app(environ, start_response):
    """/large: PAYLOAD in 64 KB pieces; anything else: "ok"."""
    if environ["PATH_INFO"] == "/large":
        start_response("200 OK", [("Content-Length", str(len(PAYLOAD)))])
        return (PAYLOAD[i:i + 65536] for i in range(0, len(PAYLOAD), 65536))
    start_response("200 OK", [("Content-Length", "2")])
    return [b"ok"]


@contextlib.contextmanager
def large_server(tmp_path=None, **door_settings: float) -> Iterator[tuple[int, DoorServer, str | None]]:
    """A 4-thread door over _large_app, over TLS when ``tmp_path`` is given: (port, server,
    certificate file or None)."""
    cert = _self_signed(tmp_path) if tmp_path is not None else None
    port = free_port()
    srv = make_server(_large_app, "127.0.0.1", port, threads=4, tls_cert=cert and cert[0], tls_key=cert and cert[1])
    srv.expiration_interval = 0.1
    for name, value in door_settings.items():
        setattr(srv, name, value)
    srv.prepare()
    srv.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)   # (accepted sockets inherit it)
    threading.Thread(target=srv.serve, daemon=True).start()
    try:
        yield port, srv, cert and cert[0]
    finally:
        srv.stop()


@contextlib.contextmanager
def gateway_server(db) -> Iterator[tuple[RunningServer, DoorServer]]:
    """The real gateway on a 4-thread door, and the door itself (to see its workers)."""
    gateway = Gateway(db)
    port = free_port()
    srv = make_server(gateway, "127.0.0.1", port, threads=4)
    srv.prepare()
    srv.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SEND_BUFFER)   # (accepted sockets inherit it)
    threading.Thread(target=srv.serve, daemon=True).start()
    try:
        yield RunningServer(f"http://127.0.0.1:{port}", db, gateway), srv
    finally:
        srv.stop()
        gateway.close()


def non_reader(port: int, request: bytes, *, cert: str | None = None) -> socket.socket:
    """A connection that sends ``request`` and takes (almost) nothing of the answer."""
    raw = socket.socket()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(("127.0.0.1", port))
    s = ssl.create_default_context(cafile=cert).wrap_socket(raw, server_hostname="localhost") if cert else raw
    s.sendall(request)
    return s


def answer_files() -> set[tuple[int, str]]:
    """This process's descriptors open on unlinked files in the temporary directory (where the
    door keeps answers; pytest's own capture files are there too, hence the comparisons)."""
    found = set()
    folder = tempfile.gettempdir().rstrip("/") + "/"
    for name in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{name}")
            if target.startswith(folder) and target.endswith(" (deleted)"):
                found.add((int(name), target))
    return found


def wait_for(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_clients_that_never_read_a_large_export_leave_the_workers_free(db, boot, small_memory) -> None:
    """Three times as many clients as workers each ask for a 4 MB export (past the 256 KB an
    answer may keep in memory here, as a 25 MB one is past the 16 MB in production) and read
    nothing. Each worker sent what was past the bound itself, waiting up to 30 s per client, and
    nobody else was answered. Now every export is answered (its start reaches its client), every
    worker is free again while those clients still hang, and other requests are answered at once."""
    from test_collections_support import col, create, seed
    with gateway_server(db) as (server, srv):
        operator = requests.Session()
        operator.auth = ("ada@example.com", "correct horse battery")
        made = create(operator, server.url, "big", [col("text")])
        seed(db, boot["org_id"], made["id"], [{"text": f"{i} " + "x" * 4000} for i in range(1000)])
        assert requests.get(f"{server.url}/api/openapi.json", timeout=30).status_code == 200   # (built once)
        export = (f"GET /api/collections/{made['id']}/export HTTP/1.1\r\nHost: x\r\n"
                  f"Authorization: {AUTH}\r\n\r\n").encode()
        port = address(server)[1]
        stalled: list[socket.socket] = []
        try:
            for _ in range(12):
                stalled.append(non_reader(port, export))
                time.sleep(0.05)

            def begun(s: socket.socket) -> bool:
                try:
                    return s.recv(16, socket.MSG_PEEK | socket.MSG_DONTWAIT).startswith(b"HTTP/1.1 200")
                except BlockingIOError:
                    return False
            # (Bounds for a loaded machine: the exports take a few seconds of work, not 30 s each.)
            wait_for(lambda: all(begun(s) for s in stalled), 20,
                     "some exports never began: the workers are waiting on clients that do not read")
            wait_for(lambda: srv.requests.idle == 4 and not srv.requests.qsize, 10,
                     "the workers are still busy with clients that do not read")
            for path in ("/api/health", "/api/openapi.json", "/api/health"):
                started = time.monotonic()
                assert requests.get(server.url + path, timeout=10).status_code == 200
                assert time.monotonic() - started < 2.0, path
            # A client that reads gets the export whole meanwhile.
            got = operator.get(f"{server.url}/api/collections/{made['id']}/export", timeout=30)
            assert got.status_code == 200 and got.text.count("\n") == 1000
        finally:
            for s in stalled:
                s.close()


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
def test_a_slow_reader_of_an_answer_past_the_memory_bound_gets_every_byte(tmp_path, small_memory, tls) -> None:
    """3 MB read 16 KB at a time with a pause between: the answer waits in a file (the worker does
    not send it) and arrives byte for byte; the file is closed once it is sent, while the
    connection stays open for the next request."""
    before = answer_files()
    with large_server(tmp_path if tls else None) as (port, srv, cert):
        s = non_reader(port, b"GET /large HTTP/1.1\r\nHost: x\r\n\r\n", cert=cert)
        s.settimeout(10)
        got, held_in_a_file = b"", None
        while b"\r\n\r\n" not in got or not _complete(got):
            chunk = s.recv(16384)
            assert chunk, f"the connection closed after {len(got)} bytes"
            got += chunk
            if held_in_a_file is None and len(got) > 512 * 1024:
                held_in_a_file = bool(answer_files() - before)
            time.sleep(0.005)
        head, _, body = got.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and len(body) == len(PAYLOAD)
        assert body == PAYLOAD
        assert held_in_a_file, "the answer past the memory bound was not kept in a temporary file"
        wait_for(lambda: not answer_files() - before, 5, "the answer's file is still open after it was sent")
        s.sendall(b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
        assert _read_answers(s, 1).endswith(b"\r\n\r\nok")
        s.close()


@pytest.mark.parametrize("how", ["hangs-up", "stops-reading"])
def test_no_answer_file_stays_open_once_its_client_is_gone(small_memory, how: str) -> None:
    """Clients that take a little of a 3 MB answer and then close, or stay connected and never
    read again (closed after the door's body timeout, 1 s here): their answers' files are all
    closed, and other requests are answered meanwhile."""
    before = answer_files()
    with large_server(body_timeout=1.0 if how == "stops-reading" else 30.0) as (port, srv, _):
        clients = [non_reader(port, b"GET /large HTTP/1.1\r\nHost: x\r\n\r\n") for _ in range(6)]
        try:
            wait_for(lambda: len(answer_files() - before) >= 6, 10, "the answers did not go to files")
            with socket.create_connection(("127.0.0.1", port), timeout=5) as probe:
                probe.sendall(b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
                assert _read_answers(probe, 1).endswith(b"\r\n\r\nok")
            if how == "hangs-up":
                for c in clients:
                    c.recv(4096)
                    c.close()
            wait_for(lambda: not answer_files() - before, 10, f"answer files left open: {answer_files() - before}")
            assert srv._connections._spilled == 0 and srv._connections._spilled_to_disk == 0
            assert srv._connections._answer_files == 0
        finally:
            for c in clients:
                c.close()


def test_past_the_files_bound_the_worker_sends_the_rest_in_order(monkeypatch, small_memory) -> None:
    """An answer past what its file may hold too (1 MB here): the worker sends what memory and the
    file kept, then the rest, and a client reading slowly gets every byte in order."""
    monkeypatch.setattr(door, "SPILL_FILE_BYTES", 1024 * 1024)
    with large_server() as (port, srv, _):
        s = non_reader(port, b"GET /large HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        s.settimeout(10)
        got = b""
        while chunk := s.recv(65536):
            got += chunk
            time.sleep(0.002)
        s.close()
        assert got.partition(b"\r\n\r\n")[2] == PAYLOAD
        assert srv._connections._spilled == 0 and srv._connections._spilled_to_disk == 0


def test_when_no_file_can_be_written_a_client_that_does_not_read_is_closed_not_waited_for(
        monkeypatch, small_memory) -> None:
    """A full disk (ENOSPC for every temporary file): the worker sends the rest itself, giving a
    client that takes nothing door.SPILL_STALL seconds, not 30; the others are still answered, and
    a client that reads gets its answer whole."""
    def no_room(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(door.tempfile, "TemporaryFile", no_room)
    with large_server() as (port, srv, _):
        clients = [non_reader(port, b"GET /large HTTP/1.1\r\nHost: x\r\n\r\n") for _ in range(8)]
        try:
            time.sleep(0.5)
            for _ in range(3):
                started = time.monotonic()
                with socket.create_connection(("127.0.0.1", port), timeout=10) as probe:
                    probe.sendall(b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
                    assert _read_answers(probe, 1).endswith(b"\r\n\r\nok")
                assert time.monotonic() - started < 2 * door.SPILL_STALL + 1
            with socket.create_connection(("127.0.0.1", port), timeout=10) as reader:
                reader.sendall(b"GET /large HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                got = b""
                while chunk := reader.recv(1 << 20):
                    got += chunk
            assert got.partition(b"\r\n\r\n")[2] == PAYLOAD
        finally:
            for c in clients:
                c.close()


def test_answer_files_open_at_once_are_bounded(monkeypatch, small_memory) -> None:
    """Each answer file is a descriptor beside its connection's: past door.ANSWER_FILES open at
    once, a further non-reader's answer is sent by its worker (closed after SPILL_STALL), so
    descriptors cannot run out for accept() and PostgreSQL while the disk budget still has room."""
    monkeypatch.setattr(door, "ANSWER_FILES", 2)
    before = answer_files()
    with large_server() as (port, srv, _):
        clients = [non_reader(port, b"GET /large HTTP/1.1\r\nHost: x\r\n\r\n") for _ in range(6)]
        try:
            wait_for(lambda: srv._connections._answer_files == 2, 10, "two answers were not kept in files")
            time.sleep(2 * door.SPILL_STALL + 0.5)   # the others' workers gave up on them meanwhile
            assert srv._connections._answer_files == 2 and len(answer_files() - before) == 2
            with socket.create_connection(("127.0.0.1", port), timeout=10) as probe:
                probe.sendall(b"GET /small HTTP/1.1\r\nHost: x\r\n\r\n")
                assert _read_answers(probe, 1).endswith(b"\r\n\r\nok")
        finally:
            for c in clients:
                c.close()
        wait_for(lambda: srv._connections._answer_files == 0, 40, "the answer files were not closed")
    assert answer_files() - before == set()

"""`hostfinder serve --workers N`: N processes answering on one port.

One Python process runs one thread of Python at a time, so one gateway uses one core however
many threads it has. The supervisor (this module, in the process the operator started) binds the
socket, starts the embedded PostgreSQL and migrates it once, creates the demo, and then forks N
workers. Each worker opens its own connection pool and runs the whole gateway (its own cheroot
server adopting the inherited listening socket, which all workers share); a worker holding more
client connections than another leaves newcomers to it (gateway/balance.py), so connections
spread evenly and every core has its share of the work.
Everything several gateways must agree on already lives in PostgreSQL (locks, dead properties,
scratch files, provenance, change events), exactly as for two gateways on two machines, so the
workers share nothing else. SIGTERM or Ctrl-C stops the workers, then PostgreSQL; a worker that
dies is replaced; a worker whose supervisor dies is stopped by the kernel (PR_SET_PDEATHSIG).
Linux and other fork-capable systems only; ``--workers 1`` runs the gateway in-process."""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

from gateway.balance import Balance
from gateway.config import Config
from gateway.runtime import StartupError, StoreRuntime
from gateway.stopping import StopSignal

log = logging.getLogger("hostfinder.workers")

MAX_CONNECTIONS = 90      # the embedded PostgreSQL allows 100; leave room for a mount and admin
# Connections each worker holds outside its pool: the login watch's LISTEN (store/login_watch.py)
# and the search indexer's (store/search_index.py).
OWN_CONNECTIONS = 2
MIN_POOL = 4
MAX_WORKERS = MAX_CONNECTIONS // (MIN_POOL + OWN_CONNECTIONS)
STOP_TIMEOUT = 20.0       # seconds a worker gets to finish its requests on SIGTERM
RESPAWN_INTERVAL = 1.0    # at most one replacement per second, so a crash loop does not spin


def default_workers() -> int:
    """The number of cores this process may run on, up to MAX_WORKERS."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(cores, MAX_WORKERS))


def pool_size(config: Config, workers: int) -> int:
    """Connections per worker: one per thread and a few spare, within what PostgreSQL allows
    once every worker's own connections are counted."""
    wanted = max(config.pool_size, config.threads + 4)
    return max(MIN_POOL, min(wanted, MAX_CONNECTIONS // workers - OWN_CONNECTIONS))


def listen(server: Any, backlog: int = 64) -> socket.socket:
    """The listening socket every worker inherits, made by the (unprepared) cheroot ``server``'s
    own bind(), so it has the options cheroot gives its sockets (TCP_NODELAY: without it a
    response's two writes wait 40 ms for a delayed ACK). OSError when the address is taken."""
    host, port = server.bind_addr
    family, kind, proto, _, _ = socket.getaddrinfo(host, port, socket.AF_UNSPEC, socket.SOCK_STREAM, 0,
                                                   socket.AI_PASSIVE)[0]
    sock = server.bind(family, kind, proto)
    try:
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


def adopt(server: Any, sock: socket.socket, balance: Balance | None = None) -> None:
    """Make a cheroot server (not yet prepared) serve on ``sock`` instead of binding its own:
    prepare() calls bind(), which here only takes the inherited socket. ``balance``: the workers'
    connection counts, by which its front leaves newcomers to emptier workers."""
    def bind(family: int, type: int, proto: int = 0) -> None:
        server.socket = sock
        server.bind_addr = sock.getsockname()[:2]
    server.bind = bind
    server.balance = balance
    # Every worker's front wakes for a new connection: one connection per wake-up, so that the
    # counts are current before the next is taken (one front took a whole burst before).
    server.accept_batch = 1


def serve_workers(config: Config, workers: int, *, announce: Callable[[Config, dict | None], None],
                  ensure_demo: Callable[[Any, Config], dict | None]) -> int:
    """Run the gateway in ``workers`` processes until SIGTERM or SIGINT; 0 on a clean stop."""
    from gateway.server import cannot_listen, cannot_start, make_server

    try:  # the TLS files load here, once, so a bad certificate is one sentence at start-up
        binder = make_server(_unused, config.host, config.port, tls_cert=config.tls_cert and str(config.tls_cert),
                             tls_key=config.tls_key and str(config.tls_key))
    except Exception as exc:
        raise StartupError(cannot_start(config.host, config.port, exc, tls=bool(config.tls_cert))) from None
    try:
        sock = listen(binder)
    except OSError as exc:
        raise StartupError(cannot_listen(config.host, config.port, exc)) from None
    balance = Balance(workers)
    children: dict[int, int] = {}  # pid -> worker number
    runtime = StoreRuntime(config, pool_size=2, share=False)
    try:
        db = runtime.open()
        login = ensure_demo(db, config) if config.demo else None
        db.close()  # no pool (and none of its threads) may cross the fork
        runtime.db = None
        size = pool_size(config, workers)

        stop = StopSignal()
        for number in range(1, workers + 1):
            children[_spawn(config, sock, balance, runtime.conninfo, size, number, workers)] = number
        announce(config, login)
        log.info("serving with %d worker processes (%s)", workers, ", ".join(map(str, children)))
        last_spawn = 0.0
        while not stop.wait(0.2):
            runtime.revive()
            for pid, number in list(children.items()):
                done, status = os.waitpid(pid, os.WNOHANG)
                if done:
                    del children[pid]
                    balance.stop_accepting(number - 1)   # no newcomer waits for it
                if done and not stop.is_set():
                    log.error("worker %d (pid %d) stopped unexpectedly (%s); starting another",
                              number, pid, _describe(status))
                    time.sleep(max(0.0, last_spawn + RESPAWN_INTERVAL - time.monotonic()))
                    last_spawn = time.monotonic()
                    children[_spawn(config, sock, balance, runtime.conninfo, size, number, workers)] = number
        log.info("stopping")
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        _stop_children(children)
        sock.close()
        runtime.close()
    return 0


def _unused(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
    return []


def _spawn(config: Config, sock: socket.socket, balance: Balance, conninfo: str, size: int, number: int,
           workers: int) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        code = _worker(config, sock, balance, conninfo, size, number, workers)
    except BaseException:  # a worker never returns into the supervisor's code
        log.exception("worker %d failed", number)
    finally:
        logging.shutdown()
        os._exit(code)


def _worker(config: Config, sock: socket.socket, balance: Balance, conninfo: str, size: int, number: int,
            workers: int) -> int:
    from gateway.server import Gateway, make_server
    from store.db import Database

    stop = StopSignal()
    _die_with_parent()
    for handler in logging.getLogger().handlers:  # which worker wrote a line, in every line
        handler.setFormatter(logging.Formatter(
            f"%(asctime)s %(levelname)s [worker {number}/{workers} pid %(process)d] %(name)s: %(message)s"))
    db = Database(conninfo, min_size=1, max_size=size).open()
    gateway = Gateway(db, read_cache=config.read_cache, processes=workers)
    server = make_server(gateway, config.host, config.port, threads=config.threads,
                         tls_cert=config.tls_cert and str(config.tls_cert),
                         tls_key=config.tls_key and str(config.tls_key))
    adopt(server, sock, balance)
    try:
        server.prepare()
        balance.serve_as(number - 1)
        serving = threading.Thread(target=server.serve, name="hostfinder-http", daemon=True)
        serving.start()
        while not stop.wait(0.5) and serving.is_alive():
            pass
        code = 0 if stop.is_set() else 1
    finally:
        balance.stop_accepting()
        gateway.stopping()
        server.stop()
        gateway.close()
        db.close()
    return code


def _die_with_parent() -> None:
    """Ask the kernel to SIGTERM this worker when the supervisor dies (Linux), so a killed
    supervisor leaves no worker holding the port."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the supervisor died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _stop_children(children: dict[int, int]) -> None:
    for pid in children:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    for pid in list(children):
        while time.monotonic() < deadline:
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                done = pid
            if done:
                children.pop(pid)
                break
            time.sleep(0.05)
    for pid in list(children):
        log.warning("worker pid %d did not stop within %.0f s; killing it", pid, STOP_TIMEOUT)
        _signal(pid, signal.SIGKILL)
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass
        children.pop(pid)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _describe(status: int) -> str:
    if os.WIFSIGNALED(status):
        return f"signal {os.WTERMSIG(status)}"
    return f"exit status {os.WEXITSTATUS(status)}"

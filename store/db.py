"""The connection pool and the one way to run a write: ``with db.transaction() as conn``.

Every store write runs inside one transaction together with its provenance row and its NOTIFY,
so a change and its record commit or vanish together. Integrity errors that PostgreSQL raises on
the store's own constraints become store errors here, by constraint name, so that no caller ever
sees a psycopg exception for something a client sent.
"""
from __future__ import annotations

import itertools
import logging
import os
import re
import select
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout

from store.errors import Conflict, Contention, Invalid, StoreError, Unavailable

log = logging.getLogger(__name__)

Conn = psycopg.Connection[dict]

# Callbacks to run once the current ``Database.transaction()`` has committed (never on rollback),
# or once a ``Database.single_write()`` block ends (its statements committed as they ran).
_after_commit: ContextVar[list[Callable[[], None]] | None] = ContextVar("hostfinder_after_commit", default=None)


def after_commit(fn: Callable[[], None]) -> None:
    """Run ``fn`` after the enclosing ``Database.transaction()`` commits (or the enclosing
    ``Database.single_write()`` ends); outside both, never. Used to tell this process's caches
    about a write the moment it is visible."""
    pending = _after_commit.get()
    if pending is not None:
        pending.append(fn)


# Constraint name -> a function making the store error a person should read. Modules that own a
# constraint register its sentence with ``on_constraint`` at import time.
_CONSTRAINT_ERRORS: dict[str, Callable[[pg_errors.Diagnostic], StoreError]] = {}


def on_constraint(name: str, make: Callable[[pg_errors.Diagnostic], StoreError]) -> None:
    """Say which store error a violation of constraint ``name`` means."""
    _CONSTRAINT_ERRORS[name] = make


def like_escape(text: str) -> str:
    """``text`` as a literal inside a LIKE/ILIKE pattern (default escape character \\): its
    backslashes, % and _ match only themselves. Callers add the wildcards they mean, e.g.
    ``like_escape(folder) + "/%"`` for everything below a folder."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


_WHITESPACE = re.compile(r"\s+")


def compact(statement: str) -> str:
    """``statement`` with every run of whitespace outside its string literals made one space.

    psycopg parses a statement's placeholders again on every execution unless the text is at most
    4 096 bytes long (psycopg._queries.MAX_CACHED_STATEMENT_LENGTH); up to that it keeps the
    parse. The Host tree's save statement is 4 219 bytes as written (indented for reading) and
    3 090 compacted: re-parsing it cost 64 µs of every WebDAV PUT and mount save. For
    statements built once (functools.cache), where the text is long. Only plain SQL with '...'
    literals is folded: a ``--`` comment would swallow the rest of the folded statement, and
    quoted identifiers, dollar quoting, escape strings and block comments would be told from the
    rest wrongly by counting quotes, so a statement holding any of them is refused."""
    for sign in ("--", "/*", '"', "$", "\\"):
        if sign in statement:
            raise ValueError(f"compact() folds plain SQL only; this statement holds {sign!r}")
    parts = statement.split("'")
    for i in range(0, len(parts), 2):   # even parts lie outside '...' literals ('' included)
        parts[i] = _WHITESPACE.sub(" ", parts[i])
    return "'".join(parts).strip()


def translate_integrity_error(exc: psycopg.errors.IntegrityError) -> StoreError:
    """Name the store error behind a violated constraint; an unregistered one is a generic conflict."""
    diag = exc.diag
    make = _CONSTRAINT_ERRORS.get(diag.constraint_name or "")
    if make is not None:
        return make(diag)
    log.warning("unregistered constraint violated: %s (%s)", diag.constraint_name, diag.message_primary)
    return Conflict(f"the change conflicts with the current state ({diag.message_primary})")


@contextmanager
def _store_errors() -> Iterator[None]:
    """A violated constraint as the store error it means, and a value PostgreSQL cannot hold as
    the client's Invalid (the translation every writing block shares)."""
    try:
        yield
    except psycopg.errors.IntegrityError as exc:
        raise translate_integrity_error(exc) from exc
    except (psycopg.DataError, UnicodeEncodeError) as exc:
        raise unstorable(exc) from exc
    except (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure) as exc:
        log.warning("a write was undone by PostgreSQL (%s): %s", type(exc).__name__,
                    (exc.diag.message_primary or "").strip())
        raise Contention("the change met another change to the same files at the same moment and was undone; "
                         "nothing was written: send it again") from exc


def unstorable(exc: BaseException) -> Invalid:
    """A value PostgreSQL cannot hold (a NUL in text, an unpaired surrogate, a number out of range,
    a timestamp past year 9999) as the client's mistake it is: one place for every such value, wherever
    it entered, instead of a check before each statement."""
    if isinstance(exc, UnicodeEncodeError):
        msg = ("a text value contains an unpaired surrogate (such as \\ud800), which is not valid "
               "Unicode; send the text as valid UTF-8")
    else:
        detail = exc.diag.message_primary if isinstance(exc, psycopg.Error) and exc.diag.message_primary else str(exc)
        if "\\u0000" in detail or "0x00" in detail:
            msg = "a text value contains a NUL character (\\u0000), which cannot be stored; remove it"
        else:
            msg = f"a value in the request cannot be stored ({detail.strip()}); send it within range and as valid text"
    return Invalid(msg, [msg])


# How long a request may wait on PostgreSQL. A lock another session holds (a migration, VACUUM
# FULL, a long change) is waited for LOCK_TIMEOUT, a statement runs at most STATEMENT_TIMEOUT (the
# heaviest the store runs, a uniqueness change over a full collection, takes about 2 s), and the
# client's own WAIT_TIMEOUT covers a server that can end nothing itself (stopped, its disk hung),
# closing the connection. Without them one stalled server held every worker thread of the gateway
# until it moved again, and requests that need no database (a stylesheet, the login page) waited
# behind them. Migrations connect on their own (store/migrations.py) and are not bounded.
LOCK_TIMEOUT = 5
STATEMENT_TIMEOUT = 20
WAIT_TIMEOUT = STATEMENT_TIMEOUT + 5
# WAIT_TIMEOUT alone left every request that met a silent server waiting 25 s, each holding a
# worker thread, so the gateway stopped answering anyone. A request that has held its connection
# STALL_CHECK_AFTER seconds makes the Database's watchdog ask the server, on a new connection, for
# any answer; none within STALL_PROBE_TIMEOUT and the server is taken as stalled: the waits on it
# are ended (503) and requests are answered 503 at once until a probe is answered again. A long
# statement on a server that answers is left to run. The question goes on a connection kept for it
# (made at the first question): a new connection costs the server a process and a login, the
# first thing to slow down on a loaded machine, where SELECT 1 on one already made does not.
STALL_CHECK_AFTER = 2.0
STALL_PROBE_TIMEOUT = 5.0


def _configure(conn: psycopg.Connection) -> None:
    conn.execute(f"SET TIME ZONE 'UTC'; SET lock_timeout = '{LOCK_TIMEOUT}s';"
                 f" SET statement_timeout = '{STATEMENT_TIMEOUT}s'")
    conn.commit()


class NoAnswer(psycopg.OperationalError):
    """The server did not answer within a connection's wait bound (the connection is closed)."""


class _BoundedConnection(psycopg.Connection):
    """A connection whose every wait for the server ends after WAIT_TIMEOUT (psycopg waits for
    ever by default). A wait cut short leaves the connection mid-statement: it is closed, and the
    caller sees a lost connection (Unavailable)."""

    def wait_bound(self) -> float:
        return WAIT_TIMEOUT

    def wait(self, gen: Any, *args: Any, **kwargs: Any) -> Any:
        bound = self.wait_bound()
        if len(args) < 2:   # (args: interval, timeout; a timeout a caller gives stays its own)
            kwargs.setdefault("timeout", bound)
        try:
            return super().wait(gen, *args, **kwargs)
        except pg_errors._WaitTimeout:
            self.pgconn.finish()
            raise NoAnswer(f"the database did not answer within {bound} s") from None


class _ProbeConnection(_BoundedConnection):
    """The watchdog's question to the server: any answer within STALL_PROBE_TIMEOUT."""

    def wait_bound(self) -> float:
        return STALL_PROBE_TIMEOUT


def _cut(conn: psycopg.Connection) -> None:
    """End another thread's wait on ``conn`` now. Shutting the socket down wakes that thread's
    poll with an end of file, which libpq reports as a lost connection; closing the descriptor
    under a thread polling it would not be safe."""
    try:
        sock = socket.socket(fileno=os.dup(conn.pgconn.socket))
    except (OSError, psycopg.Error):
        return
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    finally:
        sock.close()


# The sentence of the Unavailable the current unit of work (one request in a worker thread) met,
# or "": a front end whose framework turns any exception into a 500 on its own (WsgiDAV's auth and
# lock callbacks) reads it to answer 503 with that sentence instead.
_outage_met: ContextVar[str] = ContextVar("hostfinder_outage_met", default="")


def outage_met(reset: bool = False) -> str:
    """The sentence of the ``Unavailable`` raised in this context since the last reset, or "";
    ``reset`` clears it."""
    met = _outage_met.get()
    if reset:
        _outage_met.set("")
    return met


def _unavailable(cause: BaseException, message: str = "") -> Unavailable:
    exc = Unavailable(message or UNAVAILABLE_MESSAGE)
    _outage_met.set(exc.message)
    return exc


def _busy(exc: psycopg.OperationalError) -> Unavailable | None:
    """The 503 of a statement PostgreSQL ended at LOCK_TIMEOUT or STATEMENT_TIMEOUT (the server is
    up, so it is not marked down); None for any other error."""
    if isinstance(exc, pg_errors.LockNotAvailable):
        return _unavailable(exc, f"the store is busy: what this request needs has been held by another change for "
                                 f"more than {LOCK_TIMEOUT} seconds (maintenance such as a migration can do this); "
                                 "nothing was changed; try again in a few seconds")
    if isinstance(exc, pg_errors.QueryCanceled):
        return _unavailable(exc, f"the store is busy: this request's query ran for more than {STATEMENT_TIMEOUT} "
                                 "seconds and was stopped; nothing was changed; try again in a few seconds")
    return None


# SQLSTATEs saying the server went away: class 08 (connection exception), and the server shutting
# down or starting up (57P01-57P03). Others (a statement timeout, a deadlock) are not an outage.
_GONE = ("57P01", "57P02", "57P03")
UNAVAILABLE_MESSAGE = ("the store's database cannot be reached just now (PostgreSQL is down, restarting or "
                       "overloaded); try again in a few seconds")
STALLED_MESSAGE = ("the store's database has stopped answering (PostgreSQL is paused, or its disk or host "
                   "hangs); try again in a few seconds")
# A change whose statement reached a silent server may still be applied when the server resumes:
# the sentence cannot promise that nothing changed.
STALLED_WRITE_MESSAGE = ("the store's database stopped answering while this change was being saved (PostgreSQL "
                         "is paused, or its disk or host hangs); the change may still be applied when it resumes: "
                         "read it back in a few seconds before sending it again")


def lost_connection(exc: BaseException, conn: psycopg.Connection | None = None) -> bool:
    """True when ``exc`` means the database is gone, not that the statement was wrong."""
    if isinstance(exc, (PoolTimeout, PoolClosed)):
        return True
    if not isinstance(exc, psycopg.OperationalError):
        return False
    state = exc.sqlstate
    return (state is None or state.startswith("08") or state in _GONE
            or (conn is not None and (conn.closed or conn.broken)))


def _suspect(conn: psycopg.Connection) -> bool:
    """Whether an idle pooled connection may be dead, without a round trip: an idle connection's
    socket has nothing to read unless the server wrote first, and a server that stops or restarts
    writes its goodbye (or the kernel its EOF) on every connection. So a readable socket is worth
    the empty-query check (~0.1-0.3 ms here); a quiet one is used at once (a poll, microseconds)."""
    if conn.closed or conn.broken:
        return True
    try:
        readable, _, _ = select.select([conn.fileno()], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(readable)


class _MostRecentFirst(ConnectionPool):
    """A ConnectionPool that lends the connection returned last (LIFO) instead of the one idle
    longest (psycopg_pool's FIFO, which has no option for this).

    Why: once a burst of concurrent requests has grown a worker's pool (to ten connections in
    bench.dav), FIFO passes every later request to the next of those ten server processes in
    turn, each with its CPU caches and its share of the catalogue caches cold. Measured over HTTP
    (10 000 creates by PUT, one client, before and after 2 000 GETs from 16 connections): 1.40 ms
    a create before the burst and 1.61-1.63 ms after it with FIFO; this keeps a sequential client
    on one server process, as before the burst. The connections left unused sit at the pool's far end, where
    psycopg_pool's shrinking closes them first, one per ``max_idle`` (Database sets a minute, so
    spare connections do not sit idle for an hour, where a firewall could drop them unseen).

    The pool calls ``_get_ready_connection`` under its lock to take ``_pool[0]``; turning the
    deque by one first hands out the right end (the most recently returned). Should a psycopg_pool
    release rename that method, this falls back to FIFO, and tests/test_db.py fails."""

    def _get_ready_connection(self, *args: Any, **kwargs: Any) -> psycopg.Connection | None:
        idle = getattr(self, "_pool", None)
        turned = isinstance(idle, deque) and len(idle) > 1
        if turned:
            idle.rotate(1)
        try:
            return super()._get_ready_connection(*args, **kwargs)
        except BaseException:
            if turned:
                idle.rotate(-1)   # nothing was lent: the order stays as it was
            raise


TCP_LIVENESS = {"keepalives": 1, "keepalives_idle": 5, "keepalives_interval": 2, "keepalives_count": 3,
                "tcp_user_timeout": 10_000}


def liveness(conninfo: str) -> dict[str, Any]:
    """TCP_LIVENESS, and a connect timeout, for a connection to ``conninfo``, except what the URL
    sets itself. A server across a network that stops answering (a partition, a host frozen)
    would otherwise hold a request on its connection for the kernel's whole retransmission time,
    about 15 minutes, and leave a LISTEN connection waiting for events that no longer come (a
    follower believing itself up keeps what it cached). These give up on a silent TCP peer
    within about 10 seconds; libpq ignores them on a unix socket (the embedded server)."""
    given = conninfo_to_dict(conninfo)
    kwargs: dict[str, Any] = {k: v for k, v in TCP_LIVENESS.items() if k not in given}
    if "connect_timeout" not in given:
        kwargs["connect_timeout"] = 3
    return kwargs


class Database:
    """A psycopg pool with the store's conventions: dict rows, UTC, autocommit outside
    ``transaction()``, and ``Unavailable`` (a store error) instead of a driver exception or a
    30-second wait when PostgreSQL is gone.

    How an outage goes: each pooled connection is checked before it is lent (a poll of its
    socket, and when the server has written to it, one empty round trip); one that died with the server is handed back for the pool to replace, the server is
    marked down, and the request tries one direct connection at once. While the server is known to
    be down, a request waits only ``DOWN_WAIT`` for the pool, then tries a direct connection:
    refused at once during the outage (503 in well under a second), and the first request after
    the server is back succeeds on it without waiting for the pool's reconnection back-off, which
    ``reconnect_timeout`` keeps short so the pool itself recovers within seconds."""

    DOWN_WAIT = 0.3       # seconds a request waits for the pool while the server is known down
    DOWN_MEMORY = 5.0     # seconds a sign of an outage is remembered
    WATCH_INTERVAL = 0.5  # seconds between the watchdog's looks at the connections lent

    def __init__(self, conninfo: str, *, min_size: int = 1, max_size: int = 10,
                 name: str = "hostfinder", timeout: float = 2.0) -> None:
        self.conninfo = conninfo
        self.timeout = timeout
        self._down_until = 0.0
        self._kwargs: dict = {"row_factory": dict_row, "autocommit": True, **liveness(conninfo)}
        # The watchdog's view (see STALL_CHECK_AFTER): each lent connection and when it was lent,
        # whether the server is taken as stalled, and when it last answered a probe.
        self._lent: dict[int, tuple[psycopg.Connection, float]] = {}
        # Held by a borrow's end from removing its entry until its connection is back in the
        # pool's hands, and by the watchdog while it cuts: a connection is never cut once its
        # borrow has ended (it may be idle in the pool, or lent to a request that came later).
        self._lent_lock = threading.Lock()
        self._lend_ids = itertools.count()
        self.stalled = False
        self._probed_at = 0.0
        self._probe_conn: psycopg.Connection | None = None
        self._closing = threading.Event()
        self._watchdog: threading.Thread | None = None
        self.pool = _MostRecentFirst(
            conninfo, min_size=min_size, max_size=max_size, open=False, name=name,
            kwargs=self._kwargs, configure=self._configure, connection_class=_BoundedConnection,
            timeout=timeout, reconnect_timeout=2.0, reconnect_failed=lambda pool: self._mark_down(),
            max_idle=60.0,
        )

    # -- availability ------------------------------------------------------------------------------

    def _configure(self, conn: psycopg.Connection) -> None:
        _configure(conn)
        self._down_until = 0.0        # a new connection: the server is back

    def _mark_down(self) -> None:
        self._down_until = time.monotonic() + self.DOWN_MEMORY

    @property
    def known_down(self) -> bool:
        return time.monotonic() < self._down_until

    # -- a server that stops answering -------------------------------------------------------------

    def _watch(self) -> None:
        """The watchdog thread: see STALL_CHECK_AFTER."""
        while not self._closing.wait(self.WATCH_INTERVAL):
            try:
                self._look()
            except Exception:  # the watchdog must outlive anything it meets
                log.exception("the database watchdog failed; it goes on")

    def _look(self) -> None:
        now = time.monotonic()
        if self.stalled:
            if self._probe() != "silent":
                self.stalled = False
                log.warning("the database answers again")
            return
        oldest = min((since for _, since in list(self._lent.values())), default=now)
        # (At most one question every STALL_CHECK_AFTER, whatever the last answer was.)
        if now - oldest < STALL_CHECK_AFTER or now - self._probed_at < STALL_CHECK_AFTER:
            return
        asked = time.monotonic()
        if self._probe() != "silent":
            return
        self.stalled = True
        log.warning("the database has not answered within %s s: taken as stalled; requests are answered 503 "
                    "until it answers again", STALL_PROBE_TIMEOUT)
        with self._lent_lock:
            for conn, since in list(self._lent.values()):
                if since <= asked:
                    _cut(conn)

    def _probe(self) -> str:
        """"answers" (a query ran), "down" (refused, or failed at once: the ordinary outage paths
        handle that) or "silent" (no answer within STALL_PROBE_TIMEOUT: a connection attempt that
        timed out, or SELECT 1 on the kept connection unanswered)."""
        self._probed_at = time.monotonic()
        try:
            if self._probe_conn is None or self._probe_conn.closed or self._probe_conn.broken:
                self._probe_conn = None
                kwargs = {**self._kwargs, "connect_timeout": max(2, round(STALL_PROBE_TIMEOUT))}
                self._probe_conn = _ProbeConnection.connect(self.conninfo, **kwargs)
            self._probe_conn.execute("SELECT 1")
        except (psycopg.errors.ConnectionTimeout, NoAnswer):
            self._drop_probe()
            return "silent"
        except psycopg.Error:
            self._drop_probe()
            return "down"
        return "answers"

    def _drop_probe(self) -> None:
        conn, self._probe_conn = self._probe_conn, None
        if conn is not None:
            try:
                conn.close()
            except psycopg.Error:
                pass

    # -- lending -----------------------------------------------------------------------------------

    @contextmanager
    def _borrow(self) -> Iterator[Conn]:
        """A checked connection from the pool, or (the server having been down) a direct one;
        any sign that the server is gone comes out as ``Unavailable``."""
        conn, pooled = self._lend()
        lend_id = next(self._lend_ids)
        self._lent[lend_id] = (conn, time.monotonic())
        try:
            yield conn
        except (psycopg.OperationalError, PoolTimeout, PoolClosed) as exc:
            busy = _busy(exc) if isinstance(exc, psycopg.OperationalError) else None
            if busy is not None:
                log.warning("a statement was ended by PostgreSQL: %s", (exc.diag.message_primary or "").strip())
                raise busy from exc
            if not lost_connection(exc, conn):
                raise
            self._mark_down()
            if self.stalled:
                writing = _after_commit.get() is not None
                raise _unavailable(exc, STALLED_WRITE_MESSAGE if writing else STALLED_MESSAGE) from exc
            log.warning("the database connection was lost: %s", str(exc).strip().splitlines()[:1])
            raise _unavailable(exc) from exc
        finally:
            with self._lent_lock:
                del self._lent[lend_id]
            if pooled:
                self.pool.putconn(conn)   # rolls back what is left open; replaces a broken one
            else:
                conn.close()

    def _lend(self) -> tuple[Conn, bool]:
        """(connection, from the pool?). A pooled one that may have died is checked with one
        empty round trip; a dead one is handed back (the pool replaces it) and this request goes
        on with a direct connection at once, instead of the pool's own check loop with back-off.
        While the server is taken as stalled, none: 503 at once (the watchdog finds out when it
        answers again)."""
        if self.stalled:
            raise _unavailable(Unavailable(STALLED_MESSAGE), STALLED_MESSAGE)
        try:
            conn = self.pool.getconn(timeout=self.DOWN_WAIT if self.known_down else self.timeout)
        except (PoolTimeout, PoolClosed) as exc:
            return self._direct(exc), False
        try:
            if _suspect(conn):
                ConnectionPool.check_connection(conn)
        except psycopg.Error as exc:
            self._mark_down()
            self.pool.putconn(conn)
            return self._direct(exc), False
        return conn, True

    def _direct(self, cause: Exception) -> Conn:
        """One connection outside the pool, when the pool had none to lend or lent a dead one:
        the server may be back before the pool's next reconnection attempt. When it is not,
        ``Unavailable``."""
        full = self.pool.get_stats().get("pool_size", 0) >= self.pool.max_size
        if isinstance(cause, PoolClosed) or (not self.known_down and full):
            # The process is shutting down, or the pool is healthy and every connection is busy
            # (another connection would only add to the load).
            raise _unavailable(cause) from cause
        try:
            conn = _BoundedConnection.connect(self.conninfo, **self._kwargs)
            _configure(conn)
        except psycopg.Error as exc:
            self._mark_down()
            silent = isinstance(exc, psycopg.errors.ConnectionTimeout)   # no answer at all, not a refusal
            raise _unavailable(exc, STALLED_MESSAGE if silent else "") from exc
        self._down_until = 0.0
        return conn

    def open(self, *, timeout: float = 10.0) -> Database:
        """Open the pool and wait for its first connections, so a bad URL fails at start-up."""
        self.pool.open(wait=True, timeout=timeout)
        if self._watchdog is None or not self._watchdog.is_alive():
            self._closing.clear()
            self._watchdog = threading.Thread(target=self._watch, name="hostfinder-db-watchdog", daemon=True)
            self._watchdog.start()
        return self

    def close(self) -> None:
        self._closing.set()
        self.pool.close()
        if self._watchdog is not None and self._watchdog is not threading.current_thread():
            # (A question under way ends within a connection attempt and a SELECT 1, each bounded.)
            self._watchdog.join(timeout=2 * STALL_PROBE_TIMEOUT + 1)
        self._drop_probe()

    def __enter__(self) -> Database:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        """A pooled autocommit connection, for reads that need no transaction."""
        with self._borrow() as conn:
            try:
                yield conn
            except (psycopg.DataError, UnicodeEncodeError) as exc:
                raise unstorable(exc) from exc

    @contextmanager
    def single_write(self) -> Iterator[Conn]:
        """An autocommit connection for reads followed by ONE write statement, which is then its
        own transaction (a statement that carries its provenance row and event, as
        store.storage.save_artifact's does). BEGIN and COMMIT would be two of a save's four round
        trips. Errors come out as in transaction(). What the write announced (after_commit) runs
        when the block ends, error or not: in autocommit a statement that returned is committed.
        A block that must write twice as one opens ``conn.transaction()`` inside; if that rolls
        back, its announcements still run, which costs a subscriber a needless re-read, no more."""
        pending: list[Callable[[], None]] = []
        token = _after_commit.set(pending)
        try:
            with self._borrow() as conn, _store_errors():
                yield conn
        finally:
            _after_commit.reset(token)
            for fn in pending:
                fn()

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        """One transaction; commits on exit, rolls back on any error. Integrity errors on the
        store's constraints come out as store errors; a lost connection (even during COMMIT)
        comes out as ``Unavailable``, never as success."""
        pending: list[Callable[[], None]] = []
        token = _after_commit.set(pending)
        try:
            with self._borrow() as conn, _store_errors(), conn.transaction():  # COMMIT's errors too
                yield conn
        finally:
            _after_commit.reset(token)
        for fn in pending:
            fn()

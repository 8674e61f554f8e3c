"""Follows the 'hostfinder.logins.changed' channel, so that a process may remember verified
logins without a query per request and still end them at once when access changes anywhere.

sql/060_login_events.sql makes every change that can end a login (a password set, a user deleted,
a membership added or removed, a token revoked) NOTIFY this channel in its own transaction.
``LoginWatch.current()`` names what the process knows: a generation that grows by one at every
message and at every (re)connection (``leases()`` is the same for the WebDAV locks' channel). A login verified by a query while the generation was g may be reused as
long as the generation is still g (store.access.Door). Three rules keep that exact:

- The request itself looks for messages: ``current()`` polls the LISTEN socket without waiting
  and, when PostgreSQL sent something, reads it under the lock the follower thread reads with,
  so a request never depends on when the follower thread last ran.
- What is left is PostgreSQL's own delivery: the revoking commit signals every listening backend
  before its client hears "done", and each of them then writes the message to its socket as
  soon as it is scheduled: well under a millisecond on a quiet machine, a few on a loaded one.
  A request arriving at another process inside that window still gets the remembered login.
- While the connection is down, or has not answered its heartbeat for ``LAG`` seconds, there is
  no generation (None): every login runs its query again, exactly as without the watch.
- Reconnecting is a new generation: messages missed while down cannot leave a stale login.
"""
from __future__ import annotations

import logging
import select
import threading
import time
from collections.abc import Callable

import psycopg
from psycopg import sql

from store.db import liveness

log = logging.getLogger(__name__)

CHANNEL = "hostfinder.logins.changed"
# WebDAV locks (path_leases): a process may skip the lock query of a write while it knows there
# is no lock at all (dav_provider/locks.py), on the same terms.
LEASES = "hostfinder.leases.changed"
CHANNELS = (CHANNEL, LEASES)
HEARTBEAT = 1.0    # seconds between round trips proving the connection still answers
LAG = 3.0          # without a proof for this long, remembered logins are not used


class LoginWatch:
    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self._lock = threading.Lock()
        self._conn: psycopg.Connection | None = None
        # One generation per channel: each moves at a message on its channel and at every
        # (re)connection or loss of the connection.
        self._logins = 0
        self._leases = 0
        self._confirmed = 0.0       # monotonic time of the last answered heartbeat
        self._ping_sent: float | None = None   # a heartbeat is out, its answer not yet read
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> LoginWatch:
        self._thread = threading.Thread(target=self._follow, name="hostfinder-loginwatch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            self._close_locked()

    def wait_live(self, timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while self.current() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        return self.current() is not None

    def current(self) -> int | None:
        """The generation remembered logins must carry to be used, or None (verify by query)."""
        return self._current(lambda: self._logins)

    def leases(self) -> int | None:
        """The same for what a process knows of WebDAV locks (the LEASES channel)."""
        return self._current(lambda: self._leases)

    def _current(self, which: Callable[[], int]) -> int | None:
        conn = self._conn
        if conn is None or time.monotonic() - self._confirmed > LAG:
            return None
        # Only a socket with something on it needs the lock (and the follower's reading): every
        # request thread asks this, and under load they queued on the lock for nothing.
        try:
            pending = bool(select.select([conn.pgconn.socket], [], [], 0)[0])
        except (psycopg.Error, OSError, ValueError):  # closed meanwhile: the locked path decides
            pending = True
        # A lock held means the follower may have read a message off the socket and not yet
        # counted it: wait for it rather than answer from before the message.
        if pending or self._lock.locked():
            with self._lock:
                if self._conn is None:
                    return None
                self._drain_locked(wait=0.0)
        return None if self._conn is None else which()

    def _on_message(self, channel: str) -> None:
        """Under the lock: one message arrived on ``channel``."""
        if channel == LEASES:
            self._leases += 1
        else:
            self._logins += 1

    # -- the follower thread -------------------------------------------------------------------

    def _follow(self) -> None:
        failing = False   # (an outage is logged as it begins and as it ends, not at every retry)
        while not self._stop.is_set():
            try:
                conn = psycopg.connect(self.conninfo, autocommit=True, **liveness(self.conninfo))
                for channel in CHANNELS:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(channel)))
                if failing:
                    log.info("remembered logins on again: the login change channel is back")
                    failing = False
                # From here on only libpq's calls on this connection, always under the lock: the
                # request threads read from it too (current()), and nothing may block there.
                with self._lock:
                    self._conn = conn
                    self._logins += 1
                    self._leases += 1
                    self._confirmed = time.monotonic()
                    self._ping_sent = None
                while not self._stop.is_set():
                    select.select([conn.pgconn.socket], [], [], HEARTBEAT / 2)
                    with self._lock:
                        if self._conn is None:
                            break
                        self._drain_locked(wait=0.0)
                        if (self._conn is not None and self._ping_sent is None
                                and time.monotonic() - self._confirmed >= HEARTBEAT):
                            # The heartbeat is sent here and its answer read by _drain_locked,
                            # like a message: the connection is never busy for a request.
                            conn.pgconn.send_query(b"SELECT 1")
                            self._ping_sent = time.monotonic()
            except (psycopg.Error, OSError, ValueError) as exc:
                if not failing:
                    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    log.warning("remembered logins off: the login change channel is down (%s); retrying every "
                                "second", first)
                failing = True
            with self._lock:
                self._close_locked()
            self._stop.wait(1.0)

    def _drain_locked(self, *, wait: float) -> None:
        """Read whatever PostgreSQL has sent on the LISTEN connection without blocking: messages
        (each a change) and the heartbeat's answer."""
        conn = self._conn
        assert conn is not None
        pg = conn.pgconn
        try:
            readable, _, _ = select.select([pg.socket], [], [], wait)
            if not readable:
                return
            pg.consume_input()
            while (n := pg.notifies()) is not None:
                self._on_message(n.relname.decode())
            if self._ping_sent is not None:
                while not pg.is_busy():
                    if pg.get_result() is None:   # the heartbeat's answer is complete
                        self._confirmed = time.monotonic()
                        self._ping_sent = None
                        break
        except (psycopg.Error, OSError, ValueError):
            self._close_locked()

    def _close_locked(self) -> None:
        conn, self._conn = self._conn, None
        self._logins += 1
        self._leases += 1
        if conn is not None:
            try:
                conn.close()
            except Exception:  # closing a broken connection: nothing more to learn
                pass

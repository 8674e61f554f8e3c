"""Notes' search vectors, written after the save instead of inside it (sql/015).

Computing a note's vector is most of what its write costs PostgreSQL (about 0.2 ms of 0.35 ms for
a 2.5 KB note), and an editor saves often. So a write only raises the note's version, and this
indexer catches up: ``index_pending`` fills the vectors of notes whose ``note_search_version`` is
behind their ``version`` (``note_search_pending``), a batch per transaction, and
``SearchIndexer`` runs it in a thread of each gateway process, soon after that process's own note
writes and every few seconds for everyone else's (another gateway, the mount, the platform).
note_find stays exact meanwhile: it computes the vectors of the notes still waiting
(store/note_search.py), so the indexer decides how fast note_find is, never what it finds.
"""
from __future__ import annotations

import logging
import threading

import psycopg

from store.db import Conn
from store.events import Event, subscribe_local

log = logging.getLogger(__name__)

BATCH = 50          # notes per transaction: a save of one of them waits at most this batch's time
SETTLE = 0.3        # seconds after a local note write before indexing: a burst is one pass
POLL = 3.0          # seconds between looks for notes written by other processes

# The row locks keep a concurrent save and the indexer apart: a note being saved is skipped and
# taken in the next pass, and the vector is computed from the very row it is stored in, so it
# always belongs to the version recorded beside it.
_INDEX_SQL = """
    UPDATE artifacts a SET note_search = note_vector(a.key, a.content), note_search_version = a.version
     WHERE a.id IN (SELECT id FROM artifacts
                     WHERE deleted_at IS NULL AND note_search_pending
                     LIMIT %s FOR UPDATE SKIP LOCKED)"""


def index_pending(conn: Conn, *, batch: int = BATCH, stop: threading.Event | None = None) -> int:
    """Fill the search vectors of every note written since it was last indexed, ``batch`` per
    transaction on ``conn`` (an autocommit connection), until none is left or ``stop`` is set;
    the number filled."""
    done = 0
    while stop is None or not stop.is_set():
        with conn.transaction():
            n = conn.execute(_INDEX_SQL, (batch,)).rowcount
        done += n
        if n < batch:
            break
    return done


class SearchIndexer:
    """A daemon thread running ``index_pending`` on a connection of its own (as the login watch
    has), so it never takes a pooled connection from a request. Several gateways (or workers)
    may each run one: SKIP LOCKED gives each batch to one of them."""

    def __init__(self, conninfo: str, *, settle: float = SETTLE, poll: float = POLL) -> None:
        self.conninfo, self.settle, self.poll = conninfo, settle, poll
        self._conn: psycopg.Connection | None = None
        self._wake = threading.Event()
        self._wake.set()   # a first pass at start: notes left waiting while no gateway ran
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe = subscribe_local(self._on_event)

    def start(self) -> SearchIndexer:
        self._thread = threading.Thread(target=self._run, name="hostfinder-search-index", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._unsubscribe()
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _on_event(self, event: Event) -> None:
        if event.get("operation") in ("create", "update") and str(event.get("display_path", "")).endswith(".md"):
            self._wake.set()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if self._wake.wait(self.poll):
                    self._stop.wait(self.settle)
                self._wake.clear()
                if not self._stop.is_set():
                    self._pass()
        finally:
            if self._conn is not None:
                self._conn.close()

    def _pass(self) -> None:
        try:
            if self._conn is None or self._conn.closed:
                self._conn = psycopg.connect(self.conninfo, autocommit=True, connect_timeout=5)
            index_pending(self._conn, stop=self._stop)
        except psycopg.OperationalError as exc:
            # The database is away: note_find computes what waits, and a later pass catches up.
            log.warning("search index pass failed: %s", str(exc).strip().splitlines()[:1])
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        except Exception:
            log.exception("search index pass failed")

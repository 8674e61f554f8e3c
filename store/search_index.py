"""Notes' search vectors, written after the save instead of inside it (sql/015, sql/156).

Computing a note's vector is most of what its write costs PostgreSQL (about 0.2 ms of 0.35 ms for
a 2.5 KB note), and an editor saves often. So a write only raises the note's version, which puts
the note in note_index_queue (a trigger, sql/156), and this indexer catches up: ``index_pending``
computes the queued notes' vectors into note_vectors, a batch per transaction, and
``SearchIndexer`` runs it in a thread of each gateway process, soon after that process's own note
writes and every few seconds for everyone else's (another gateway, the mount, the platform).
note_find stays exact meanwhile: it computes the vectors of the notes still queued
(store/note_search.py), so the indexer decides how fast note_find is, never what it finds. The
vectors' tables are unlogged: derived data needs no WAL, and the saves' commits no longer flush
the indexer's.
"""
from __future__ import annotations

import logging
import os
import threading

import psycopg
from psycopg.rows import dict_row

from store.db import Conn, liveness
from store.events import Event, subscribe_local

log = logging.getLogger(__name__)

BATCH = 50              # notes per transaction of the indexer's,
BATCH_BYTES = 1 << 20   # and at most this much of their text (at least one note)
ANALYZE_AFTER = 2000    # a pass that filled this many refreshes the planner's statistics
SETTLE = 0.3            # seconds after a local note write before indexing: a burst is one pass
POLL = 3.0              # seconds between looks for notes written by other processes

# A batch: the first queued notes by id, at most ``batch`` of them and BATCH_BYTES of text (at
# least one), with their vectors, into a temporary table of this connection; it returns, for each
# note, how many queued notes it looked at (fewer than ``batch``: it reached the queue's end).
# Computed under no lock, so a save never waits for the indexer to compute, and kept in the
# server, so the vectors never pass through the gateway's Python (whose requests share its
# interpreter); _STORE_SQL then keeps each vector only where the note is still at the version it
# was computed from (a note saved meanwhile stays queued, for the next batch). A queued row that is no longer a live
# note (deleted since) comes with no vector: its old vector is dropped, and it leaves the queue.
# The queue's head is taken first and its notes read by id: with the whole queue joined to the
# notes before the LIMIT, PostgreSQL merged along the notes' primary key from the first id up to
# the head, so after a bulk load or a crash each batch cost more the further the indexer had got
# (73 000 buffers a batch at 100 000 notes in bench.scale --stats, 283 now; tests/test_speed.py).
_BATCH_TABLE = """CREATE TEMPORARY TABLE IF NOT EXISTS note_batch
                      (id bigint, version integer, vector tsvector, live boolean, size integer, looked_at integer)
                      ON COMMIT DELETE ROWS"""
_BATCH_SQL = """
    INSERT INTO note_batch (id, version, vector, live, size, looked_at)
    SELECT id, version, CASE WHEN live THEN note_vector(key, content) END, live, size, looked_at
      FROM (SELECT q.note_id AS id, a.version, a.key, a.content, a.deleted_at IS NULL AND a.kind = 'note' AS live,
                   octet_length(a.content) AS size, row_number() OVER w AS n,
                   sum(octet_length(a.content)) OVER w AS upto, count(*) OVER () AS looked_at
              FROM (SELECT note_id FROM note_index_queue ORDER BY note_id LIMIT %(batch)s) AS q
              JOIN artifacts a ON a.id = q.note_id
            WINDOW w AS (ORDER BY q.note_id)) AS first
     WHERE n = 1 OR upto <= %(bytes)s
    RETURNING looked_at"""
# The notes' rows are locked first (FOR SHARE, which a save's update waits for) with SKIP LOCKED:
# a row a write holds is left for a later batch. So the indexer never waits for a lock, and
# cannot close a deadlock with a transaction that writes two notes (a move over a note takes both
# rows, in whichever order): PostgreSQL would end one of the two, and it could be the person's
# save. Holding the row is also what keeps the queue whole (sql/156): a save of the note cannot
# commit between the vector's storing and the note's leaving the queue, and a save after them
# queues the note again (its trigger runs once the save has the row).
#
# Each step reaches the queue, the notes and the vectors by key, with the batch's ids as one array
# (= ANY (ARRAY(...)): one index descent each), never by a join the planner may turn around. The
# queue is empty most of the time and its statistics are taken then (autovacuum; this module's
# ANALYZE after a bulk pass): PostgreSQL then believes a queue of thousands holds a row, and the
# joins this statement had walked the whole queue for each batch (hashing it, or comparing it
# with every note of the batch: 416 000 buffers and 0.2 s a batch with 4 000 queued), so draining
# a long queue took time quadratic in its length; so did the vectors' table after a crash emptied
# it (tests/test_speed.py).
_STORE_SQL = """
    WITH held AS (SELECT a.id, a.version FROM artifacts a
                   WHERE a.id = ANY (ARRAY(SELECT id FROM note_batch)) ORDER BY a.id FOR SHARE SKIP LOCKED),
         ready AS (SELECT b.* FROM note_batch b JOIN held h ON h.id = b.id AND h.version = b.version),
         stored AS (INSERT INTO note_vectors AS v (note_id, version, vector)
                    SELECT id, version, vector FROM ready WHERE live
                    ON CONFLICT (note_id) DO UPDATE SET version = excluded.version, vector = excluded.vector),
         dropped AS (DELETE FROM note_vectors WHERE note_id = ANY (ARRAY(SELECT id FROM ready WHERE NOT live))),
         done AS (DELETE FROM note_index_queue WHERE note_id = ANY (ARRAY(SELECT id FROM ready)) RETURNING note_id)
    SELECT r.live, r.size FROM done JOIN ready r ON r.id = done.note_id"""

# A note whose vector PostgreSQL refuses to build (to_tsvector's 1 MB limit, not reachable from
# a 256 KB note, but a pass must never stall on one): stored with no vector, so it is found by
# no word rather than holding back every note after it.
_GIVE_UP_SQL = """
    WITH first AS (SELECT a.id, a.version, a.display_path
                     FROM (SELECT note_id FROM note_index_queue ORDER BY note_id LIMIT 1) AS q
                     JOIN artifacts a ON a.id = q.note_id),
         stored AS (INSERT INTO note_vectors (note_id, version, vector) SELECT id, version, NULL FROM first
                    ON CONFLICT (note_id) DO UPDATE SET version = excluded.version, vector = NULL),
         done AS (DELETE FROM note_index_queue WHERE note_id = (SELECT id FROM first))
    SELECT display_path FROM first"""

# After a crash the unlogged tables are empty (sql/156): every live note goes back in the queue,
# and note_find computes every note's vector until then. One transaction, so that note_find
# never sees the row back with the queue not yet full.
_INTACT_SQL = "SELECT EXISTS (SELECT FROM note_index_intact) AS intact"
_REFILL_SQL = """INSERT INTO note_index_queue (note_id)
                 SELECT id FROM artifacts WHERE kind = 'note' AND deleted_at IS NULL ON CONFLICT DO NOTHING"""
_INTACT_AGAIN_SQL = "INSERT INTO note_index_intact DEFAULT VALUES ON CONFLICT DO NOTHING"

# The batches' index entries wait in the GIN index's pending list (sql/155: fastupdate on), and
# the indexer merges them into the index in one sorted sweep at the end of a pass and whenever
# the notes stored since the last merge reach MERGE_BYTES of text: each word's posting list is
# then rewritten once per merge rather than once per note, and note_find, which reads the whole
# list on every search, meets a short one and only while a pass runs (PostgreSQL's own merge
# waits for 4 MB, gin_pending_list_limit). Merging after every batch instead cost twice the WAL
# while the index was logged (a throwaway script, issue 14). Only the index's owner (or a
# superuser) may merge: another role leaves it to PostgreSQL and autovacuum.
MERGE_BYTES = 512 * 1024
_MERGE_SQL = "SELECT gin_clean_pending_list('note_vectors_search'::regclass)"
_merge_refused = False   # said once per process, not at every pass

# One indexer at a time over the whole store (several gateways and workers each run one): the
# others would compute the same batch for nothing. An arbitrary constant ("HFINDEX").
_PASS_KEY = 0x4846494E444558


def index_pending(conn: Conn, *, batch: int = BATCH, stop: threading.Event | None = None) -> int:
    """Fill the search vectors of every note written since it was last indexed, a batch at a
    time on ``conn`` (an autocommit connection), until a batch reaches the queue's end, nothing in
    it could be taken (notes saved faster than they are indexed: a later pass) or ``stop`` is set;
    the number filled. Notes queued while the last batch was computed wait for the next pass:
    while saves stream in, going on would take them a few at a time, and a batch of five costs
    about 2.5 times a note what a batch of a hundred does (the transaction, the GIN insertions and
    the merge at the pass's end are paid per batch or per pass; a throwaway script, issue 14).
    After a crash it first queues every live note again (_REFILL_SQL). Returns 0 at once while
    another indexer is at work."""
    if not conn.execute("SELECT pg_try_advisory_lock(%s) AS mine", (_PASS_KEY,)).fetchone()["mine"]:
        return 0
    try:
        if not conn.execute(_INTACT_SQL).fetchone()["intact"]:
            with conn.transaction():
                queued = conn.execute(_REFILL_SQL).rowcount
                conn.execute(_INTACT_AGAIN_SQL)
            log.info("search index: the vectors were lost (a crash or a new standby); %d notes queued again", queued)
        conn.execute(_BATCH_TABLE)
        done = unmerged = 0
        while stop is None or not stop.is_set():
            try:
                with conn.transaction():
                    computed = conn.execute(_BATCH_SQL, {"batch": batch, "bytes": BATCH_BYTES}).fetchall()
                    taken = conn.execute(_STORE_SQL).fetchall() if computed else []
            except psycopg.Error as exc:
                if conn.broken or conn.closed:
                    raise   # the database is away, not this note
                if batch > 1:
                    batch = 1   # find the note that fails, one at a time
                    continue
                row = conn.execute(_GIVE_UP_SQL).fetchone()
                log.warning("no search vector for %s: %s", row["display_path"] if row else "?", str(exc).strip())
                done += 1
                continue
            filled = [row["size"] for row in taken if row["live"]]
            done += len(filled)
            unmerged += sum(filled)
            looked_at = computed[0]["looked_at"] if computed else 0
            if not taken or (len(computed) == looked_at < batch):
                break   # (all it looked at, and fewer than a batch: the queue's end)
            if unmerged >= MERGE_BYTES:
                _merge_pending_list(conn)
                unmerged = 0
        if unmerged:
            _merge_pending_list(conn)
        if done >= ANALYZE_AFTER:
            # A bulk load (or the first pass after a crash): statistics sampled while the notes
            # were queued would misjudge note_find's arms (a long queue, few vectors).
            conn.execute("ANALYZE note_vectors, note_index_queue")
        return done
    finally:
        if not (conn.broken or conn.closed):
            conn.execute("SELECT pg_advisory_unlock(%s)", (_PASS_KEY,))


def _merge_pending_list(conn: Conn) -> None:
    """Move the GIN index's pending entries into the index (see _MERGE_SQL)."""
    global _merge_refused
    if _merge_refused:
        return
    try:
        with conn.transaction():
            conn.execute(_MERGE_SQL)
    except psycopg.errors.InsufficientPrivilege as exc:
        _merge_refused = True
        log.info("search index: the pending list is left to PostgreSQL's own merge (%s)", str(exc).strip())


NICE = 10   # the indexer's server process yields the CPU to the ones answering requests


def _background_priority(conn: psycopg.Connection) -> None:
    """Run the server process behind ``conn`` at a lower CPU priority, when it is on this machine
    and ours to change (the embedded PostgreSQL, one started beside us as the same user, or any
    when we are root): filling vectors is background work, and on a busy machine it should take
    the CPU the requests leave, not share it with them. Nothing happens otherwise. Its batches
    hold no row lock while they compute, so a save never waits behind this slower process."""
    host = conn.info.host or ""
    if not (host.startswith("/") or host in ("localhost", "127.0.0.1", "::1")):
        return   # another machine's process: the pid means nothing here
    pid = conn.info.backend_pid
    try:
        with open(f"/proc/{pid}/comm", encoding="ascii", errors="replace") as comm:
            if comm.read().strip() != "postgres":
                return
        os.setpriority(os.PRIO_PROCESS, pid, NICE)
    except OSError:
        pass   # another user's server, or no /proc: the indexer runs at the server's priority


def connect(conninfo: str) -> psycopg.Connection:
    """The indexer's own connection (autocommit: index_pending opens its transactions), with
    asynchronous commits: a batch's commit returns without waiting for its WAL to reach the disk.
    A vector is derived data, and its tables are unlogged (sql/156): a crash empties them, and
    the next pass queues every note again, computed by note_find meanwhile. Waiting would only put
    a flush per batch in the queue of the saves' flushes, on the same WAL (issue 14). It runs at a
    lower CPU priority too (_background_priority)."""
    conn = psycopg.connect(conninfo, autocommit=True, row_factory=dict_row, **liveness(conninfo))
    conn.execute("SET synchronous_commit = off")
    _background_priority(conn)
    return conn


class SearchIndexer:
    """A daemon thread running ``index_pending`` on a connection of its own (as the login watch
    has), so it never takes a pooled connection from a request. Several gateways (or workers)
    may each run one: index_pending's advisory lock lets one pass run at a time, and the others
    return at once."""

    def __init__(self, conninfo: str, *, settle: float = SETTLE, poll: float = POLL) -> None:
        self.conninfo, self.settle, self.poll = conninfo, settle, poll
        self._conn: psycopg.Connection | None = None
        self._away = False   # the last pass found the database away (logged once, not at every pass)
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
                self._conn = connect(self.conninfo)
            index_pending(self._conn, stop=self._stop)
            if self._away:
                log.info("search index: the database answers again; indexing what waited")
                self._away = False
        except psycopg.OperationalError as exc:
            # The database is away: note_find computes what waits, and a later pass catches up.
            # (Said once for the outage, not at every pass.)
            if not self._away:
                log.warning("search index pass failed: %s", str(exc).strip().splitlines()[:1])
            self._away = True
            if self._conn is not None:
                self._conn.close()
                self._conn = None
        except Exception:
            log.exception("search index pass failed")

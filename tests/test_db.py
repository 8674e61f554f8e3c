"""store.db: which connection a request is lent, and statements psycopg can keep parsed."""
from __future__ import annotations

from contextlib import ExitStack

import pytest

from store.db import Database, compact


def _backend(db: Database) -> int:
    with db.connection() as conn:
        return conn.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"]


def test_after_a_burst_a_sequential_client_stays_on_the_connection_returned_last(db_url: str) -> None:
    """A burst of concurrent requests grows the pool; the requests one at a time after it must not
    go round every server process in turn (FIFO), which measured 15 % slower per PUT: each is lent
    the connection returned last."""
    db = Database(db_url, min_size=1, max_size=4).open()
    try:
        with ExitStack() as burst:
            held = [burst.enter_context(db.connection()) for _ in range(3)]
            pids = [c.execute("SELECT pg_backend_pid() AS pid").fetchone()["pid"] for c in held]
        assert len(set(pids)) == 3
        # ExitStack returned them last-borrowed first, so the first borrowed came back last.
        assert [_backend(db) for _ in range(6)] == [pids[0]] * 6
    finally:
        db.close()


def test_compact_keeps_what_string_literals_hold_and_refuses_what_it_cannot_fold(db: Database) -> None:
    statement = """
        SELECT 'two  spaces\n and a line' AS kept,   'it''s' AS quoted,
               1 +   2 AS n"""
    assert compact(statement) == "SELECT 'two  spaces\n and a line' AS kept, 'it''s' AS quoted, 1 + 2 AS n"
    with db.connection() as conn:
        assert conn.execute(compact(statement)).fetchone() == conn.execute(statement).fetchone()
    # What counting quotes would get wrong, or a comment that would swallow the rest: refused.
    for unsafe in ("SELECT 1 -- one\n, 2", 'SELECT 1 AS "a  b"', "SELECT $$a  b$$", "SELECT E'it\\'s'"):
        with pytest.raises(ValueError):
            compact(unsafe)


def test_connections_give_up_on_a_silent_tcp_peer_unless_the_url_says_otherwise(db) -> None:
    """keepalives and tcp_user_timeout bound how long a request waits on a database across a
    network that stopped answering (a partition); libpq ignores them on the test's unix socket,
    where the connection must still work. A value in the URL wins."""
    from psycopg.conninfo import make_conninfo

    from store.db import TCP_LIVENESS, Database
    with db.connection() as conn:
        assert conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
    assert {k: db._kwargs[k] for k in TCP_LIVENESS} == TCP_LIVENESS
    own = Database(make_conninfo(db.conninfo, tcp_user_timeout=30000), min_size=1, max_size=1)
    assert "tcp_user_timeout" not in own._kwargs and own._kwargs["keepalives_idle"] == 5
    with own, own.connection() as conn:
        assert conn.execute("SELECT 1 AS one").fetchone()["one"] == 1
    # The LISTEN connections too (a mount's change feed, a content cache's, the login watch's): on
    # a silent network one would wait for events that no longer come while its follower, believing
    # itself up, keeps what it cached.
    from store.events import ChangeListener
    listener = ChangeListener(db.conninfo)
    listener.connect()
    try:
        assert listener.conn is not None
        options = {o.keyword: o.val for o in listener.conn.pgconn.info}
        assert {k: options[k.encode()] for k in TCP_LIVENESS} == {k: str(v).encode() for k, v in TCP_LIVENESS.items()}
    finally:
        listener.close()


def test_a_deadlock_is_a_store_error_that_says_to_send_again(db: Database) -> None:
    """Two transactions locking two rows in opposite orders: PostgreSQL undoes one. That one is
    Contention (409, EAGAIN: nothing written, send again), not a driver exception (a 500)."""
    import threading

    from store.errors import Contention

    with db.transaction() as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS deadlock_probe (id int PRIMARY KEY, n int)")
        conn.execute("INSERT INTO deadlock_probe VALUES (1, 0), (2, 0) ON CONFLICT DO NOTHING")
    both = threading.Barrier(2)
    outcomes: list[object] = []

    def bump(first: int, second: int) -> None:
        try:
            with db.transaction() as conn:
                conn.execute("UPDATE deadlock_probe SET n = n + 1 WHERE id = %s", (first,))
                both.wait()
                conn.execute("UPDATE deadlock_probe SET n = n + 1 WHERE id = %s", (second,))
            outcomes.append("written")
        except Exception as exc:  # noqa: BLE001 - checked below
            outcomes.append(exc)

    threads = [threading.Thread(target=bump, args=pair) for pair in ((1, 2), (2, 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert outcomes.count("written") == 1, outcomes
    undone = next(o for o in outcomes if o != "written")
    assert isinstance(undone, Contention) and "send it again" in str(undone)
    with db.connection() as conn:
        assert [r["n"] for r in conn.execute("SELECT n FROM deadlock_probe ORDER BY id")] == [1, 1]

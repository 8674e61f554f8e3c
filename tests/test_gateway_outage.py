"""PostgreSQL goes away and comes back (issue 15): every request answers 503 quickly meanwhile, the
first request after the restart succeeds, and no write is acknowledged that was not committed.

A private PostgreSQL (not the session's) so that stopping it disturbs no other test."""
from __future__ import annotations

import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests
from psycopg import sql
from psycopg.conninfo import make_conninfo

from gateway.postgres import EmbeddedPostgres
from store import admin, migrations
from store.db import LOCK_TIMEOUT, Database
from store.errors import Unavailable
from tests.conftest import RunningServer, _test_bindir, memory_dir, running_gateway
from tests.web_browser import csrf_of, web_login


@pytest.fixture
def private_pg() -> Iterator[tuple[EmbeddedPostgres, str]]:
    data_dir = Path(tempfile.mkdtemp(prefix="hostfinder-outage-pg-", dir=memory_dir()))
    pg = EmbeddedPostgres(data_dir, bindir=_test_bindir(),
                          settings={"fsync": "off", "full_page_writes": "off"})
    try:
        server_url = pg.start()
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier("outage")))
        url = make_conninfo(server_url, dbname="outage")
        migrations.migrate(url)
        yield pg, url
    finally:
        pg.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture
def outage(private_pg) -> Iterator[tuple[EmbeddedPostgres, RunningServer, dict[str, Any]]]:
    pg, url = private_pg
    db = Database(url, min_size=2, max_size=12).open()
    boot = admin.bootstrap(db, email="ada@example.com", password="correct horse battery")
    try:
        with running_gateway(db, threads=8) as running:
            yield pg, running, boot
    finally:
        db.close()


def timed(fn, *args: Any, **kwargs: Any) -> tuple[requests.Response, float]:
    started = time.monotonic()
    r = fn(*args, timeout=10, **kwargs)
    return r, time.monotonic() - started


def test_requests_answer_503_during_an_outage_and_succeed_right_after(outage, caplog) -> None:
    pg, server, boot = outage
    auth = (boot["email"], boot["password"])
    note = f"{server.url}/dav/org/{boot['org_id']}/before.md"
    assert requests.put(note, data=b"# before\n", auth=auth, timeout=10).status_code == 201
    assert requests.get(f"{server.url}/api/health", timeout=10).status_code == 200
    web = web_login(server, boot["email"], boot["password"])
    token = csrf_of(web.get(f"{server.url}/agents/{boot['agent_id']}").text)

    pg.stop()
    answers = []
    # The web app's pages and forms too (they answered 400 "Bad request" with the outage's sentence).
    answers.append(timed(web.get, f"{server.url}/notes"))
    answers.append(timed(web.get, f"{server.url}/databases"))
    answers.append(timed(web.post, f"{server.url}/agents/{boot['agent_id']}/task",
                         data={"csrf_token": token, "version": "0", "task": "typed during the outage"}))
    for _ in range(3):
        answers.append(timed(requests.get, f"{server.url}/api/health"))
        answers.append(timed(requests.get, f"{server.url}/api/collections", auth=auth))
        answers.append(timed(requests.get, note, auth=auth))
        answers.append(timed(requests.put, f"{server.url}/dav/org/{boot['org_id']}/during.md",
                             data=b"# during\n", auth=auth))
        answers.append(timed(requests.post, f"{server.url}/api/agents/{boot['agent_id']}/tools/note_write",
                             json={"level": "agent", "key": "during.md", "content": "x"},
                             headers={"Authorization": f"Bearer {boot['service_token']}"}))
    for r, seconds in answers:
        assert r.status_code == 503, (r.request.method, r.url, r.status_code, r.text[:300])
        assert seconds < 5, (r.url, seconds)
        assert "Traceback" not in r.text and "psycopg" not in r.text
    api = [r for r, _ in answers if "/api/" in r.url and "/health" not in r.url]
    assert all(r.headers.get("Retry-After") and "try again" in r.json()["error"] for r in api)
    dav = [r for r, _ in answers if "/dav/" in r.url]
    assert all(r.headers.get("Retry-After") and r.reason == "Service Unavailable" for r in dav)
    pages = [r for r, _ in answers if "/dav/" not in r.url and "/api/" not in r.url]
    assert len(pages) == 3 and all(r.headers.get("Retry-After") and "<title>" in r.text for r in pages)
    # An outage is an answer, not a failure of ours: no ERROR with a traceback per request.
    assert not [r for r in caplog.records if r.levelname == "ERROR" and r.exc_info], \
        [r.getMessage() for r in caplog.records if r.levelname == "ERROR"][:3]

    pg.start()
    # The very next request of each kind succeeds: no dead pooled connection is lent out.
    assert requests.get(f"{server.url}/api/health", timeout=10).status_code == 200
    r = requests.get(note, auth=auth, timeout=10)
    assert r.status_code == 200 and r.content == b"# before\n"
    assert requests.get(f"{server.url}/api/collections", auth=auth, timeout=10).status_code == 200
    r = requests.put(f"{server.url}/dav/org/{boot['org_id']}/after.md", data=b"# after\n", auth=auth, timeout=10)
    assert r.status_code == 201
    # What was refused during the outage was not stored.
    assert requests.get(f"{server.url}/dav/org/{boot['org_id']}/during.md", auth=auth, timeout=10).status_code == 404
    # The search indexer's own connection died with the server: it reconnects unaided and
    # indexes what was written since (store/search_index.py).
    deadline = time.monotonic() + 15
    while True:
        with server.db.connection() as conn:
            waiting = conn.execute("SELECT count(*) AS n FROM note_index_queue").fetchone()["n"]
        if not waiting:
            break
        assert time.monotonic() < deadline, f"{waiting} notes still wait for their search vector"
        time.sleep(0.2)


def test_no_write_is_acknowledged_that_was_not_committed(outage) -> None:
    pg, server, boot = outage
    auth = (boot["email"], boot["password"])
    acknowledged: list[str] = []
    refused: list[str] = []
    stop = threading.Event()

    def writer(n: int) -> None:
        i = 0
        while not stop.is_set():
            name = f"w{n}-{i}.md"
            try:
                r = requests.put(f"{server.url}/dav/org/{boot['org_id']}/{name}", data=f"# {name}\n".encode(),
                                 auth=auth, timeout=10)
            except requests.RequestException:
                r = None
            if r is not None and r.status_code in (201, 204):
                acknowledged.append(name)
            else:
                refused.append(f"{name}: {r.status_code if r is not None else 'no answer'}")
            i += 1

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    time.sleep(2.0)
    pg.stop()
    time.sleep(1.5)
    pg.start()
    time.sleep(2.0)
    stop.set()
    for t in threads:
        t.join()
    # Every refusal during the outage is a 503 (no 500, no dropped connection).
    assert refused and all(r.endswith(": 503") for r in refused), refused
    assert acknowledged
    with psycopg.connect(server.db.conninfo) as conn:
        stored = {r[0] for r in conn.execute(
            "SELECT key FROM artifacts WHERE org_id = %s AND kind = 'note' AND deleted_at IS NULL", (boot["org_id"],))}
    missing = [name for name in acknowledged if name not in stored]
    assert not missing, f"acknowledged but not stored: {missing}"


def test_a_lock_held_elsewhere_answers_503_and_frees_the_worker(outage, private_pg) -> None:
    """A migration, VACUUM FULL or a long change holding a table: requests that need it wait
    LOCK_TIMEOUT, then answer 503 with a sentence (they used to wait for as long as the lock was
    held, every worker thread with them), and succeed once it is released."""
    pg, server, boot = outage
    auth = (boot["email"], boot["password"])
    note = f"{server.url}/dav/org/{boot['org_id']}/held.md"
    assert requests.put(note, data=b"# before\n", auth=auth, timeout=10).status_code == 201
    holder = psycopg.connect(private_pg[1])
    try:
        holder.execute("LOCK TABLE artifacts IN ACCESS EXCLUSIVE MODE")
        for r in (requests.put(note, data=b"# during\n", auth=auth, timeout=30),
                  requests.get(f"{server.url}/api/collections", auth=auth, timeout=30)):
            assert r.status_code == 503 and r.headers.get("Retry-After"), (r.url, r.status_code, r.text[:300])
            assert "held by another change" in r.text and "nothing was changed" in r.text
        # A GET waits for the lock once: its fast path does not hand the request to WsgiDAV's
        # path to wait a second time.
        r, seconds = timed(requests.get, note, auth=auth)
        assert r.status_code == 503 and "held by another change" in r.text
        assert seconds < 2 * LOCK_TIMEOUT, seconds
    finally:
        holder.rollback()
        holder.close()
    r = requests.get(note, auth=auth, timeout=10)
    assert r.status_code == 200 and r.content == b"# before\n"
    assert requests.put(note, data=b"# after\n", auth=auth, timeout=10).status_code == 204


def test_a_server_that_answers_nothing_ends_a_request_at_the_wait_bound(private_pg, monkeypatch) -> None:
    """A stopped server (SIGSTOP, a hung disk) cannot end a statement itself: the connection's own
    bound closes it and the request gets Unavailable instead of waiting for ever."""
    from store import db as store_db
    pg, url = private_pg
    monkeypatch.setattr(store_db, "WAIT_TIMEOUT", 1)
    db = Database(url, min_size=1, max_size=2).open()
    try:
        with pytest.raises(Unavailable):
            with db.connection() as conn:
                conn.execute("SELECT pg_sleep(30)")   # as long as a stopped server's silence
    finally:
        db.close()


def test_the_store_raises_unavailable_not_a_driver_error(private_pg) -> None:
    pg, url = private_pg
    db = Database(url, min_size=1, max_size=2).open()
    try:
        pg.stop()
        started = time.monotonic()
        with pytest.raises(Unavailable) as caught:
            with db.connection() as conn:
                conn.execute("SELECT 1")
        assert "try again" in str(caught.value)
        with pytest.raises(Unavailable):
            with db.transaction() as conn:
                conn.execute("SELECT 1")
        assert time.monotonic() - started < 10
        pg.start()
        with db.connection() as conn:
            assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
    finally:
        db.close()


def _server_processes(pg: EmbeddedPostgres) -> list[int]:
    """The postmaster and every process it started (backends, checkpointer, walwriter...)."""
    main = pg._proc.pid
    found = [main]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == main:   # (the field after the state is the parent's pid)
            found.append(int(stat.parent.name))
    return found


@pytest.fixture
def paused(private_pg, monkeypatch) -> Iterator[Any]:
    """pause() stops every process of the private PostgreSQL (SIGSTOP: it keeps its connections
    and answers nothing, as a frozen VM or a hung disk does); the fixture resumes them however
    the test ends. The wait bound is raised past the test's length, so only the stall's own
    detection can end a wait, and the watchdog is quickened to keep the test short."""
    from store import db as store_db
    monkeypatch.setattr(store_db, "WAIT_TIMEOUT", 120)
    monkeypatch.setattr(store_db, "STALL_CHECK_AFTER", 1.0)
    monkeypatch.setattr(store_db, "STALL_PROBE_TIMEOUT", 2.0)
    pg, _url = private_pg
    stopped: list[int] = []

    def pause() -> None:
        stopped.extend(_server_processes(pg))
        for pid in stopped:
            os.kill(pid, signal.SIGSTOP)

    def resume() -> None:
        for pid in stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        stopped.clear()

    pause.resume = resume   # type: ignore[attr-defined]
    try:
        yield pause
    finally:
        resume()


def test_a_stalled_server_ends_the_waits_on_it_and_is_answered_503_at_once_until_it_resumes(
        private_pg, paused) -> None:
    """A server that answers nothing (SIGSTOP) held every request on it for the whole wait
    bound, 25 s, each holding a worker thread. The watchdog asks the server for any answer on a
    new connection; none, and the waits end with a sentence saying so (a save's saying it may
    still be applied), later requests are refused without waiting, and the first answer after
    the server resumes ends it."""
    from store.db import STALLED_MESSAGE, STALLED_WRITE_MESSAGE
    _pg, url = private_pg
    db = Database(url, min_size=2, max_size=6).open()
    try:
        with db.connection() as conn:
            conn.execute("SELECT 1")
        paused()
        outcomes: dict[str, BaseException | None] = {}

        def attempt(name: str, block: Any) -> threading.Thread:
            """A thread running one statement in ``block`` (a read, a save), its outcome kept."""
            def run() -> None:
                try:
                    with block() as conn:
                        conn.execute("SELECT 1")
                    outcomes[name] = None
                except BaseException as exc:
                    outcomes[name] = exc
            return threading.Thread(target=run)

        threads = [attempt("read", db.connection), attempt("save", db.single_write)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)   # the raised wait bound is 120 s: only the watchdog ends them sooner
        assert not any(t.is_alive() for t in threads), "a wait on the stopped server was never ended"
        assert isinstance(outcomes["read"], Unavailable) and outcomes["read"].message == STALLED_MESSAGE
        assert isinstance(outcomes["save"], Unavailable) and outcomes["save"].message == STALLED_WRITE_MESSAGE
        # While it stays stopped, a request is refused before it waits on it.
        started = time.monotonic()
        with pytest.raises(Unavailable) as later:
            with db.connection() as conn:
                conn.execute("SELECT 1")
        assert later.value.message == STALLED_MESSAGE and time.monotonic() - started < 1
        paused.resume()
        deadline = time.monotonic() + 30
        while True:
            try:
                with db.connection() as conn:
                    assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
                break
            except Unavailable:
                assert time.monotonic() < deadline, "the store did not heal after the server resumed"
                time.sleep(0.1)
    finally:
        paused.resume()
        db.close()


def test_a_stalled_server_does_not_stop_the_gateway_answering(private_pg, paused) -> None:
    """Eight requests on a stopped server used all eight worker threads, so a stylesheet or the
    login page, which need no database, waited as long as they did. Now they end with a 503 and
    its sentence, and everything else is answered meanwhile."""
    _pg, url = private_pg
    db = Database(url, min_size=2, max_size=12).open()
    boot = admin.bootstrap(db, email="ada@example.com", password="correct horse battery")
    auth = (boot["email"], boot["password"])
    note = f"/dav/org/{boot['org_id']}/kept.md"
    try:
        with running_gateway(db, threads=8) as server:
            assert requests.put(server.url + note, data=b"# kept\n", auth=auth, timeout=10).status_code == 201
            paused()
            answers: list[requests.Response | BaseException] = []

            def get_note() -> None:
                try:
                    answers.append(requests.get(server.url + note, auth=auth, timeout=60))
                except BaseException as exc:
                    answers.append(exc)

            threads = [threading.Thread(target=get_note) for _ in range(8)]
            for t in threads:
                t.start()
            time.sleep(0.5)   # (all eight are waiting on the server now)
            page = requests.get(f"{server.url}/login", timeout=60)
            assert page.status_code == 200 and "password" in page.text
            for t in threads:
                t.join(timeout=70)
            assert len(answers) == 8
            for r in answers:
                assert isinstance(r, requests.Response), r
                # (Those that found no pooled connection free learn it from a connection attempt
                # that timed out: the same sentence.)
                assert r.status_code == 503 and "stopped answering" in r.text, (r.status_code, r.text[:200])
            paused.resume()
            deadline = time.monotonic() + 30
            while (r := requests.get(server.url + note, auth=auth, timeout=10)).status_code != 200:
                assert time.monotonic() < deadline, (r.status_code, r.text[:200])
                time.sleep(0.2)
            assert r.content == b"# kept\n"
    finally:
        db.close()


def test_a_long_statement_on_a_server_that_answers_is_left_to_run(private_pg, paused) -> None:
    """The watchdog asks the server while a request holds its connection; a server that answers
    is not stalled, and the request's own long statement (a migration's, a large change's) runs
    to its end."""
    _pg, url = private_pg
    db = Database(url, min_size=1, max_size=3).open()
    try:
        with db.transaction() as conn:
            conn.execute("SELECT pg_sleep(4)")
            assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
        assert not db.stalled
        with db.connection() as conn:
            assert conn.execute("SELECT 1 AS one").fetchone() == {"one": 1}
    finally:
        db.close()


def test_a_crash_of_the_database_leaves_every_note_findable(private_pg) -> None:
    """Notes' search vectors live in unlogged tables (sql/156), which PostgreSQL empties when it
    recovers from a crash: note_find still finds every note by its words (computing them), and
    the indexer's next pass queues every note again and fills them all."""
    from psycopg.rows import dict_row

    from store import note_search, notes, search_index
    from store.access import SYSTEM
    from store.agents import load_agent
    pg, url = private_pg
    db = Database(url, min_size=1, max_size=2).open()
    try:
        boot = admin.bootstrap(db, email="ada@example.com", password="correct horse battery")
        org, guild = boot["org_id"], boot["guild_id"]
        with db.transaction() as conn:
            notes.write_note(conn, org, "guild", guild, "comet.md", "a comet passes at dawn", SYSTEM)
            notes.write_note(conn, org, "guild", guild, "harbour.md", "boats in the harbour", SYSTEM)
        with db.connection() as conn:
            assert search_index.index_pending(conn) == 2
    finally:
        db.close()
    postmaster = int((Path(pg.pgdata) / "postmaster.pid").read_text().split()[0])
    os.kill(postmaster, signal.SIGQUIT)   # an immediate shutdown: the next start recovers from the WAL
    deadline = time.monotonic() + 30
    while (Path(pg.pgdata) / "postmaster.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    pg.stop()
    pg.start()
    with psycopg.connect(url, autocommit=True, row_factory=dict_row) as conn:
        assert conn.execute("SELECT count(*) AS n FROM note_vectors").fetchone()["n"] == 0   # emptied
        agent = load_agent(conn, boot["agent_id"], {org})

        def found(query: str) -> list[str]:
            return [h["key"] for h in note_search.find_notes(conn, agent, query, levels=["guild"])]

        assert found("comet") == ["comet.md"] and found("harbour boats") == ["harbour.md"]
        assert search_index.index_pending(conn) == 2
        assert conn.execute("SELECT count(*) AS n FROM note_vectors").fetchone()["n"] == 2
        assert conn.execute("SELECT count(*) AS n FROM note_index_queue").fetchone()["n"] == 0
        assert found("comet") == ["comet.md"] and found("harbour boats") == ["harbour.md"]
        assert found("dawn -comet") == []

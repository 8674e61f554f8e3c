"""Fixtures: one private PostgreSQL per test session, a migrated template, a fresh database per test,
and the real gateway on a free port.

Set HOSTFINDER_TEST_DATABASE_URL to use an existing server instead of starting one (the role must
be allowed to create databases)."""
from __future__ import annotations

import itertools
from contextlib import contextmanager
import os
import shutil
import signal
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
import requests
from psycopg import sql
from psycopg.conninfo import make_conninfo

from gateway.postgres import EmbeddedPostgres
from gateway.server import Gateway, make_server
from store import admin, migrations
from store.db import Database

TEMPLATE = "hf_template"
_counter = itertools.count(1)


def pytest_configure(config: pytest.Config) -> None:
    """SIGTERM (a CI timeout, `kill`, a terminal closed) ends the run as Ctrl-C does, so the
    session's fixtures still stop their PostgreSQL and gateways and remove their data directories
    (in /dev/shm, memory that nothing else would give back); by default it kills pytest outright."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@pytest.fixture(scope="session", autouse=True)
def cheap_password_hashes() -> Iterator[None]:
    """argon2id with the library's default cost takes about 150 ms a hash on this machine, and the
    suite hashes and verifies passwords thousands of times (a bootstrap per test, a first login
    per session): in this process the same algorithm runs at its smallest cost. Gateways the
    tests start as commands keep the product's parameters."""
    from argon2 import PasswordHasher

    from store import access
    cheap = PasswordHasher(time_cost=1, memory_cost=8, parallelism=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(access, "_hasher", cheap)
        mp.setattr(access, "_DUMMY_HASH", cheap.hash("not a password"))
        yield


@pytest.fixture(scope="session")
def pg_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A libpq conninfo for a maintenance database on the session's server."""
    url = os.environ.get("HOSTFINDER_TEST_DATABASE_URL")
    if url:
        yield url
        return
    # Not under pytest's tmp_path: that is private to root, and the server runs as an
    # unprivileged user when the suite runs as root. In memory where the machine offers it:
    # each test's CREATE DATABASE writes about a thousand files, which took 0.4 s on this
    # machine's ext4 at times and 20 ms on tmpfs (the suite runs with fsync off anyway).
    data_dir = Path(tempfile.mkdtemp(prefix="hostfinder-test-pg-", dir=memory_dir()))
    pg = EmbeddedPostgres(data_dir, bindir=_test_bindir(), settings={
        "fsync": "off", "synchronous_commit": "off", "full_page_writes": "off", "max_connections": "300"})
    try:
        yield pg.start()
    finally:
        pg.stop()
        shutil.rmtree(data_dir, ignore_errors=True)


def memory_dir() -> str | None:
    """/dev/shm when it is a writable tmpfs, else None (the system's temporary directory)."""
    try:
        st = os.statvfs("/dev/shm")
    except OSError:
        return None
    roomy = st.f_bavail * st.f_frsize > 2 * 1024**3
    return "/dev/shm" if roomy and os.access("/dev/shm", os.W_OK | os.X_OK) else None


def _test_bindir() -> str | None:
    """The suite runs on the OLDEST PostgreSQL here (Debian's 15 in CI) while `serve` and the CLI
    tests use the newest (the wheel's 18), so the SQL is exercised at both ends of the supported
    range. HOSTFINDER_TEST_PG_BINDIR chooses explicitly."""
    explicit = os.environ.get("HOSTFINDER_TEST_PG_BINDIR")
    if explicit:
        return explicit
    system = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"),
                    key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    return str(system[0].parent) if system else None


@pytest.fixture(scope="session")
def template_db(pg_server: str) -> str:
    """A database migrated once; each test's database is cloned from it."""
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(TEMPLATE)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE)))
    migrations.migrate(make_conninfo(pg_server, dbname=TEMPLATE))
    return TEMPLATE


def create_database(pg_server: str, template: str, name: str | None = None) -> str:
    name = name or f"hf_test_{os.getpid()}_{next(_counter)}"
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template)))
    return make_conninfo(pg_server, dbname=name)


def drop_database(pg_server: str, conninfo: str) -> None:
    name = psycopg.conninfo.conninfo_to_dict(conninfo)["dbname"]
    with psycopg.connect(pg_server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def db_url(pg_server: str, template_db: str) -> Iterator[str]:
    """A fresh, migrated database for this test alone."""
    url = create_database(pg_server, template_db)
    yield url
    drop_database(pg_server, url)


def observed_database(db_url: str, connection_class: type, *, max_size: int = 20) -> Database:
    """An open Database whose connections are ``connection_class`` (a psycopg.Connection that
    notes what it runs or returns), configured as the store's own: for tests that count the
    statements or rows a real request costs. The caller closes it."""
    from psycopg.rows import dict_row
    from psycopg_pool import ConnectionPool

    from store.db import _configure
    database = Database(db_url, max_size=max_size)
    database.pool = ConnectionPool(db_url, min_size=1, max_size=max_size, open=False, connection_class=connection_class,
                                   kwargs={"row_factory": dict_row, "autocommit": True}, configure=_configure)
    return database.open()


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = Database(db_url, min_size=1, max_size=40).open()
    yield database
    database.close()


@pytest.fixture
def boot(db: Database) -> dict[str, Any]:
    """`hostfinder admin bootstrap`: org, guild, agent, user with password, member and service tokens."""
    return admin.bootstrap(db, email="ada@example.com", password="correct horse battery")


def insert_notes(db: Database, org_id: int, level: str, owner_id: int | None, contents: list[str]) -> None:
    """Bulk-seed notes n1.md .. nN.md (one statement, no provenance) for tests that need thousands:
    through the store, 10 000 notes would take most of a minute."""
    from store.paths import note_path
    keys = [f"n{i}.md" for i in range(1, len(contents) + 1)]
    with db.transaction() as conn:
        conn.execute("""INSERT INTO artifacts (org_id, kind, level, guild_id, agent_id, key, display_path, content)
                        SELECT %s, 'note', %s, %s, %s, k, p, c
                          FROM unnest(%s::text[], %s::text[], %s::text[]) AS t(k, p, c)""",
                     (org_id, level, owner_id if level == "guild" else None, owner_id if level == "agent" else None,
                      keys, [note_path(org_id, level, owner_id, k) for k in keys], contents))  # type: ignore[arg-type]


@contextmanager
def owner_count_held(db: Database, org: int, level: str, owner: int) -> Iterator[None]:
    """Hold an owner's counter row (FOR UPDATE) for the block: every create or move into or out
    of that owner queues behind it, so a race test can line its writers up before they run."""
    with db.transaction() as holder:
        holder.execute("SELECT live FROM owner_counts WHERE org_id = %s AND level = %s AND owner_id = %s"
                       " FOR UPDATE", (org, level, owner))
        yield


def wait_for_lock_waiters(conninfo: str, n: int, timeout: float = 10.0) -> None:
    """Return once ``n`` backends of this test's database wait on a lock (a row lock, an advisory
    lock): a race test's writers are then inside their transactions, queued behind the one the test
    holds, so the race is exercised every time instead of when a sleep happened to be long enough."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(conninfo, autocommit=True) as conn:
        while True:
            waiting = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                                   " AND datname = current_database()").fetchone()[0]
            if waiting >= n:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{waiting} of the {n} expected backends waited on a lock within {timeout} s")
            time.sleep(0.02)


def record_answers(monkeypatch: pytest.MonkeyPatch, fast_path: Any) -> list[str]:
    """Wrap ``fast_path.answer`` (dav_provider.fastget or fastput) to record the paths it answered
    itself; None from it means WsgiDAV answered, and nothing is recorded."""
    answered: list[str] = []
    real = fast_path.answer

    def recording(provider: Any, door: Any, environ: dict[str, Any], start_response: Any) -> Any:
        result = real(provider, door, environ, start_response)
        if result is not None:
            answered.append(environ["PATH_INFO"])
        return result
    monkeypatch.setattr(fast_path, "answer", recording)
    return answered


HELD = "held password"   # the ``held`` fixture holds a verification of any password starting "held"


class Held:
    """The door's argon2 verifications of passwords starting "held", each held open until the test
    sets ``release`` (``held`` fixture): for tests of logins waiting for, or refused, a slot, with
    nothing depending on timing (the suite's argon2 is too cheap to keep a slot busy otherwise)."""

    def __init__(self) -> None:
        self.entered = threading.Semaphore(0)   # one release per verification that started
        self.release = threading.Event()
        self.started = 0


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    from store import access
    state = Held()
    real = access._verify

    def verify(stored: str, password: str) -> bool:
        if password.startswith("held"):
            state.started += 1
            state.entered.release()
            assert state.release.wait(60), "the test never released the held verification"
        return real(stored, password)
    monkeypatch.setattr(access, "_verify", verify)
    try:
        yield state
    finally:
        state.release.set()   # never leave a server thread waiting


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RunningServer:
    url: str
    db: Database
    gateway: Gateway

    def session(self, *, basic: tuple[str, str] | None = None, bearer: str | None = None) -> requests.Session:
        s = requests.Session()
        if basic:
            s.auth = basic
        if bearer:
            s.headers["Authorization"] = f"Bearer {bearer}"
        return s


def start_gateway(db: Database, *, threads: int = 8, read_cache: bool = False) -> tuple[RunningServer, Any]:
    """The real gateway WSGI app on a real cheroot server on a free port, in a thread."""
    gateway = Gateway(db, read_cache=read_cache)
    port = free_port()
    server = make_server(gateway, "127.0.0.1", port, threads=threads)
    # The door's loop notices a stop at its next wake-up: half a second by default, once per test.
    server.expiration_interval = 0.05
    server.prepare()
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    return RunningServer(f"http://127.0.0.1:{port}", db, gateway), server


@contextmanager
def running_gateway(db: Database, **options: Any) -> Iterator[RunningServer]:
    """``start_gateway`` for the length of a with block: stopped and closed however it ends."""
    running, srv = start_gateway(db, **options)
    try:
        yield running
    finally:
        running.gateway.stopping()
        srv.stop()
        running.gateway.close()


@pytest.fixture
def server(db: Database) -> Iterator[RunningServer]:
    with running_gateway(db) as running:
        yield running


@pytest.fixture
def operator(server: RunningServer, boot: dict[str, Any]) -> requests.Session:
    """A session logged in as the bootstrap organisation's member (Basic, email and password)."""
    return server.session(basic=(boot["email"], boot["password"]))


@pytest.fixture
def service(server: RunningServer, boot: dict[str, Any]) -> requests.Session:
    """A session with the bootstrap organisation's service token (the orchestrator)."""
    return server.session(bearer=boot["service_token"])


REPO = Path(__file__).resolve().parent.parent


def wait_until(condition: Any, what: str) -> None:
    """Until ``condition()``, polled (it is set by another thread a moment later)."""
    done = threading.Event()
    for _ in range(1000):
        if condition():
            return
        done.wait(0.01)
    raise AssertionError(f"{what} did not happen within 10 s")

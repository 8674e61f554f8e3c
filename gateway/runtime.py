"""Finding and opening the store: an existing server (--database-url) or the embedded one.

``StoreRuntime`` starts the embedded PostgreSQL when no URL is configured (or attaches to the one
a running gateway already started on the same data directory), creates the database on first use,
applies migrations and opens the pool. Closing it stops what it started, and nothing else."""
from __future__ import annotations

import fcntl
import logging
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from gateway.config import Config
from gateway.postgres import EmbeddedPostgres, PostgresError
from store import migrations
from store.db import Database

log = logging.getLogger(__name__)

EMBEDDED_DB = "hostfinder"
# Seconds a start-up waits for another one in the same place (initdb takes a few on a slow disk).
STARTING_WAIT = 120
# Seconds between attempts to start an embedded PostgreSQL that exited and would not start again.
REVIVE_INTERVAL = 5
# Where root's default data directory goes when the server user could not reach ./.hostfinder
# (a checkout under /root, say): PostgreSQL refuses to run as root, and we never widen the
# permissions of a person's folders.
ROOT_FALLBACK = Path("/var/lib/hostfinder")


def usable_data_dir(config: Config) -> Path:
    """The data directory to use: the configured one, except that as root a default one whose
    parents the unprivileged server user cannot traverse moves under /var/lib/hostfinder."""
    wanted = config.data_dir.absolute()
    if os.geteuid() != 0 or config.data_dir_explicit or _traversable_by_others(wanted.parent):
        return wanted
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", str(wanted).strip("/")) or "default"
    fallback = ROOT_FALLBACK / slug
    log.warning("the PostgreSQL server user cannot enter %s; keeping the embedded data in %s instead"
                " (give --data-dir to choose)", wanted.parent, fallback)
    return fallback


def _traversable_by_others(path: Path) -> bool:
    for p in (path, *path.parents):
        try:
            if p.exists() and not os.stat(p).st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


class StartupError(Exception):
    """One sentence for stderr: what is wrong and what to do."""


def describe_connect_error(url: str, exc: Exception) -> str:
    safe = {k: v for k, v in conninfo_to_dict(url).items() if k != "password"} if _parsable(url) else {}
    where = f"{safe.get('host', 'localhost')}:{safe.get('port', 5432)}/{safe.get('dbname', '')}"
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return (f"cannot connect to the database at {where} ({first}); check --database-url or "
            "HOSTFINDER_DATABASE_URL, or leave it unset to use the embedded PostgreSQL")


def _parsable(url: str) -> bool:
    try:
        conninfo_to_dict(url)
        return True
    except psycopg.ProgrammingError:
        return False


@contextmanager
def starting_in(data_dir: Path) -> Iterator[None]:
    """One process at a time decides whether to start the embedded PostgreSQL of ``data_dir`` or
    use the one running there: two gateways started together on a new directory both ran initdb
    and both failed. An flock on the folder above it (no file is made for it), held for the
    start-up only."""
    above = data_dir.parent
    try:
        # Made first if missing (0755, as the start-up makes a data directory's parents): locking
        # the nearest folder that exists would let a second process, arriving once the first had
        # made the parents, lock another folder and run initdb beside it.
        if not above.is_dir():
            os.makedirs(above, mode=0o755, exist_ok=True)
        fd = os.open(above, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield  # cannot be made or read: the start-up says why in its own words
        return
    try:
        deadline = time.monotonic() + STARTING_WAIT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:  # another start-up hung: go on as before this lock
                    log.warning("another Host Finder process has been starting in %s for %d s; going on",
                                above, STARTING_WAIT)
                    break
                time.sleep(0.1)
        yield
    finally:
        os.close(fd)  # (closing releases the lock)


class StoreRuntime:
    def __init__(self, config: Config, *, migrate: bool = True, pool_size: int | None = None,
                 create: bool = True, share: bool = True) -> None:
        """``create``: make a new embedded store when the data directory holds none (serve,
        migrate). The admin commands and the mount act on a store that exists: run in the wrong
        directory they would otherwise create an empty one there and report its emptiness.
        ``share``: use the embedded PostgreSQL another process already runs on the data directory
        (admin commands, the mount). A gateway does not: it would depend on the other one, and
        answer 503 for good once that one stopped its PostgreSQL."""
        self.config = config
        self.migrate = migrate
        self.create = create
        self.share = share
        self.pool_size = pool_size or config.pool_size
        self.pg: EmbeddedPostgres | None = None
        self.db: Database | None = None
        self.conninfo = ""
        self._next_revive = 0.0

    def open(self) -> Database:
        try:
            self.conninfo = self._conninfo()
            if self.migrate:
                migrations.migrate(self.conninfo)
            self.db = Database(self.conninfo, min_size=1, max_size=self.pool_size).open()
            return self.db
        except (PostgresError, migrations.MigrationError) as exc:
            self.close()
            raise StartupError(str(exc)) from None
        except (psycopg.OperationalError, psycopg.ProgrammingError) as exc:
            self.close()
            raise StartupError(describe_connect_error(self.conninfo or self.config.database_url or "", exc)) from None
        except BaseException:
            self.close()
            raise

    def _conninfo(self) -> str:
        if self.config.database_url:
            if not _parsable(self.config.database_url):
                # Not echoed: a URL can hold a password.
                raise StartupError("the database URL (--database-url or HOSTFINDER_DATABASE_URL) is not a "
                                   "PostgreSQL URL; use the form postgresql://user:password@host:5432/dbname")
            with psycopg.connect(self.config.database_url, connect_timeout=10):
                pass
            return self.config.database_url
        self.config.data_dir = usable_data_dir(self.config)
        self.pg = EmbeddedPostgres(self.config.data_dir, bindir=self.config.pg_bindir)
        if not self.create and not self.pg.initialised:
            self.pg = None
            raise StartupError(
                f"there is no Host Finder store in {self.config.data_dir}: give the data directory the "
                "gateway uses (--data-dir DIR after the subcommand, or HOSTFINDER_DATA_DIR) or its "
                "--database-url; `hostfinder serve` or `hostfinder migrate` creates a new store")
        with starting_in(self.config.data_dir):
            return self._attach_or_start()

    def _attach_or_start(self) -> str:
        assert self.pg is not None
        attached = self.pg.attach()
        if attached and not self.share:
            self.pg = None
            raise StartupError(
                f"another Host Finder process already runs the PostgreSQL of {self.config.data_dir} (a gateway "
                "started there, or a mount or admin command started while none was running): stop it first, "
                "or give this gateway another --data-dir; gateways that share one store each take the same "
                "--database-url")
        if attached:
            log.info("using the PostgreSQL already running on %s", self.config.data_dir)
            self.pg = None  # not ours to stop
            server = attached
        else:
            server = self.pg.start()
        with psycopg.connect(server, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (EMBEDDED_DB,)).fetchone()
            if not exists:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(EMBEDDED_DB)))
        return make_conninfo(server, dbname=EMBEDDED_DB)

    def revive(self) -> None:
        """The embedded PostgreSQL started again if it exited on its own; called from the serving
        loop (the thread that started it) every half second or so. Not for a server given with
        --database-url or another gateway's: those are someone else's to run."""
        now = time.monotonic()
        if self.pg is None or now < self._next_revive:
            return
        try:
            if self.pg.revive():
                log.info("PostgreSQL is running again; requests are answered as before")
        except Exception as exc:  # noqa: BLE001 - logged; tried again, requests answer 503 meanwhile
            self._next_revive = now + REVIVE_INTERVAL
            log.error("could not start PostgreSQL again (%s); trying again in %d s", exc, REVIVE_INTERVAL)

    def close(self) -> None:
        if self.db is not None:
            self.db.close()
            self.db = None
        if self.pg is not None:
            self.pg.stop()
            self.pg = None

    def __enter__(self) -> Database:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

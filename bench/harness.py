"""Where a benchmark's data lives: one fresh, migrated database, removed afterwards."""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

from gateway.postgres import EmbeddedPostgres
from store import migrations

ENV = "HOSTFINDER_BENCH_DATABASE_URL"


def add_fsync_option(parser: argparse.ArgumentParser) -> None:
    """``--fsync``/``--no-fsync`` for a benchmark whose figures include note writes: by default
    its private PostgreSQL flushes every commit to disk, as the embedded one of `hostfinder serve`
    does, so a save's figure includes the wait a user's save has."""
    parser.add_argument("--fsync", action=argparse.BooleanOptionalAction, default=True,
                        help="the private PostgreSQL flushes each commit to disk, as `hostfinder serve`'s "
                             "embedded one does (default); --no-fsync runs it as the test suite does "
                             "(no effect with HOSTFINDER_BENCH_DATABASE_URL: that server decides)")


def say_durability(conninfo: str) -> None:
    """Print whether the server measured flushes its commits: a write's figure depends on it."""
    with psycopg.connect(conninfo) as conn:
        fsync, sync = (conn.execute(f"SHOW {name}").fetchone()[0] for name in ("fsync", "synchronous_commit"))
    print(f"PostgreSQL: fsync {fsync}, synchronous_commit {sync}", flush=True)


@contextmanager
def bench_database(name: str, *, durable: bool = False,
                   settings: dict[str, str] | None = None) -> Iterator[str]:
    """The conninfo of a new migrated database ``name``: on the server at $HOSTFINDER_BENCH_DATABASE_URL
    (a role that may create databases) when set, else on a private PostgreSQL in a temp dir under
    /tmp (traversable by the server user when we are root). ``durable`` keeps fsync on, so write
    rates include the commit's flush as in production; otherwise the server runs as the test suite's
    does, and both sides of every ratio share the same setting. ``settings`` are extra server options
    for the private PostgreSQL (e.g. shared_preload_libraries for pg_stat_statements)."""
    server_url = os.environ.get(ENV)
    pg = data_dir = None
    if not server_url:
        data_dir = Path(tempfile.mkdtemp(prefix="hostfinder-bench-pg-", dir="/tmp"))
        options = {} if durable else {"fsync": "off", "synchronous_commit": "off", "full_page_writes": "off"}
        pg = EmbeddedPostgres(data_dir, settings={**options, **(settings or {})})
        server_url = pg.start()
    dbname = f"{name}_{os.getpid()}"
    try:
        with psycopg.connect(server_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
        url = make_conninfo(server_url, dbname=dbname)
        migrations.migrate(url)
        yield url
    finally:
        try:
            with psycopg.connect(server_url, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(dbname)))
        finally:
            if pg is not None:
                pg.stop()
                shutil.rmtree(data_dir, ignore_errors=True)

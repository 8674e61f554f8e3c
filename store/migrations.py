"""Applies sql/NNN_name.sql in order, each in its own transaction, under an advisory lock.

Two gateways starting together both call ``migrate``; the advisory lock makes the second wait and
then find nothing left to do. Applied files are recorded in ``schema_migrations``.
"""
from __future__ import annotations

import logging
import re
from importlib import resources

import psycopg

log = logging.getLogger(__name__)

# An arbitrary constant naming this project's migration lock (pg_advisory_lock takes a bigint).
_LOCK_KEY = 0x486F737446696E64  # "HostFind"
_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


def available() -> list[tuple[int, str, str]]:
    """(number, file name, SQL) for every migration shipped in the sql package, in order."""
    out = []
    for entry in resources.files("sql").iterdir():
        m = _NAME.match(entry.name)
        if m:
            out.append((int(m.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    out.sort()
    numbers = [n for n, _, _ in out]
    if len(set(numbers)) != len(numbers):
        raise RuntimeError(f"two migrations share a number: {sorted(numbers)}")
    return out


def latest_version() -> int:
    files = available()
    return files[-1][0] if files else 0


def applied_numbers(conn: psycopg.Connection) -> set[int]:
    """The numbers of the migrations applied to this database (none for an empty one). Rows as
    tuples or dicts: callers pass the store's connections and bare ones alike."""
    row = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL AS present").fetchone()
    if not (row["present"] if isinstance(row, dict) else row[0]):
        return set()
    return {(r["version"] if isinstance(r, dict) else r[0])
            for r in conn.execute("SELECT version FROM schema_migrations").fetchall()}


def current_version(conn: psycopg.Connection) -> int:
    """The highest applied migration, 0 for an empty database."""
    return max(applied_numbers(conn), default=0)


def missing(conn: psycopg.Connection) -> list[int]:
    """The shipped migrations not applied to this database: a number below the highest applied
    one (a migration added in its area, such as 015 after 070) is missing too."""
    done = applied_numbers(conn)
    return [n for n, _, _ in available() if n not in done]


class MigrationError(Exception):
    """A migration the database refused: one sentence naming it and what to do."""


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def migrate(conninfo: str) -> list[str]:
    """Bring the database at ``conninfo`` up to date; return the names of the files applied."""
    applied: list[str] = []
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        try:
            conn.execute("""CREATE TABLE IF NOT EXISTS schema_migrations (
                                version integer PRIMARY KEY,
                                name text NOT NULL,
                                applied_at timestamptz NOT NULL DEFAULT now())""")
            done = applied_numbers(conn)
            for number, name, sql in available():
                if number in done:
                    continue
                try:
                    with conn.transaction():
                        conn.execute(sql)
                        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                                     (number, name))
                except psycopg.errors.InsufficientPrivilege as exc:
                    raise MigrationError(
                        f"migration {name} needs a privilege the database user lacks "
                        f"({_first_line(exc)}); connect as the database's owner, or have it run "
                        "`hostfinder migrate` once (pg_trgm needs CREATE on the database, or the extension "
                        "created beforehand)") from None
                except psycopg.DatabaseError as exc:
                    if exc.sqlstate is None or exc.sqlstate.startswith("08"):
                        raise  # the connection itself: the caller says so
                    if not isinstance(exc, (psycopg.ProgrammingError, psycopg.IntegrityError, psycopg.DataError)):
                        # A lock timeout, a shutdown, a full disk, a missing extension's files:
                        # nothing about what the database holds.
                        raise MigrationError(
                            f"migration {name} failed and was rolled back ({_first_line(exc)}); nothing of "
                            "it was applied: mend what PostgreSQL says (its log has more) and start again") from None
                    # What the database holds refused the file (a table of that name already there).
                    raise MigrationError(
                        f"migration {name} failed and was rolled back ({_first_line(exc)}); nothing of it "
                        "was applied. The database may hold tables of another program or an older "
                        "Host Finder changed by hand; use an empty database") from None
                log.info("applied migration %s", name)
                applied.append(name)
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    return applied

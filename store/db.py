"""The connection pool and the one way to run a write: ``with db.transaction() as conn``.

Every store write runs inside one transaction together with its provenance row and its NOTIFY,
so a change and its record commit or vanish together. Integrity errors that PostgreSQL raises on
the store's own constraints become store errors here, by constraint name, so that no caller ever
sees a psycopg exception for something a client sent.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

from store.errors import Conflict, Invalid, StoreError

log = logging.getLogger(__name__)

Conn = psycopg.Connection[dict]

# Callbacks to run once the current ``Database.transaction()`` has committed (never on rollback).
_after_commit: ContextVar[list[Callable[[], None]] | None] = ContextVar("hostfinder_after_commit", default=None)


def after_commit(fn: Callable[[], None]) -> None:
    """Run ``fn`` after the enclosing ``Database.transaction()`` commits; outside one, never.
    Used to tell this process's caches about a write the moment it is visible."""
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


def translate_integrity_error(exc: psycopg.errors.IntegrityError) -> StoreError:
    """Name the store error behind a violated constraint; an unregistered one is a generic conflict."""
    diag = exc.diag
    make = _CONSTRAINT_ERRORS.get(diag.constraint_name or "")
    if make is not None:
        return make(diag)
    log.warning("unregistered constraint violated: %s (%s)", diag.constraint_name, diag.message_primary)
    return Conflict(f"the change conflicts with the current state ({diag.message_primary})")


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


def _configure(conn: psycopg.Connection) -> None:
    conn.execute("SET TIME ZONE 'UTC'")
    conn.commit()


class Database:
    """A psycopg pool with the store's conventions: dict rows, UTC, autocommit outside
    ``transaction()``."""

    def __init__(self, conninfo: str, *, min_size: int = 1, max_size: int = 10,
                 name: str = "hostfinder") -> None:
        self.conninfo = conninfo
        self.pool = ConnectionPool(
            conninfo, min_size=min_size, max_size=max_size, open=False, name=name,
            kwargs={"row_factory": dict_row, "autocommit": True}, configure=_configure,
        )

    def open(self, *, timeout: float = 10.0) -> Database:
        """Open the pool and wait for its first connections, so a bad URL fails at start-up."""
        self.pool.open(wait=True, timeout=timeout)
        return self

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Database:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def connection(self) -> Iterator[Conn]:
        """A pooled autocommit connection, for reads that need no transaction."""
        with self.pool.connection() as conn:
            try:
                yield conn
            except (psycopg.DataError, UnicodeEncodeError) as exc:
                raise unstorable(exc) from exc

    @contextmanager
    def transaction(self) -> Iterator[Conn]:
        """One transaction; commits on exit, rolls back on any error. Integrity errors on the
        store's constraints come out as store errors."""
        pending: list[Callable[[], None]] = []
        token = _after_commit.set(pending)
        try:
            with self.pool.connection() as conn:
                try:
                    with conn.transaction():
                        yield conn
                except psycopg.errors.IntegrityError as exc:
                    raise translate_integrity_error(exc) from exc
                except (psycopg.DataError, UnicodeEncodeError) as exc:
                    raise unstorable(exc) from exc
        finally:
            _after_commit.reset(token)
        for fn in pending:
            fn()

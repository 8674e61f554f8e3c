"""Migrations: applied once, in order, even when two gateways start together."""
from __future__ import annotations

import threading

import psycopg
import pytest

from store import migrations
from tests.conftest import create_database, drop_database


@pytest.fixture
def empty_db(pg_server: str):
    url = create_database(pg_server, "template0")
    yield url
    drop_database(pg_server, url)


def test_two_gateways_migrating_at_once_apply_each_file_once(empty_db: str) -> None:
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(migrations.migrate(empty_db))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    names = [name for _, name, _ in migrations.available()]
    # One of them applied everything, the other found nothing left to do.
    assert sorted(results, key=len) == [[], names]
    with psycopg.connect(empty_db) as conn:
        rows = conn.execute("SELECT version, name FROM schema_migrations ORDER BY version").fetchall()
        assert [r[1] for r in rows] == names
        assert migrations.current_version(conn) == migrations.latest_version()


def test_migrating_an_up_to_date_database_does_nothing(db_url: str) -> None:
    assert migrations.migrate(db_url) == []


def test_the_schema_guarantees_what_postgresql_can(db_url: str) -> None:
    """Uniqueness of live display paths, ownership inside one organisation and the enumerations are
    constraints, so no code path can break them."""
    with psycopg.connect(db_url, autocommit=True) as conn:
        org = conn.execute("INSERT INTO organisations (name) VALUES ('A') RETURNING id").fetchone()[0]
        other = conn.execute("INSERT INTO organisations (name) VALUES ('B') RETURNING id").fetchone()[0]
        guild = conn.execute("INSERT INTO guilds (org_id, name) VALUES (%s, 'g') RETURNING id", (org,)).fetchone()[0]
        ins = ("INSERT INTO artifacts (org_id, kind, level, key, display_path, content)"
               " VALUES (%s, 'note', 'org', 'a.md', %s, 'x')")
        conn.execute(ins, (org, f"org/{org}/a.md"))
        with pytest.raises(psycopg.errors.UniqueViolation):
            conn.execute(ins, (org, f"org/{org}/a.md"))
        conn.execute("UPDATE artifacts SET deleted_at = now()")
        conn.execute(ins, (org, f"org/{org}/a.md"))  # a soft-deleted row does not hold the name
        with pytest.raises(psycopg.errors.ForeignKeyViolation):  # an agent in another org's guild
            conn.execute("INSERT INTO agents (org_id, guild_id, name) VALUES (%s, %s, 'x')", (other, guild))
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO artifacts (org_id, kind, level, key, display_path, content)"
                         " VALUES (%s, 'note', 'org', 'a.txt', 'x', 'x')", (org,))
        with pytest.raises(psycopg.errors.CheckViolation):
            conn.execute("INSERT INTO collection_access (collection_id, guild_id, mode) VALUES (1, %s, 'none')", (guild,))

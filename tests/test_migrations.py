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


def test_a_store_from_before_015_keeps_every_note_findable(empty_db: str) -> None:
    """A store at 070 with notes in it, then this version: /api/health's check sees 015 missing
    although its number is below the highest applied; applying it leaves every live note waiting
    for its search vector (note_find computes those meanwhile) until the indexer fills them."""
    from psycopg.rows import dict_row

    from store import search_index
    with psycopg.connect(empty_db, autocommit=True, row_factory=dict_row) as conn:
        conn.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")
        for number, name, text in migrations.available():
            if number != 15:
                with conn.transaction():
                    conn.execute(text)
                    conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (number, name))
        org = conn.execute("INSERT INTO organisations (name) VALUES ('Old') RETURNING id").fetchone()["id"]
        conn.execute("""INSERT INTO artifacts (org_id, kind, level, key, display_path, content)
                        VALUES (%s, 'note', 'org', 'launch-plan.md', %s, 'the rocket leaves in May')""",
                     (org, f"org/{org}/launch-plan.md"))
        assert migrations.missing(conn) == [15]
    assert migrations.migrate(empty_db) == ["015_note_search_deferred.sql"]
    with psycopg.connect(empty_db, autocommit=True, row_factory=dict_row) as conn:
        assert migrations.missing(conn) == []
        # note_find's two arms (store/note_search.py), without an agent's levels.
        find = """SELECT key FROM artifacts a, websearch_to_tsquery('simple', %s) AS t(q)
                   WHERE kind = 'note' AND deleted_at IS NULL
                     AND ((note_search @@ q AND NOT note_search_pending)
                          OR (note_search_pending AND note_vector(key, content) @@ q))"""
        assert conn.execute("SELECT note_search_pending AS p FROM artifacts").fetchone()["p"] is True
        assert [r["key"] for r in conn.execute(find, ("rocket plan",)).fetchall()] == ["launch-plan.md"]
        assert search_index.index_pending(conn) == 1
        assert conn.execute("SELECT note_search_pending AS p FROM artifacts").fetchone()["p"] is False
        assert [r["key"] for r in conn.execute(find, ("rocket plan",)).fetchall()] == ["launch-plan.md"]


def test_a_migration_the_database_refuses_is_named_in_one_sentence(pg_server: str, empty_db: str) -> None:
    """A database holding another program's table of the same name, and a user without the right
    to create pg_trgm: each is the migration's name and what to do, through the command a person
    runs, not a traceback nor 'cannot connect'."""
    import subprocess
    import sys

    from psycopg.conninfo import make_conninfo

    from tests.conftest import REPO

    def migrate(url: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gateway", "migrate", "--database-url", url], cwd=REPO,
                              capture_output=True, text=True, timeout=60)

    with psycopg.connect(empty_db, autocommit=True) as conn:
        conn.execute("CREATE TABLE path_leases (x int)")  # another program's table, named as ours
    r = migrate(empty_db)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert "migration 030_dav.sql failed and was rolled back" in r.stderr and "already exists" in r.stderr
    with psycopg.connect(empty_db) as conn:  # what came before it stays applied, and nothing of it
        assert migrations.current_version(conn) == 26

    limited = create_database(pg_server, "template0")
    try:
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute("DROP ROLE IF EXISTS hf_limited")
            conn.execute("CREATE ROLE hf_limited LOGIN PASSWORD 'limited'")
        with psycopg.connect(limited, autocommit=True) as conn:
            conn.execute("GRANT CREATE ON SCHEMA public TO hf_limited")
        r = migrate(make_conninfo(limited, user="hf_limited", password="limited"))
        assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
        assert "needs a privilege the database user lacks" in r.stderr and "cannot connect" not in r.stderr
    finally:
        drop_database(pg_server, limited)
        with psycopg.connect(pg_server, autocommit=True) as conn:
            conn.execute("DROP ROLE IF EXISTS hf_limited")

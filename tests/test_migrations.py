"""Migrations: applied once, in order, even when two gateways start together."""
from __future__ import annotations

import threading
from collections.abc import Callable

import psycopg
import pytest

from store import migrations, note_search
from store.search_query import websearch_text
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


def _apply(conn: psycopg.Connection, wanted: Callable[[int], bool]) -> None:
    """Make the empty database a store of an earlier version: the migrations ``wanted`` keeps,
    applied and recorded as migrate() does."""
    conn.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                 " applied_at timestamptz NOT NULL DEFAULT now())")
    for number, name, text in migrations.available():
        if wanted(number):
            with conn.transaction():
                conn.execute(text)
                conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (number, name))


def _find(conn: psycopg.Connection, org: int, query: str) -> list[str]:
    """note_find's statement over an organisation's org-level notes, without an agent."""
    params = {"query": websearch_text(query), "org_id": org, "agent_id": None, "guild_id": None,
              "agent": False, "guild": False, "org": True, "limit": 20}
    return sorted(r["key"] for r in conn.execute(note_search.FIND_SQL, params).fetchall())


def test_a_store_from_before_015_keeps_every_note_findable(empty_db: str) -> None:
    """A store at 070 with notes in it, then this version: /api/health's check sees 015 missing
    although its number is below the highest applied; applying it (and 156, which moves the
    vectors out of artifacts) leaves every live note queued for its search vector (note_find
    computes those meanwhile) until the indexer fills them."""
    from psycopg.rows import dict_row

    from store import search_index
    with psycopg.connect(empty_db, autocommit=True, row_factory=dict_row) as conn:
        _apply(conn, lambda number: number != 15 and number < 156)   # (156 moves what 015 made)
        org = conn.execute("INSERT INTO organisations (name) VALUES ('Old') RETURNING id").fetchone()["id"]
        conn.execute("""INSERT INTO artifacts (org_id, kind, level, key, display_path, content)
                        VALUES (%s, 'note', 'org', 'launch-plan.md', %s, 'the rocket leaves in May')""",
                     (org, f"org/{org}/launch-plan.md"))
        assert migrations.missing(conn)[:1] == [15]
    assert migrations.migrate(empty_db)[:1] == ["015_note_search_deferred.sql"]
    with psycopg.connect(empty_db, autocommit=True, row_factory=dict_row) as conn:
        assert migrations.missing(conn) == []
        assert conn.execute("SELECT count(*) AS n FROM note_index_queue").fetchone()["n"] == 1
        assert _find(conn, org, "rocket plan") == ["launch-plan.md"]
        assert search_index.index_pending(conn) == 1
        assert conn.execute("SELECT count(*) AS n FROM note_index_queue").fetchone()["n"] == 0
        assert _find(conn, org, "rocket plan") == ["launch-plan.md"]


def test_vectors_indexed_before_156_move_over_and_stay_current(empty_db: str) -> None:
    """A store at 155: an indexed note keeps its vector (found through the GIN arm, not queued),
    a note still waiting is queued, and a deleted note's vector is left behind."""
    from psycopg.rows import dict_row

    from store import search_index
    with psycopg.connect(empty_db, autocommit=True, row_factory=dict_row) as conn:
        _apply(conn, lambda number: number < 156)
        org = conn.execute("INSERT INTO organisations (name) VALUES ('Old') RETURNING id").fetchone()["id"]
        for key, words in (("indexed.md", "comet tail"), ("waiting.md", "comet dust"), ("gone.md", "comet ice")):
            conn.execute("""INSERT INTO artifacts (org_id, kind, level, key, display_path, content)
                            VALUES (%s, 'note', 'org', %s, %s, %s)""", (org, key, f"org/{org}/{key}", words))
        # What the indexer of 155 stored for two of them.
        conn.execute("UPDATE artifacts SET note_search = note_vector(key, content), note_search_version = version"
                     " WHERE key IN ('indexed.md', 'gone.md')")
        conn.execute("UPDATE artifacts SET deleted_at = now() WHERE key = 'gone.md'")
    assert migrations.migrate(empty_db)[:1] == ["156_note_vectors_unlogged.sql"]
    with psycopg.connect(empty_db, autocommit=True, row_factory=dict_row) as conn:
        queued = conn.execute("SELECT a.key FROM note_index_queue q JOIN artifacts a ON a.id = q.note_id").fetchall()
        assert [r["key"] for r in queued] == ["waiting.md"]
        vectors = "SELECT count(*) AS n FROM note_vectors"
        assert conn.execute(vectors).fetchone()["n"] == 1   # indexed.md's; gone.md's stayed behind
        assert _find(conn, org, "comet") == ["indexed.md", "waiting.md"]
        assert search_index.index_pending(conn) == 1
        assert conn.execute(vectors).fetchone()["n"] == 2
        assert _find(conn, org, "comet") == ["indexed.md", "waiting.md"]


def test_notes_indexed_before_120_are_found_by_their_file_name(empty_db: str) -> None:
    """A note indexed with sql/015's vector (its key as words only) is found by its file name once
    sql/120 has run: the migration computes the vectors of the notes already indexed (and 156
    moves them out of artifacts as they are)."""
    from psycopg.rows import dict_row
    with psycopg.connect(empty_db, autocommit=True, row_factory=dict_row) as conn:
        _apply(conn, lambda number: number < 120)
        org = conn.execute("INSERT INTO organisations (name) VALUES ('Old') RETURNING id").fetchone()["id"]
        conn.execute("""INSERT INTO artifacts (org_id, kind, level, key, display_path, content)
                        VALUES (%s, 'note', 'org', 'style-guide.md', %s, 'write short sentences')""",
                     (org, f"org/{org}/style-guide.md"))
        conn.execute("UPDATE artifacts SET note_search = note_vector(key, content), note_search_version = version")

        before = conn.execute("SELECT note_search @@ websearch_to_tsquery('simple', 'style-guide.md') AS hit"
                              " FROM artifacts").fetchone()["hit"]
        assert before is False   # as a store indexed before sql/120 answered
        migrations.migrate(empty_db)
        assert conn.execute("SELECT count(*) AS n FROM note_index_queue").fetchone()["n"] == 0
        for query in ("style-guide.md", "style-guide", "style guide"):
            assert _find(conn, org, query) == ["style-guide.md"], query


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

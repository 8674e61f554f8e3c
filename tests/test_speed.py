"""Issue 14: a request's cost does not grow with the store, and the owner cap stays exact.

Cost is measured as PostgreSQL buffers touched (EXPLAIN ANALYZE BUFFERS of the statement the store
runs), which is deterministic on a shared machine where times are not: the same request must
touch about the same pages whether the owner or the organisation holds ten notes or thousands."""
from __future__ import annotations

import json
import threading
from typing import Any

import psycopg
import pytest
from psycopg.rows import dict_row

from tests.conftest import insert_notes, owner_count_held, wait_for_lock_waiters
from store import admin, locks, notes, provenance, search_index, storage
from store.families import NOTES
from store.layout import folder_of
from store.access import SYSTEM
from store.db import Database
from store.errors import LimitReached


def _buffers(db: Database, statement: str, params: dict[str, Any], *, setup: str | None = None,
             before: tuple[str, dict[str, Any]] | None = None, local: bool = False) -> int:
    """Shared buffers (hit + read) the statement touches, run for real and rolled back.
    ``setup``: run first on the same connection (a temporary table the statement needs);
    ``before``: a statement and its parameters run first in the same transaction (what fills that
    table); ``local``: count the temporary tables' buffers too."""
    with db.connection() as conn:
        if setup is not None:
            conn.execute(setup)
        conn.execute("BEGIN")
        try:
            if before is not None:
                conn.execute(*before)
            plan = conn.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + statement, params).fetchone()
        finally:
            conn.execute("ROLLBACK")
    top = (plan["QUERY PLAN"] if isinstance(plan["QUERY PLAN"], list) else json.loads(plan["QUERY PLAN"]))[0]["Plan"]
    kinds = ("Shared", "Local") if local else ("Shared",)
    return sum(top[f"{kind} Hit Blocks"] + top[f"{kind} Read Blocks"] for kind in kinds)  # inclusive of sub-plans


def _settle(db: Database) -> None:
    """What autovacuum does after a bulk load: statistics, and the dead versions of the counter
    rows that a 9 000-row seed in one statement leaves (one per row, as every create leaves one,
    which HOT pruning and vacuum remove)."""
    with db.connection() as conn:
        conn.execute("VACUUM ANALYZE owner_counts")
        conn.execute("ANALYZE artifacts")


def _live(db: Database, org: int, level: str, owner: int) -> int:
    with db.connection() as conn:
        row = conn.execute("SELECT live FROM owner_counts WHERE org_id = %s AND level = %s AND owner_id = %s",
                           (org, level, owner)).fetchone()
    return row["live"] if row else 0


def _counted(db: Database, org: int, level: str, owner: int | None) -> int:
    guild, agent = (owner, None) if level == "guild" else (None, owner) if level == "agent" else (None, None)
    with db.connection() as conn:
        return conn.execute(f"SELECT count(*) AS n FROM artifacts WHERE org_id = %(org_id)s AND "
                            f"{notes.owner_where(level)} AND deleted_at IS NULL AND kind <> 'object'",
                            {"org_id": org, "guild_id": guild, "agent_id": agent}).fetchone()["n"]


def _create_params(org: int, guild: int, key: str) -> dict[str, Any]:
    return {"org_id": org, "kind": "note", "level": "guild", "guild_id": guild, "agent_id": None, "owner": guild,
            "key": key, "path": f"org/{org}/guilds/{guild}/{key}", "content": "x", "json": None, "by": "t",
            "cap": notes.OWNER_CAP, "may_update": True, "may_create": True, "if_version": None,
            "hidden_for": 1, "honour_leases": True, **locks.lease_params(f"org/{org}/guilds/{guild}/{key}"),
            **provenance.actor_params(SYSTEM)}


def test_a_create_touches_the_same_pages_in_an_empty_and_a_full_folder(db, boot) -> None:
    org = boot["org_id"]
    empty = admin.create_guild(db, org_id=org, name="empty")["id"]
    full = admin.create_guild(db, org_id=org, name="full")["id"]
    insert_notes(db, org, "guild", empty, ["x"])
    insert_notes(db, org, "guild", full, ["x"] * 9_000)
    _settle(db)
    # The note write (update, else create under the cap), as a plain save runs it (checking the
    # writer's rename-away hiding itself) and as the full path does, and the bare capped insert
    # (memory.md).
    for statement in (storage._update_sql("note", guarded=True), storage._update_sql("note"),
                      storage._INSERT_UNDER_CAP.format(columns=storage.NOTE_COLUMNS)):
        first = _buffers(db, statement, _create_params(org, empty, "new.md"))
        nine_thousandth = _buffers(db, statement, _create_params(org, full, "new.md"))
        # Counting 9 000 live rows read well over a hundred pages; the counter row reads one. What
        # is left is the indexes' depth (one more level at 9 000 entries), not the folder's size.
        assert nine_thousandth <= first + 12, (first, nine_thousandth)


def test_the_indexers_batch_reads_the_same_pages_deep_into_a_long_queue(db, boot) -> None:
    """After a bulk load or a crash every note waits for its search vector. The batch joined the
    whole queue to the notes and took its first 50: PostgreSQL walked the notes' primary key from
    the first id up to the queue's head, so each batch cost more the further the indexer had got
    (73 000 buffers a batch at 100 000 notes in bench.scale, and the drain quadratic). The batch
    takes the queue's head first now, and reads its 50 notes by id."""
    org, guild = boot["org_id"], boot["guild_id"]
    insert_notes(db, org, "guild", guild, [f"word{i} other words" for i in range(6_000)])
    params = {"batch": search_index.BATCH, "bytes": search_index.BATCH_BYTES}

    def batch_buffers() -> int:
        return _buffers(db, search_index._BATCH_SQL, params, setup=search_index._BATCH_TABLE)

    with db.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM note_index_queue").fetchone()["n"] == 6_000
        conn.execute("ANALYZE artifacts, note_index_queue")
    head = batch_buffers()
    with db.connection() as conn:
        # 5 000 indexed: they leave the queue, and autovacuum takes their dead rows away.
        conn.execute("DELETE FROM note_index_queue WHERE note_id IN"
                     " (SELECT note_id FROM note_index_queue ORDER BY note_id LIMIT 5000)")
        conn.execute("VACUUM ANALYZE note_index_queue")
    deep = batch_buffers()
    # (Walking the 5 000 indexed notes' ids to the queue's head read 134 pages more: 22 and 156.)
    assert deep <= head + 12, (head, deep)


def _store_buffers(db: Database) -> int:
    """Buffers (shared and local) the indexer's store step touches for the batch at the queue's
    head, run for real and rolled back."""
    batch = (search_index._BATCH_SQL, {"batch": search_index.BATCH, "bytes": search_index.BATCH_BYTES})
    return _buffers(db, search_index._STORE_SQL, {}, setup=search_index._BATCH_TABLE, before=batch, local=True)


def test_the_indexers_store_reads_the_same_pages_whatever_the_statistics_say_of_the_queue(db, boot) -> None:
    """The queue is empty most of the time, and its statistics are taken then (by autovacuum, and
    by the indexer's own ANALYZE after a bulk pass): PostgreSQL then believes a queue of thousands
    holds one row. The store step joined the queue to the batch, and with that belief walked the
    whole queue once for each of the batch's notes: 416 000 buffers and 0.2 s a batch with 4 000
    notes queued, a drain quadratic in the queue (after a crash, every note is queued; a
    throwaway script, issue 14). Each of its steps now reads the batch's rows by key."""
    org, guild = boot["org_id"], boot["guild_id"]
    insert_notes(db, org, "guild", guild, [f"word{i} other words" for i in range(4_000)])
    with db.connection() as conn:
        assert search_index.index_pending(conn) == 4_000   # (and, a bulk pass, ANALYZE: the queue empty)
        conn.execute("UPDATE artifacts SET version = version + 1 WHERE id IN"
                     " (SELECT id FROM artifacts WHERE kind = 'note' ORDER BY id LIMIT 50)")
    shallow = _store_buffers(db)
    with db.connection() as conn:
        conn.execute("UPDATE artifacts SET version = version + 1 WHERE kind = 'note'")
        assert conn.execute("SELECT count(*) AS n FROM note_index_queue").fetchone()["n"] == 4_000
    deep = _store_buffers(db)
    assert deep <= shallow + 20, (shallow, deep)
    with db.connection() as conn:
        assert search_index.index_pending(conn) == 4_000
        assert conn.execute("SELECT count(*) AS n FROM note_index_queue").fetchone()["n"] == 0


def test_listing_a_folder_reads_nothing_of_the_other_folders(db, boot) -> None:
    org, guild = boot["org_id"], boot["guild_id"]
    insert_notes(db, org, "guild", guild, ["x"] * 10)
    statement = ("SELECT key FROM artifacts WHERE org_id = %(org_id)s AND " + notes.owner_where("guild")
                 + " AND kind = 'note' AND deleted_at IS NULL ORDER BY key")
    params = {"org_id": org, "guild_id": guild, "agent_id": None}
    _settle(db)
    alone = _buffers(db, statement, params)
    other = admin.create_guild(db, org_id=org, name="other")["id"]
    insert_notes(db, org, "guild", other, ["x"] * 8_000)
    insert_notes(db, org, "org", None, ["x"] * 2_000)
    _settle(db)
    crowded = _buffers(db, statement, params)
    assert crowded <= alone + 4, (alone, crowded)
    # and the tree lists exactly that folder
    with db.connection() as conn:
        rows = NOTES.list(conn, folder_of(["org", str(org), "guilds", str(guild)]))
    assert [r["name"] for r in rows] == sorted(f"n{i}.md" for i in range(1, 11))


def test_the_owner_count_follows_creates_deletes_moves_and_cascades(db, boot) -> None:
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    insert_notes(db, org, "guild", guild, ["x"] * 5)
    with db.transaction() as conn:
        notes.write_note(conn, org, "guild", guild, "a.md", "x", SYSTEM)
        notes.write_note(conn, org, "guild", guild, "a.md", "y", SYSTEM)  # an update counts nothing
        notes.write_note(conn, org, "org", None, "o.md", "x", SYSTEM)
    assert _live(db, org, "guild", guild) == 6 == _counted(db, org, "guild", guild)
    with db.transaction() as conn:
        notes.delete_note(conn, org, "guild", guild, "n1.md", SYSTEM)
        notes.move_note(conn, (org, "guild", guild, "n2.md"), (org, "agent", agent, "n2.md"), SYSTEM, replace=False)
        notes.move_note(conn, (org, "guild", guild, "n3.md"), (org, "guild", guild, "m3.md"), SYSTEM, replace=False)
    assert _live(db, org, "guild", guild) == 4 == _counted(db, org, "guild", guild)
    assert _live(db, org, "agent", agent) == _counted(db, org, "agent", agent) >= 1
    assert _live(db, org, "org", 0) == 1 == _counted(db, org, "org", None)
    # A rolled-back create leaves the count as it was.
    with pytest.raises(RuntimeError), db.transaction() as conn:
        notes.write_note(conn, org, "guild", guild, "gone.md", "x", SYSTEM)
        raise RuntimeError
    assert _live(db, org, "guild", guild) == 4
    # Deleting the guild removes its notes by cascade, and the count with them.
    with db.transaction() as conn:
        conn.execute("DELETE FROM guilds WHERE id = %s", (guild,))
    assert _live(db, org, "guild", guild) == 0


def test_concurrent_creates_at_the_cap_stop_exactly_at_it(db, boot) -> None:
    org, guild = boot["org_id"], boot["guild_id"]
    insert_notes(db, org, "guild", guild, ["x"] * (notes.OWNER_CAP - 3))
    outcomes: list[str] = []
    gate = threading.Barrier(12)

    def create(i: int) -> None:
        gate.wait()
        try:
            with db.transaction() as conn:
                notes.write_note(conn, org, "guild", guild, f"race{i}.md", "x", SYSTEM)
            outcomes.append("created")
        except LimitReached as exc:
            outcomes.append(exc.message)

    threads = [threading.Thread(target=create, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert outcomes.count("created") == 3
    refused = [o for o in outcomes if o != "created"]
    assert len(refused) == 9 and all("already holds 10,000 live files, the limit is 10,000 per owner" in o
                                     for o in refused)
    assert _counted(db, org, "guild", guild) == notes.OWNER_CAP == _live(db, org, "guild", guild)


class _Counting(psycopg.Connection):
    """Counts the statements (round trips) run on it."""

    statements = 0

    def execute(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        _Counting.statements += 1
        return super().execute(*args, **kwargs)


def test_a_note_write_is_one_statement_whether_it_creates_or_updates(db_url: str, boot) -> None:
    """The write itself (update, else create under the cap), its provenance row and its event: one
    round trip, besides BEGIN and COMMIT."""
    org, guild = boot["org_id"], boot["guild_id"]
    with _Counting.connect(db_url, row_factory=dict_row, autocommit=True) as conn:
        for key, expected_version in (("a.md", 1), ("a.md", 2), ("b.md", 1)):
            before = _Counting.statements
            with conn.transaction():
                row = notes.write_note(conn, org, "guild", guild, key, "text", SYSTEM)
            assert row["version"] == expected_version
            assert _Counting.statements - before == 1, key
        changes = conn.execute("SELECT display_path, operation, version, actor_name FROM file_changes ORDER BY id").fetchall()
        assert [(c["display_path"].rsplit("/", 1)[1], c["operation"], c["version"]) for c in changes] == [
            ("a.md", "create", 1), ("a.md", "update", 2), ("b.md", "create", 1)]
        assert {c["actor_name"] for c in changes} == {SYSTEM.name}
        # A create refused at the cap is one statement, and says why.
        conn.execute("UPDATE owner_counts SET live = %s WHERE org_id = %s AND level = 'guild' AND owner_id = %s",
                     (notes.OWNER_CAP, org, guild))
        before = _Counting.statements
        with pytest.raises(LimitReached, match="already holds 10,000 live files"), conn.transaction():
            notes.write_note(conn, org, "guild", guild, "c.md", "text", SYSTEM)
        assert _Counting.statements - before == 1
        with conn.transaction():  # an update at the cap is still fine
            assert notes.write_note(conn, org, "guild", guild, "a.md", "more", SYSTEM)["version"] == 3


def test_a_note_save_adds_nothing_to_the_tables_indexes(db, boot) -> None:
    """A save changes no column an index reads, and the page keeps room for the new version: the
    update is HOT (heap-only), so the note's indexes get no new entry per save (sql/157). Until
    then the records' index read updated_at, and no note save was HOT."""
    org, guild = boot["org_id"], boot["guild_id"]
    insert_notes(db, org, "guild", guild, [f"note {i}\n" * 40 for i in range(300)])
    with db.transaction() as conn:
        for i in range(1, 301, 15):
            notes.write_note(conn, org, "guild", guild, f"n{i}.md", f"saved again {i}\n" * 40, SYSTEM)
        counts = conn.execute("SELECT pg_stat_get_xact_tuples_updated('artifacts'::regclass) AS updated,"
                              " pg_stat_get_xact_tuples_hot_updated('artifacts'::regclass) AS hot").fetchone()
    assert counts == {"updated": 20, "hot": 20}


def test_moves_between_two_owners_in_opposite_directions_at_once_both_succeed(db, boot) -> None:
    """Each move locks both owners' counter rows in one order before changing either count, so
    two moves crossing each other queue rather than deadlock."""
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    with db.transaction() as conn:
        notes.write_note(conn, org, "guild", guild, "to-agent.md", "x", SYSTEM)
        notes.write_note(conn, org, "agent", agent, "to-guild.md", "y", SYSTEM)
    errors: list[BaseException] = []
    gate = threading.Barrier(3)

    def move(src: tuple, dst: tuple) -> None:
        gate.wait()
        try:
            with db.transaction() as conn:
                notes.move_note(conn, src, dst, SYSTEM, replace=False)
        except BaseException as exc:  # a deadlock would land here
            errors.append(exc)

    threads = [threading.Thread(target=move, args=((org, "guild", guild, "to-agent.md"),
                                                   (org, "agent", agent, "to-agent.md"))),
               threading.Thread(target=move, args=((org, "agent", agent, "to-guild.md"),
                                                   (org, "guild", guild, "to-guild.md")))]
    # Hold the agent's counter row so that both moves are inside their transactions at once.
    with owner_count_held(db, org, "agent", agent):
        for t in threads:
            t.start()
        gate.wait()
        wait_for_lock_waiters(db.conninfo, 2)  # both moves queue inside their transactions
    for t in threads:
        t.join(30)
    assert errors == []
    with db.connection() as conn:
        paths = {r["display_path"] for r in conn.execute(
            "SELECT display_path FROM artifacts WHERE org_id = %s AND deleted_at IS NULL AND kind = 'note'", (org,))}
    assert {f"org/{org}/agents/{agent}/to-agent.md", f"org/{org}/guilds/{guild}/to-guild.md"} <= paths
    assert _live(db, org, "guild", guild) == _counted(db, org, "guild", guild)
    assert _live(db, org, "agent", agent) == _counted(db, org, "agent", agent)


def test_a_save_runs_no_statement_psycopg_must_parse_again(db, boot, monkeypatch) -> None:
    """psycopg keeps the parse of a statement of at most 4 096 characters and 50 parameters and
    parses any longer one again on every execution (64 µs of every WebDAV PUT and mount save, when
    the save statement was 4 219 characters as written): the Host tree's saves, guarded as the
    WebDAV provider, the mount and the web app run them, and an agent's note write stay within it."""
    from psycopg import _queries   # the uncached parse is reached only for statements too long to keep
    from store.host import HostTree
    from store.access import Door
    parsed_again: list[int] = []
    uncached = _queries._query2pg_nocache

    def counting(query: bytes, encoding: str) -> Any:
        parsed_again.append(len(query))
        return uncached(query, encoding)
    monkeypatch.setattr(_queries, "_query2pg_nocache", counting)
    principal = Door(db).basic(boot["email"], boot["password"])
    folder = f"org/{boot['org_id']}/guilds/{boot['guild_id']}"
    for honour_leases in (False, True):
        tree = HostTree(db, principal, honour_leases=honour_leases)
        tree.put(f"{folder}/saved.md", b"first")      # a create
        tree.put(f"{folder}/saved.md", b"second")     # an overwrite
    with db.transaction() as conn:
        notes.write_note(conn, boot["org_id"], "guild", boot["guild_id"], "agent.md", "by an agent", SYSTEM)
    assert parsed_again == []

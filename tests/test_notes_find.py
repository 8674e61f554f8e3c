"""note_find: ranking, levels, grants, limits, what never appears, and the index plan."""
from __future__ import annotations

import random
import re
import time

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from api.errors import status_of
from store import admin, memory, note_search, notes, scripts, search_index, tools
from store.access import SYSTEM, Principal
from store.agents import load_agent
from store.errors import StoreError
from tests.conftest import insert_notes


@pytest.fixture
def find(db, boot):
    principal = Principal("service", None, "service", frozenset({boot["org_id"]}))

    def run(**args):
        try:
            return 200, tools.call(db, principal, boot["agent_id"], "note_find", args)
        except StoreError as exc:
            return status_of(exc), {"error": exc.message, "problems": exc.problems}
    return run


def seed(db, boot) -> None:
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    with db.transaction() as conn:
        notes.write_note(conn, org, "agent", agent, "pricing.md", "Pricing plan: pricing pricing for launch", SYSTEM)
        notes.write_note(conn, org, "guild", guild, "launch-plan.md", "The launch date moved to May", SYSTEM)
        notes.write_note(conn, org, "org", None, "handbook.md", "Pricing is set by finance", SYSTEM)
        notes.write_note(conn, org, "agent", agent, "gone.md", "pricing that was deleted", SYSTEM)
        notes.delete_note(conn, org, "agent", agent, "gone.md", SYSTEM)
        memory.write_memory(conn, org, agent, "pricing in memory", SYSTEM, source="agent")
        scripts.write_script(conn, org, agent, "pricing.py", "# pricing script", SYSTEM)


def test_finds_ranked_hits_with_snippets_over_readable_levels(db, boot, find) -> None:
    seed(db, boot)
    status, body = find(query="pricing")
    assert status == 200
    hits = body["notes"]
    org, agent = boot["org_id"], boot["agent_id"]
    # deleted notes, memory and scripts never appear; the densest match ranks first
    assert [h["display_path"] for h in hits] == [f"org/{org}/agents/{agent}/pricing.md", f"org/{org}/handbook.md"]
    assert hits[0]["snippet"].startswith("**Pricing** plan")
    assert set(hits[0]) == {"display_path", "level", "key", "snippet", "version", "updated_at"}
    # the key is searchable too (hyphens split words), and websearch grammar works
    assert [h["key"] for h in find(query="plan -pricing")[1]["notes"]] == ["launch-plan.md"]
    assert [h["key"] for h in find(query='"launch date"')[1]["notes"]] == ["launch-plan.md"]
    assert len(find(query="finance OR May")[1]["notes"]) == 2
    assert [h["level"] for h in find(query="pricing", level="org")[1]["notes"]] == ["org"]
    # read_org off: organisation notes drop out of the search, and asking for them is refused
    admin.set_agent(db, agent, read_org=False)
    assert [h["level"] for h in find(query="pricing")[1]["notes"]] == ["agent"]
    status, body = find(query="pricing", level="org")
    assert status == 403 and "read_org" in body["error"]


def test_limit_default_maximum_and_bad_arguments(db, boot, find) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    insert_notes(db, org, "agent", agent, ["common word"] * 120)
    assert len(find(query="common")[1]["notes"]) == 20
    assert len(find(query="common", limit=100)[1]["notes"]) == 100
    status, body = find(query="  ", level="team", limit=101)
    assert status == 422
    assert body["problems"] == [
        'query: give one or more words to search for, such as pricing OR "launch plan"',
        'level: level "team" is not one of agent, guild, org; leave it out to search every level this agent reads',
        "limit: 101 is outside 1..100; the default is 20"]


def test_note_find_over_10000_notes_answers_from_the_gin_index(db, boot) -> None:
    org, agent, guild = boot["org_id"], boot["agent_id"], boot["guild_id"]
    insert_notes(db, org, "guild", guild,
                 [f"note number w{i} about topic{i % 50} and shared words" for i in range(1, 10_001)])
    assert _index(db) >= 10_000
    with db.connection() as conn:
        conn.execute("ANALYZE artifacts")
        agent_row = load_agent(conn, agent, {org})
        params = note_search.find_params(agent_row, "topic7 w4007", levels=["agent", "guild", "org"], limit=20)
        plan = "\n".join(r["QUERY PLAN"] for r in conn.execute("EXPLAIN (ANALYZE, COSTS OFF) " + note_search.FIND_SQL,
                                                               params).fetchall())
        hits = note_search.find_notes(conn, agent_row, "topic7 w4007", levels=["agent", "guild", "org"])
    assert re.search(r"Bitmap Index Scan on note_vectors_search\s", plan), plan   # the GIN arm
    # (The arm for a store whose vectors a crash took reads every note, and runs only then.)
    scans = [line for line in plan.splitlines() if "Seq Scan on artifacts" in line]
    assert all(line.endswith("(never executed)") for line in scans), plan
    assert [h["key"] for h in hits] == ["n4007.md"]


def _index(db) -> int:
    """What the gateway's indexer does moments after a write."""
    with db.connection() as conn:
        return search_index.index_pending(conn)


def _found(conn, agent_row, query: str) -> list[tuple[str, float]]:
    return [(h["key"], h["rank"]) for h in note_search.find_notes(conn, agent_row, query, levels=["agent", "guild", "org"])]


def _pending(conn, path: str) -> bool:
    """The live note at ``path`` waits in the indexer's queue (sql/156)."""
    return conn.execute("""SELECT EXISTS (SELECT FROM note_index_queue q JOIN artifacts a ON a.id = q.note_id
                                           WHERE a.display_path = %s AND a.deleted_at IS NULL) AS queued""",
                        (path,)).fetchone()["queued"]


def _queued(conn) -> int:
    return conn.execute("SELECT count(*) AS n FROM note_index_queue").fetchone()["n"]


def test_a_saved_note_is_found_by_its_new_words_at_once_and_never_by_its_old_ones(db, boot) -> None:
    """A note's vector is filled after its save (store/search_index.py); note_find answers the same
    before and after, with the same rank."""
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    path = f"org/{org}/guilds/{guild}/fresh-idea.md"
    with db.transaction() as conn:   # the indexer cannot see this transaction's write: surely pending
        agent_row = load_agent(conn, agent, {org})
        notes.write_note(conn, org, "guild", guild, "fresh-idea.md", "alpha alpha words", SYSTEM)
        assert _pending(conn, path)
        before = _found(conn, agent_row, "alpha")
        assert [k for k, _ in before] == ["fresh-idea.md"]
        assert [k for k, _ in _found(conn, agent_row, "idea")] == ["fresh-idea.md"]   # its name's words too
    _index(db)
    with db.transaction() as conn:
        assert not _pending(conn, path)
        assert _found(conn, agent_row, "alpha") == before
        notes.write_note(conn, org, "guild", guild, "fresh-idea.md", "beta words", SYSTEM)
        assert _pending(conn, path)
        assert _found(conn, agent_row, "alpha") == []
        assert [k for k, _ in _found(conn, agent_row, "beta")] == ["fresh-idea.md"]
        notes.move_note(conn, (org, "guild", guild, "fresh-idea.md"), (org, "guild", guild, "renamed-plan.md"),
                        SYSTEM, replace=False)
        assert _found(conn, agent_row, "idea") == []
        assert [k for k, _ in _found(conn, agent_row, "renamed beta")] == ["renamed-plan.md"]
    _index(db)
    with db.transaction() as conn:
        assert not _pending(conn, path.replace("fresh-idea", "renamed-plan"))
        assert _found(conn, agent_row, "alpha") == [] and _found(conn, agent_row, "idea") == []
        assert [k for k, _ in _found(conn, agent_row, "renamed beta")] == ["renamed-plan.md"]


def test_the_gateway_indexes_what_any_writer_saved(db, boot, server) -> None:
    """The gateway's indexer picks up notes written elsewhere (here: straight into the table, as
    a bulk import or another process would) without being told."""
    org, guild = boot["org_id"], boot["guild_id"]
    insert_notes(db, org, "guild", guild, [f"imported note {i}" for i in range(1, 201)])
    deadline = time.monotonic() + 15
    while True:
        with db.connection() as conn:
            left = _queued(conn)
        if left == 0:
            break
        assert time.monotonic() < deadline, f"{left} notes still wait for their search vector"
        time.sleep(0.2)


def test_the_indexers_commits_do_not_wait_for_the_disk(db, boot) -> None:
    """A vector is derived data: the indexer's connection commits asynchronously, so its flushes
    do not queue with the saves' (a crash leaves those notes pending, to be computed again), even
    on a server whose commits wait (the suite's server does not wait: asked for here)."""
    insert_notes(db, boot["org_id"], "guild", boot["guild_id"], ["a note waiting for its vector"])
    waiting = make_conninfo(db.conninfo, options="-c synchronous_commit=on")
    with psycopg.connect(waiting) as plain:
        assert plain.execute("SHOW synchronous_commit").fetchone()[0] == "on"
    with search_index.connect(waiting) as conn:
        assert conn.execute("SHOW synchronous_commit").fetchone()["synchronous_commit"] == "off"
        assert search_index.index_pending(conn) == 1
        assert _queued(conn) == 0


def test_the_indexer_adds_notes_to_the_index_in_one_sweep_and_writes_no_wal(db, boot) -> None:
    """Each word of a note entered the GIN index on its own, rewriting that word's posting list:
    in an index of a thousand notes of prose-like text (a few words in most notes, most words in
    few), about 90 KB of WAL a note, which the next save's commit then had to flush. The entries
    now wait in the index's pending list and a pass merges them in one sweep (sql/155,
    search_index._MERGE_SQL), so once the pass is done no entry is left pending for note_find to
    scan; and the vectors' tables are unlogged (sql/156): 22 KB of WAL a note became a few bytes
    of commit records, which no save's flush waits for."""
    rng = random.Random(14)
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7)) for _ in range(5000)]
    zipf = [1 / rank for rank in range(1, len(vocabulary) + 1)]
    texts = [" ".join(rng.choices(vocabulary, zipf, k=400)) for _ in range(1040)]
    insert_notes(db, boot["org_id"], "guild", boot["guild_id"], texts[:1000])
    with db.connection() as conn:
        assert search_index.index_pending(conn) == 1000
    insert_notes(db, boot["org_id"], "agent", boot["agent_id"], texts[1000:])
    with db.connection() as conn:
        before = conn.execute("SELECT pg_current_wal_insert_lsn() AS at").fetchone()["at"]
        assert search_index.index_pending(conn) == 40
        wal = conn.execute("SELECT pg_current_wal_insert_lsn() - %s::pg_lsn AS bytes", (before,)).fetchone()["bytes"]
        left = conn.execute("SELECT gin_clean_pending_list('note_vectors_search'::regclass) AS pages").fetchone()
        agent_row = load_agent(conn, boot["agent_id"], {boot["org_id"]})
        word = texts[1020].split()[-1]
        found = [h["key"] for h in note_search.find_notes(conn, agent_row, word, levels=["agent"], limit=50)]
    assert left["pages"] == 0, "the pass left entries in the pending list"
    assert wal / 40 < 500, f"{wal / 40:.0f} bytes of WAL a note"
    assert "n21.md" in found


def test_an_indexer_that_may_not_merge_the_pending_list_still_indexes(db, boot, caplog) -> None:
    """Only the index's owner may merge its pending list: a gateway whose role does not own the
    tables (another role ran the migrations) indexes all the same, says once that the merge is
    left to PostgreSQL, and no pass fails over it."""
    with db.connection() as conn:
        conn.execute("DROP ROLE IF EXISTS hf_indexer_only")
        conn.execute("CREATE ROLE hf_indexer_only LOGIN")
        conn.execute("GRANT SELECT, UPDATE ON artifacts TO hf_indexer_only")   # (UPDATE: FOR SHARE)
        conn.execute("GRANT SELECT, INSERT, UPDATE, DELETE ON note_vectors, note_index_queue, note_index_intact"
                     " TO hf_indexer_only")
    try:
        insert_notes(db, boot["org_id"], "guild", boot["guild_id"], ["first words", "second words"])
        with search_index.connect(make_conninfo(db.conninfo, user="hf_indexer_only")) as conn:
            with caplog.at_level("INFO", logger="store.search_index"):
                assert search_index.index_pending(conn) == 2
                insert_notes(db, boot["org_id"], "agent", boot["agent_id"], ["third words"])
                assert search_index.index_pending(conn) == 1
        said = [r.getMessage() for r in caplog.records if "pending list" in r.getMessage()]
        assert len(said) == 1 and "left to PostgreSQL" in said[0], said
        with db.connection() as conn:
            assert _queued(conn) == 0
    finally:
        search_index._merge_refused = False
        with db.connection() as conn:
            conn.execute("DROP OWNED BY hf_indexer_only")
            conn.execute("DROP ROLE hf_indexer_only")


def test_the_indexer_takes_big_notes_a_few_at_a_time_and_never_stalls(db, boot) -> None:
    """A batch stops at about 1 MB of notes, and a note PostgreSQL cannot build a vector for is
    passed over, not retried forever."""
    org, guild = boot["org_id"], boot["guild_id"]
    insert_notes(db, org, "guild", guild, ["word " * 50_000] * 9)   # 250 KB each
    with db.connection() as conn:
        conn.execute(search_index._BATCH_TABLE)
        with conn.transaction():
            first = conn.execute(search_index._BATCH_SQL, {"batch": 50, "bytes": search_index.BATCH_BYTES}).rowcount
        assert first == 4   # 1 MB of them
        assert search_index.index_pending(conn) == 9
    # Written around the cap (as a bulk import could): a vector over to_tsvector's 1 MB limit.
    insert_notes(db, org, "agent", boot["agent_id"],
                 ["fine words", " ".join(f"w{i}" for i in range(300_000)), "more fine words"])
    with db.connection() as conn:
        assert search_index.index_pending(conn) == 3
        rows = conn.execute("""SELECT a.key, v.vector IS NULL AS empty, q.note_id IS NOT NULL AS queued
                                 FROM artifacts a JOIN note_vectors v ON v.note_id = a.id AND v.version = a.version
                                 LEFT JOIN note_index_queue q ON q.note_id = a.id
                                WHERE a.agent_id = %s AND a.kind = 'note' ORDER BY a.key""",
                            (boot["agent_id"],)).fetchall()
    assert [(r["key"], r["empty"], r["queued"]) for r in rows] == [
        ("n1.md", False, False), ("n2.md", True, False), ("n3.md", False, False)]


def test_the_indexer_waits_for_no_row_a_write_holds(db, boot) -> None:
    """A transaction that writes two notes (a move over a note) holds both rows; the indexer
    storing a batch that holds them too must not wait for either, or the two could deadlock and
    PostgreSQL end the person's transaction. It leaves a held row for a later pass."""
    org, guild = boot["org_id"], boot["guild_id"]
    with db.transaction() as conn:
        for key in ("held.md", "free.md"):
            notes.write_note(conn, org, "guild", guild, key, f"words of {key}", SYSTEM)
    held = f"org/{org}/guilds/{guild}/held.md"
    with db.transaction() as writer:
        writer.execute("SELECT id FROM artifacts WHERE display_path = %s FOR UPDATE", (held,))
        started = time.monotonic()
        with db.connection() as conn:
            conn.execute("SET lock_timeout = '5s'")
            assert search_index.index_pending(conn) == 1
            assert _pending(conn, held) and not _pending(conn, f"org/{org}/guilds/{guild}/free.md")
        assert time.monotonic() - started < 2
    assert _index(db) == 1


def test_a_vector_computed_before_a_save_is_not_stored_for_it(db, boot) -> None:
    """The indexer computes vectors holding no lock (a save never waits for it), so a note can be
    saved between the computing and the storing: its old words must not be stored as its vector."""
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    path = f"org/{org}/guilds/{guild}/racing.md"
    with db.transaction() as conn:
        notes.write_note(conn, org, "guild", guild, "racing.md", "old words", SYSTEM)
    with db.connection() as conn:
        agent_row = load_agent(conn, agent, {org})
        conn.execute(search_index._BATCH_TABLE)
        with conn.transaction():
            assert conn.execute(search_index._BATCH_SQL, {"batch": 50, "bytes": search_index.BATCH_BYTES}).rowcount == 1
            notes.write_note(conn, org, "guild", guild, "racing.md", "new words", SYSTEM)
            stored = conn.execute(search_index._STORE_SQL).rowcount
        assert stored == 0 and _pending(conn, path)
        assert _found(conn, agent_row, "old") == [] and [k for k, _ in _found(conn, agent_row, "new")] == ["racing.md"]
        assert search_index.index_pending(conn) == 1
        assert _found(conn, agent_row, "old") == [] and [k for k, _ in _found(conn, agent_row, "new")] == ["racing.md"]


def test_a_deleted_notes_vector_leaves_the_index(db, boot) -> None:
    """A note deleted after it was indexed is found no more, at once, and the indexer's next pass
    drops its vector (unlogged tables keep only what a search may read, sql/156); a note written
    again at the name is found by its own words."""
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    with db.transaction() as conn:
        notes.write_note(conn, org, "guild", guild, "comet.md", "a comet passes", SYSTEM)
    assert _index(db) == 1
    with db.transaction() as conn:
        agent_row = load_agent(conn, agent, {org})
        notes.delete_note(conn, org, "guild", guild, "comet.md", SYSTEM)
        assert _found(conn, agent_row, "comet") == []
    assert _index(db) == 0   # nothing to fill, one vector to drop
    with db.transaction() as conn:
        assert conn.execute("SELECT count(*) AS n FROM note_vectors").fetchone()["n"] == 0
        assert _queued(conn) == 0
        notes.write_note(conn, org, "guild", guild, "comet.md", "a new tail", SYSTEM)
        assert _found(conn, agent_row, "comet passes") == []
        assert [k for k, _ in _found(conn, agent_row, "comet tail")] == ["comet.md"]

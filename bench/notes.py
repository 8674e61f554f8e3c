"""note_write and note_find rates, each beside the same work in raw SQL on the same server.

    .venv/bin/python -m bench.notes [--writes 500] [--finds 300] [--notes 10000]

Uses $HOSTFINDER_BENCH_DATABASE_URL (a role that may create databases) or starts a private
PostgreSQL in a temp dir under /tmp, with fsync on. The store side is tools.call (argument check, agent load, grants, the
write with its version, provenance row and NOTIFY, one transaction). The raw side is the bare
statement a hand-written app would run: an INSERT ... ON CONFLICT DO UPDATE per write in its own
transaction, and one ranked tsquery SELECT per search, no provenance. The ratio is
store time / raw time per operation (how many times slower the store is).
"""
from __future__ import annotations

import argparse
import time


from bench.harness import bench_database
from store import admin, search_index, tools
from store.access import Principal
from store.db import Database

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()


def _body(i: int) -> str:
    return " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 40)) + f" marker{i} topic{i % 97}"


def _rate(n: int, seconds: float) -> str:
    return f"{n / seconds:8.0f}/s ({seconds / n * 1e3:.3f} ms each)"


def run(dburl: str, writes: int, finds: int, n_notes: int) -> None:
    with Database(dburl, max_size=4) as db:
        boot = admin.bootstrap(db)
        org, agent, guild = boot["org_id"], boot["agent_id"], boot["guild_id"]
        principal = Principal("service", None, "bench", frozenset({org}))

        t = time.perf_counter()
        for i in range(writes):
            tools.call(db, principal, agent, "note_write", {"level": "agent", "key": f"w{i}.md", "content": _body(i)})
        store_w = time.perf_counter() - t
        with db.connection() as conn:
            t = time.perf_counter()
            for i in range(writes):
                with conn.transaction():
                    conn.execute(
                        """INSERT INTO artifacts (org_id, kind, level, agent_id, key, display_path, content)
                           VALUES (%s, 'note', 'agent', %s, %s, %s, %s)
                           ON CONFLICT (display_path) WHERE deleted_at IS NULL
                           DO UPDATE SET content = EXCLUDED.content, version = artifacts.version + 1""",
                        (org, agent, f"r{i}.md", f"org/{org}/agents/{agent}/r{i}.md", _body(i)))
            raw_w = time.perf_counter() - t

            conn.execute("""INSERT INTO artifacts (org_id, kind, level, guild_id, key, display_path, content)
                            SELECT %(o)s, 'note', 'guild', %(g)s, 'g' || i || '.md',
                                   'org/' || %(o)s || '/guilds/' || %(g)s || '/g' || i || '.md',
                                   'guild note marker' || i || ' topic' || (i %% 97) || ' bravo delta'
                              FROM generate_series(1, %(n)s) AS i""", {"o": org, "g": guild, "n": n_notes})
            # What the gateway's indexer does within moments of a write (store/search_index.py).
            search_index.index_pending(conn)
            conn.execute("ANALYZE artifacts, note_vectors")
            queries = [f"topic{i % 97} marker{(i * 37) % n_notes}" for i in range(finds)]
            t = time.perf_counter()
            for q in queries:
                tools.call(db, principal, agent, "note_find", {"query": q})
            store_f = time.perf_counter() - t
            t = time.perf_counter()
            for q in queries:
                conn.execute("""SELECT a.display_path, a.version, a.updated_at
                                  FROM note_vectors v JOIN artifacts a ON a.id = v.note_id AND a.version = v.version
                                 WHERE a.kind = 'note' AND a.deleted_at IS NULL AND a.org_id = %s
                                   AND v.vector @@ websearch_to_tsquery('simple', %s)
                                 ORDER BY ts_rank_cd(v.vector, websearch_to_tsquery('simple', %s)) DESC
                                 LIMIT 20""", (org, q, q)).fetchall()
            raw_f = time.perf_counter() - t
            total = conn.execute("SELECT count(*) AS n FROM artifacts WHERE kind = 'note'").fetchone()["n"]
    print(f"note_write  store {_rate(writes, store_w)}   raw SQL {_rate(writes, raw_w)}   "
          f"ratio {store_w / raw_w:.2f}x")
    print(f"note_find   store {_rate(finds, store_f)}   raw SQL {_rate(finds, raw_f)}   "
          f"ratio {store_f / raw_f:.2f}x   ({total:,} notes, selective queries)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--writes", type=int, default=500)
    ap.add_argument("--finds", type=int, default=300)
    ap.add_argument("--notes", type=int, default=10_000)
    args = ap.parse_args()
    # fsync on: a note write's rate includes the flush of its commit, on both sides.
    with bench_database("hf_bench_notes", durable=True) as url:
        run(url, args.writes, args.finds, args.notes)


if __name__ == "__main__":
    main()

"""Does a request cost more when the store holds more? The same WebDAV requests at two store sizes.

    .venv/bin/python -m bench.scale [--notes 10000] [--large 100000] [--requests 300] [--stats]

One gateway (as `hostfinder serve` runs it by default: no read cache, Basic auth, locks and
properties in PostgreSQL) over one database. Phase "small": the organisation holds ``--notes``
notes in one guild folder. Phase "large": the same organisation then holds ``--large`` notes
(more guilds, each note with its provenance row, as if written through the store), and the same
gateway, now older, serves the same requests again. Each phase measures, on one keep-alive
connection: creates by PUT into a new, empty guild folder (``--requests`` of them), PUT overwrites
and GETs in the full folder, and PROPFIND depth 1 of the full folder. Prints each figure at both
sizes and the ratio large / small: about 1.0 means the cost does not grow with the store.

``--stats`` loads pg_stat_statements (on the private PostgreSQL only) and prints the statements
whose mean time grew most between the phases: where to look when a ratio is above 1.
Uses HOSTFINDER_BENCH_DATABASE_URL when set, else a private PostgreSQL.
"""
from __future__ import annotations

import argparse
import time
from typing import Any

import psycopg
import requests

from bench.dav import PASSWORD, USER, _serve, note
from bench.harness import bench_database
from gateway.server import Gateway
from store import admin, search_index
from store.db import Database


def _seed(db: Database, org: int, guild: int, first: int, count: int) -> None:
    """``count`` notes n<first>.md.. in ``guild``, each with the provenance row a store write leaves.
    Their text is bench.dav's 1-4 KB of prose-like words, different in every guild: a search index
    over 100 000 such notes is what a user's store grows into (until 3 December every note repeated
    one word, and the index held one)."""
    folder = f"org/{org}/guilds/{guild}/"
    numbers = list(range(first, first + count))
    with db.transaction() as conn:
        conn.execute("""INSERT INTO artifacts (org_id, kind, level, guild_id, key, display_path, content)
                        SELECT %s, 'note', 'guild', %s, 'n' || i || '.md', %s || 'n' || i || '.md', c
                          FROM unnest(%s::int[], %s::text[]) AS t(i, c)""",
                     (org, guild, folder, numbers, [note(guild * 100_000 + i) for i in numbers]))
        conn.execute("""INSERT INTO file_changes (org_id, display_path, operation, version, actor_type, actor_name)
                        SELECT %s, %s || 'n' || i || '.md', 'create', 1, 'user', %s
                          FROM generate_series(%s::int, %s::int) AS i""", (org, folder, USER, first, first + count - 1))


def _grow(db: Database, org: int, total: int, per_guild: int) -> int:
    """Add guilds of ``per_guild`` notes until the organisation holds ``total`` notes."""
    with db.connection() as conn:
        have = conn.execute("SELECT count(*) AS n FROM artifacts WHERE org_id = %s", (org,)).fetchone()["n"]
    while have < total:
        guild = admin.create_guild(db, org_id=org, name=f"filler {have}")["id"]
        n = min(per_guild, total - have)
        _seed(db, org, guild, 1, n)
        have += n
    with db.connection() as conn:
        # What the gateway's indexer and autovacuum do after a bulk load; both phases get it.
        search_index.index_pending(conn, batch=1000)
        conn.execute("VACUUM ANALYZE")
    return have


def measure(base: str, full: str, empty: str, n: int) -> dict[str, float]:
    s = requests.Session()
    s.auth = (USER, PASSWORD)
    assert s.get(f"{base}/{full}/n1.md").status_code == 200
    out: dict[str, float] = {}

    def timed(name: str, fn: Any) -> None:
        started = time.perf_counter()
        fn()
        out[name] = (time.perf_counter() - started) / n * 1000

    def creates() -> None:
        for i in range(n):
            r = s.put(f"{base}/{empty}/c{i}.md", data=f"# created {i}\n".encode())
            assert r.status_code == 201, r.text

    def overwrites() -> None:
        for i in range(1, n + 1):
            assert s.put(f"{base}/{full}/n{i}.md", data=f"# note {i}\n\nupdated\n".encode()).status_code == 204

    def gets() -> None:
        for i in range(1, n + 1):
            assert s.get(f"{base}/{full}/n{i}.md").status_code == 200

    timed("create by PUT (ms)", creates)
    timed("PUT overwrite (ms)", overwrites)
    timed("GET (ms)", gets)
    started = time.perf_counter()
    for _ in range(3):
        assert s.request("PROPFIND", f"{base}/{full}/", headers={"Depth": "1"}).status_code == 207
    out["PROPFIND depth 1 (ms)"] = (time.perf_counter() - started) / 3 * 1000
    return out


def _statements(conninfo: str) -> dict[str, tuple[int, float]]:
    with psycopg.connect(conninfo) as conn:
        rows = conn.execute("SELECT query, calls, (shared_blks_hit + shared_blks_read)::float / greatest(calls, 1)"
                            " FROM pg_stat_statements"
                            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
                            ).fetchall()
        conn.execute("SELECT pg_stat_statements_reset()")
    return {q: (c, m) for q, c, m in rows}


def run(conninfo: str, notes: int, large: int, n: int, stats: bool) -> None:
    db = Database(conninfo, max_size=20).open()
    boot = admin.bootstrap(db, email=USER, password=PASSWORD)
    org, guild = boot["org_id"], boot["guild_id"]
    _seed(db, org, guild, 1, notes)
    with db.connection() as conn:
        search_index.index_pending(conn, batch=1000)
        conn.execute("VACUUM ANALYZE")
        if stats:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    gateway = Gateway(db)
    url, server = _serve(gateway, 16)
    base, full = url + "/dav", f"org/{org}/guilds/{guild}"
    results, statements = {}, {}
    try:
        for phase in ("small", "large"):
            if phase == "large":
                size = _grow(db, org, large, notes)
            else:
                size = notes
            empty = f"org/{org}/guilds/{admin.create_guild(db, org_id=org, name='new ' + phase)['id']}"
            if stats:
                _statements(conninfo)
            results[phase] = measure(base, full, empty, n)
            results[phase]["_size"] = size
            if stats:
                statements[phase] = _statements(conninfo)
    finally:
        server.stop()
        gateway.close()
        db.close()
    small, big = results["small"], results["large"]
    print(f"{'figure':26} {small['_size']:>10,} {big['_size']:>10,} {'ratio':>6}")
    for name in small:
        if not name.startswith("_"):
            print(f"{name:26} {small[name]:10.2f} {big[name]:10.2f} {big[name] / small[name]:6.2f}")
    print(f"(ms per request at {small['_size']:,} and at {big['_size']:,} notes in the organisation; "
          "ratio = large / small, 1.0 = flat)")
    if stats:
        grown = []
        for q, (calls, mean) in statements["large"].items():
            before = statements["small"].get(q)
            if before:
                grown.append((mean - before[1], mean, before[1], calls, q))
        grown.sort(reverse=True)
        print("\nstatements whose buffer reads per call grew most (small -> large, calls):")
        for delta, mean, before, calls, q in grown[:12]:
            print(f"  {before:9.1f} -> {mean:9.1f}  x{calls:<6} {' '.join(q.split())[:150]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--large", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--stats", action="store_true", help="report pg_stat_statements per phase")
    args = parser.parse_args()
    settings = ({"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track_planning": "on"}
                if args.stats else None)
    with bench_database("hf_bench_scale", settings=settings) as url:
        run(url, args.notes, args.large, args.requests, args.stats)


if __name__ == "__main__":
    main()

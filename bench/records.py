"""Record writes, search, listing and export, each beside the same work in raw SQL on the same server.

    .venv/bin/python -m bench.records [--records 10000] [--adds 1000]

Starts a private PostgreSQL in a temp dir under /tmp (or uses HOSTFINDER_BENCH_DATABASE_URL) and fills
three 10 000-record collections (so the one measured is a third of artifacts, as in a real
organisation), then prints:
- record_add rate through store.tools.call (argument checks, grants, the collection lock, validation,
  identity, search text, provenance and NOTIFY) from 1 and from 8 concurrent clients, against a bare
  locked next_id + INSERT + UPDATE transaction;
- record_search and record_list latency (median of many runs) against the bare SELECT;
- the plans of those statements (EXPLAIN), flagging any Seq Scan on artifacts;
- export throughput (records/s) through the store's streaming cursor and through the real HTTP route,
  against a bare server-side cursor.
"""
from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg
import requests
from psycopg.types.json import Jsonb

from bench.harness import bench_database
from store import admin, records, tools
from store.access import Principal
from store.columns import identity_of, parse_columns, search_blob, unique_column
from store.db import Database
from store.grants import Collection

COLUMNS = [
    {"name": "email", "type": "text", "description": "address", "required": True, "unique": True},
    {"name": "status", "type": "text", "description": "state", "values": ["new", "contacted", "won", "lost"]},
    {"name": "score", "type": "number", "description": "score"},
    {"name": "city", "type": "text", "description": "city"},
    {"name": "tags", "type": "array", "description": "tags"},
    {"name": "seen_at", "type": "datetime", "description": "last seen"},
]
CITIES = ["Paris", "Berlin", "Lagos", "Lima", "Osaka", "Denver", "Porto", "Quito", "Dakar", "Hanoi"]
STATUSES = ["new", "contacted", "won", "lost"]


def body(i: int) -> dict[str, Any]:
    return {"email": f"user{i}@example.com", "status": STATUSES[i % 4], "score": i, "city": CITIES[i % 10],
            "tags": [f"t{i % 13}", "alpha" if i % 2 else "beta"], "seen_at": f"2024-{1 + i % 12:02d}-01T00:00:00Z"}


def make_collection(db: Database, org_id: int, guild_id: int | None, name: str) -> dict[str, Any]:
    with db.transaction() as conn:
        return conn.execute("INSERT INTO artifact_collections (org_id, guild_id, name, purpose, columns)"
                            " VALUES (%s, %s, %s, 'bench', %s) RETURNING id, org_id, name, columns",
                            (org_id, guild_id, name, Jsonb(COLUMNS))).fetchone()


def fill(db: Database, coll: dict[str, Any], n: int) -> None:
    parsed = parse_columns(COLUMNS)
    unique = unique_column(parsed)
    bodies = [body(i) for i in range(1, n + 1)]
    with db.transaction() as conn:
        conn.execute(
            """INSERT INTO artifacts (org_id, kind, level, collection_id, key, display_path, content_json, identity,
                                      search_blob, created_by, updated_by, updated_at)
               SELECT %s, 'object', 'org', %s, k::text, %s || k, b, i, s, 'seed', 'seed',
                      now() - (10001 - k) * interval '1 minute'
                 FROM unnest(%s::bigint[], %s::jsonb[], %s::text[], %s::text[]) AS t(k, b, i, s)""",
            (coll["org_id"], coll["id"], f"org/{coll['org_id']}/collections/{coll['name']}/", list(range(1, n + 1)),
             [Jsonb(b) for b in bodies], [identity_of(unique, b["email"]) for b in bodies],
             [search_blob(parsed, b) for b in bodies]))
        conn.execute("UPDATE artifact_collections SET next_id = %s WHERE id = %s", (n + 1, coll["id"]))


def median_ms(fn: Callable[[], object], runs: int = 40) -> float:
    fn()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def report(what: str, ours: float, raw: float, unit: str, higher_is_better: bool = False) -> None:
    ratio = raw / ours if higher_is_better else ours / raw
    print(f"{what:<58} {ours:10.2f} {unit:<9} raw SQL {raw:10.2f} {unit:<9} ratio {ratio:5.2f}x")


def parallel(clients: int, per_client: int, work: Callable[[int, int], None]) -> float:
    """Seconds for ``clients`` threads each doing ``per_client`` calls of work(client, i)."""
    start = threading.Barrier(clients + 1)

    def run(c: int) -> None:
        start.wait()
        for i in range(per_client):
            work(c, i)

    threads = [threading.Thread(target=run, args=(c,)) for c in range(clients)]
    for t in threads:
        t.start()
    started = time.perf_counter()
    start.wait()
    for t in threads:
        t.join()
    return time.perf_counter() - started


class Explaining:
    """A connection stand-in that records each SELECT on artifacts the store runs, to EXPLAIN it."""

    def __init__(self, conn: psycopg.Connection) -> None:
        self.conn = conn
        self.statements: list[tuple[str, Any]] = []

    def execute(self, query: str, params: Any = None) -> Any:
        if query.lstrip().upper().startswith("SELECT") and "artifacts a" in query:
            self.statements.append((query, params))
        return self.conn.execute(query, params)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def explain(db: Database, label: str, fn: Callable[[Any], object]) -> bool:
    with db.connection() as conn:
        spy = Explaining(conn)
        fn(spy)
        clean = True
        for query, params in spy.statements:
            plan = [r["QUERY PLAN"] for r in conn.execute("EXPLAIN " + query, params).fetchall()]
            scans = [line.strip() for line in plan if "Scan" in line]
            seq = [s for s in scans if "Seq Scan on artifacts" in s]
            clean = clean and not seq
            print(f"  {label}: {' | '.join(s.split('  (')[0] for s in scans)}" + ("   <-- SEQ SCAN" if seq else ""))
        return clean


def run(conninfo: str, n: int, adds: int) -> None:
    db = Database(conninfo, max_size=20).open()
    boot = admin.bootstrap(db, email="bench@example.com", password="bench horse battery")
    org, guild, agent_id = boot["org_id"], boot["guild_id"], boot["agent_id"]
    service = Principal("service", None, "bench", frozenset({org}))
    main = make_collection(db, org, guild, "bench")
    for name in ("other_a", "other_b"):
        fill(db, make_collection(db, org, guild, name), n)
    fill(db, main, n)
    with db.connection() as conn:
        conn.execute("VACUUM ANALYZE artifacts")
    print(f"{n} records in each of 3 collections ({3 * n} artifacts)\n")

    # --- record_add -------------------------------------------------------------------------------
    for clients in (1, 8):
        ours = make_collection(db, org, guild, f"adds_{clients}")
        raw = make_collection(db, org, guild, f"raw_adds_{clients}")
        per = adds // clients

        def tool_add(c: int, i: int, name: str = ours["name"]) -> None:
            tools.call(db, service, agent_id, "record_add",
                       {"collection": name, "body": body(c * per + i + 1)})

        raw_conns = [psycopg.connect(conninfo, autocommit=True) for _ in range(clients)]
        parsed = parse_columns(COLUMNS)

        def raw_add(c: int, i: int, cid: int = raw["id"], prefix: str = f"org/{org}/collections/{raw['name']}/") -> None:
            b = body(c * per + i + 1)
            conn = raw_conns[c]
            with conn.transaction():
                next_id = conn.execute("SELECT next_id FROM artifact_collections WHERE id = %s FOR UPDATE",
                                       (cid,)).fetchone()[0]
                conn.execute("""INSERT INTO artifacts (org_id, kind, level, collection_id, key, display_path,
                                                       content_json, identity, search_blob)
                                VALUES (%s, 'object', 'org', %s, %s, %s, %s, %s, %s)""",
                             (org, cid, str(next_id), f"{prefix}{next_id}", Jsonb(b),
                              b["email"], search_blob(parsed, b)))
                conn.execute("UPDATE artifact_collections SET next_id = next_id + 1 WHERE id = %s", (cid,))

        t_ours = parallel(clients, per, tool_add)
        t_raw = parallel(clients, per, raw_add)
        for conn in raw_conns:
            conn.close()
        report(f"record_add, {clients} client{'s' if clients > 1 else ''} ({per * clients} adds)",
               per * clients / t_ours, per * clients / t_raw, "adds/s", higher_is_better=True)

    # --- record_search and record_list ------------------------------------------------------------
    coll = Collection(id=main["id"], org_id=org, guild_id=guild, name="bench", purpose="bench", columns=COLUMNS)

    def call(name: str, args: dict[str, Any]) -> Callable[[], object]:
        return lambda: tools.call(db, service, agent_id, name, args)

    def raw(sql: str, params: tuple, count: bool) -> Callable[[], object]:
        """The bare SELECT; for a listing also its count(*), since total is part of the answer."""
        def go() -> None:
            with db.connection() as conn:
                conn.execute(sql, params).fetchall()
                if count:
                    conn.execute("SELECT count(*) FROM artifacts a WHERE " + sql.split(" WHERE ", 1)[1].split(
                        " ORDER BY")[0], params).fetchone()
        return go

    live = "a.collection_id = %s AND a.kind = 'object' AND a.deleted_at IS NULL"
    cid = main["id"]
    cases: list[tuple[str, str, dict[str, Any], str, tuple]] = [
        ("record_search one token (substring too)", "record_search", {"collection": "bench", "query": "user5123"},
         f"SELECT * FROM artifacts a WHERE {live} AND (a.search @@ websearch_to_tsquery('simple', %s)"
         " OR a.search_blob ILIKE %s) ORDER BY ts_rank_cd(a.search, websearch_to_tsquery('simple', %s)) DESC LIMIT 20",
         (cid, "user5123", "%user5123%", "user5123")),
        ("record_search words with OR", "record_search", {"collection": "bench", "query": "osaka OR quito t7"},
         f"SELECT * FROM artifacts a WHERE {live} AND a.search @@ websearch_to_tsquery('simple', %s)"
         " ORDER BY ts_rank_cd(a.search, websearch_to_tsquery('simple', %s)) DESC LIMIT 20",
         (cid, "osaka OR quito t7", "osaka OR quito t7")),
        ("record_search every readable collection", "record_search", {"query": "user77@example.com"},
         "SELECT * FROM artifacts a WHERE a.collection_id = ANY(%s) AND a.kind = 'object' AND a.deleted_at IS NULL"
         " AND (a.search @@ websearch_to_tsquery('simple', %s) OR a.search_blob ILIKE %s)"
         " ORDER BY ts_rank_cd(a.search, websearch_to_tsquery('simple', %s)) DESC LIMIT 20",
         ([cid, cid - 1, cid - 2], "user77@example.com", "%user77@example.com%", "user77@example.com")),
        ("record_list first page (id asc)", "record_list", {"collection": "bench"},
         f"SELECT * FROM artifacts a WHERE {live} ORDER BY a.key::bigint LIMIT 20", (cid,)),
        ("record_list where status + score range, score desc", "record_list",
         {"collection": "bench", "where": {"status": "won", "score": {"gte": 5000}}, "order": "score desc"},
         f"SELECT * FROM artifacts a WHERE {live} AND a.content_json ->> 'status' = 'won'"
         " AND (a.content_json -> 'score')::numeric >= 5000 ORDER BY (a.content_json -> 'score')::numeric DESC LIMIT 20",
         (cid,)),
        ("record_list where city (similar spelling)", "record_list", {"collection": "bench", "where": {"city": "Oskaa"}},
         f"SELECT * FROM artifacts a WHERE {live} AND word_similarity('Oskaa', a.content_json ->> 'city') >= 0.5"
         " ORDER BY a.key::bigint LIMIT 20", (cid,)),
        ("record_list since (last 50 changes)", "record_list",
         {"collection": "bench", "since": "__since__"},
         # (record_updated_at: a record's updated_at in the column the records' index reads, sql/157)
         f"SELECT * FROM artifacts a WHERE {live} AND a.record_updated_at >= %s ORDER BY a.record_updated_at LIMIT 20",
         (cid,)),
        ("record_list where id", "record_list", {"collection": "bench", "where": {"id": 4321}},
         f"SELECT * FROM artifacts a WHERE {live} AND a.key = '4321'", (cid,)),
    ]
    with db.connection() as conn:
        since = conn.execute("SELECT updated_at FROM artifacts WHERE collection_id = %s ORDER BY updated_at DESC"
                             " OFFSET 49 LIMIT 1", (cid,)).fetchone()["updated_at"]
    print()
    for label, name, args, sql, params in cases:
        if args.get("since") == "__since__":
            args = {**args, "since": since.isoformat()}
            params = (*params, since)
        report(label, median_ms(call(name, args)), median_ms(raw(sql, params, name == "record_list")), "ms")

    print("\nplans of the statements the store ran:")
    clean = True
    for label, name, args, _, _ in cases:
        if args.get("since") == "__since__":
            args = {**args, "since": since.isoformat()}
        if name == "record_list":
            fn = lambda spy, a=args: records.list_records(spy, coll, where=a.get("where"), since=a.get("since"),
                                                           order=a.get("order"))
        elif "collection" in args:
            fn = lambda spy, a=args: records.search_records(spy, [coll], a["query"])
        else:
            others = [Collection(id=cid - k, org_id=org, guild_id=guild, name=f"c{k}", purpose="", columns=COLUMNS)
                      for k in (0, 1, 2)]
            fn = lambda spy, a=args, o=others: records.search_records(spy, o, a["query"], named=False)
        clean = explain(db, label, fn) and clean
    print("no Seq Scan on artifacts" if clean else "SEQ SCAN ON ARTIFACTS IN SOME PLAN")

    # --- export -----------------------------------------------------------------------------------
    def store_export() -> None:
        for record in records.export_records(db, coll):
            json.dumps(record)

    def raw_export() -> None:
        with db.connection() as conn, conn.transaction(), conn.cursor(name="raw_export") as cur:
            cur.execute("SELECT key, content_json FROM artifacts WHERE collection_id = %s AND kind = 'object'"
                        " AND deleted_at IS NULL ORDER BY key::bigint", (cid,))
            while rows := cur.fetchmany(500):
                for row in rows:
                    json.dumps({"id": int(row["key"]), **row["content_json"]})

    t_store = min(_timed(store_export) for _ in range(3))
    t_raw = min(_timed(raw_export) for _ in range(3))
    print()
    report("export through the store (records/s)", n / t_store, n / t_raw, "rec/s", higher_is_better=True)

    from gateway.server import Gateway, make_server
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = make_server(Gateway(db), "127.0.0.1", port, threads=4)
    server.prepare()
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    try:
        session = requests.Session()
        session.headers["Authorization"] = f"Bearer {boot['member_token']}"

        def http_export() -> None:
            with session.get(f"http://127.0.0.1:{port}/api/collections/{cid}/export", stream=True) as r:
                assert r.status_code == 200, r.text
                lines = sum(1 for line in r.iter_lines() if line)
                assert lines == n, lines
        t_http = min(_timed(http_export) for _ in range(3))
        report("export over HTTP, JSONL streamed (records/s)", n / t_http, n / t_raw, "rec/s", higher_is_better=True)
    finally:
        server.stop()
    db.close()


def _timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--adds", type=int, default=1_000)
    args = parser.parse_args()
    with bench_database("hf_bench_records") as url:
        run(url, args.records, args.adds)


if __name__ == "__main__":
    main()

"""Schema changes and listings on a full collection, each beside a raw-SQL reference, as a ratio.

    .venv/bin/python -m bench.collections_schema [--records 10000]

Starts a private PostgreSQL (or uses HOSTFINDER_BENCH_DATABASE_URL), creates a 10 000-record
collection through the store, then times:
- a column rename through store.collections.alter_collection (lock, checks, one jsonb UPDATE, the
  search text and identities rebuilt, provenance) against one bare jsonb UPDATE renaming the key;
- making a column unique (read every value, check repeats, rebuild) against a bare GROUP BY check;
- list_collections over 100 tables against a bare count(*) GROUP BY.
"""
from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from psycopg.types.json import Jsonb

from bench.harness import bench_database
from store import admin
from store.access import Principal
from store.collections import alter_collection, create_collection, list_collections
from store.columns import parse_columns, search_blob
from store.db import Database


def _col(name: str, type_: str = "text", **flags: object) -> dict[str, object]:
    return {"name": name, "type": type_, "description": f"the {name}", **flags}


def _time(fn: Callable[[], object], repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def _report(what: str, ours: float, reference: float) -> None:
    print(f"{what:<52} {ours * 1000:9.1f} ms   raw SQL {reference * 1000:8.1f} ms   ratio {ours / reference:5.1f}x")


def run(conninfo: str, records: int) -> None:
    db = Database(conninfo, max_size=4).open()
    boot = admin.bootstrap(db, email="bench@example.com", password="bench horse battery")
    member = Principal("user", boot["user_id"], "bench", frozenset({boot["org_id"]}))
    columns = [_col("title"), _col("email"), _col("score", "number"), _col("tags", "array")]
    c = create_collection(db, member, boot["org_id"], {"name": "bench", "purpose": "benchmark", "columns": columns})
    parsed = parse_columns(columns)
    bodies = [{"title": f"record number {i}", "email": f"user{i}@example.com", "score": i % 97,
               "tags": ["alpha", f"t{i % 13}"]} for i in range(records)]
    with db.transaction() as conn:
        conn.execute(
            """INSERT INTO artifacts (org_id, kind, level, collection_id, key, display_path, content_json, search_blob)
               SELECT %s, 'object', 'org', %s, k::text, %s || '/' || k, b, s
                 FROM unnest(%s::bigint[], %s::jsonb[], %s::text[]) AS t(k, b, s)""",
            (boot["org_id"], c.id, c.display_path, list(range(1, records + 1)), [Jsonb(b) for b in bodies],
             [search_blob(parsed, b) for b in bodies]))
        conn.execute("UPDATE artifact_collections SET next_id = %s WHERE id = %s", (records + 1, c.id))
    print(f"{records} records in one collection")

    names = iter(f"title{i}" for i in range(100))
    current = ["title"]

    def rename() -> None:
        new = next(names)
        alter_collection(db, member, c.id, {"columns": [_col(new, rename_from=current[0])] + columns[1:]})
        current[0] = new

    raw_names = iter(f"t{i}" for i in range(100))
    raw_current = ["title9999"]

    def raw_rename() -> None:
        new = next(raw_names)
        with db.transaction() as conn:
            conn.execute("""UPDATE artifacts SET content_json = content_json - %s::text || jsonb_build_object(%s::text, content_json -> %s::text)
                             WHERE collection_id = %s AND deleted_at IS NULL""", (raw_current[0], new, raw_current[0], c.id))
        raw_current[0] = new

    _report("rename one column (alter_collection)", _time(rename), _time(raw_rename))

    def make_unique() -> None:
        alter_collection(db, member, c.id, {"columns": [_col(current[0])] + [_col("email", unique=True)] + columns[2:]})
        alter_collection(db, member, c.id, {"columns": [_col(current[0])] + columns[1:]})

    def raw_unique() -> None:
        with db.transaction() as conn:
            conn.execute("""SELECT lower(trim(content_json ->> 'email')), count(*) FROM artifacts
                             WHERE collection_id = %s AND deleted_at IS NULL GROUP BY 1 HAVING count(*) > 1""", (c.id,))
            conn.execute("""UPDATE artifacts SET identity = lower(trim(content_json ->> 'email'))
                             WHERE collection_id = %s AND deleted_at IS NULL""", (c.id,))
            conn.execute("UPDATE artifacts SET identity = NULL WHERE collection_id = %s", (c.id,))
    _report("make a column unique and back (2 changes)", _time(make_unique), _time(raw_unique))

    for i in range(99):
        create_collection(db, member, boot["org_id"], {"name": f"t{i:02d}", "purpose": "p", "columns": []})

    def listing() -> None:
        with db.connection() as conn:
            list_collections(conn, member, boot["org_id"])

    def raw_listing() -> None:
        with db.connection() as conn:
            conn.execute("""SELECT c.*, (SELECT count(*) FROM artifacts a WHERE a.collection_id = c.id
                                           AND a.kind = 'object' AND a.deleted_at IS NULL) AS n
                              FROM artifact_collections c
                             WHERE c.org_id = %s AND c.deleted_at IS NULL ORDER BY c.name""", (boot["org_id"],)).fetchall()
    _report("list 100 collections with counts", _time(listing, 10), _time(raw_listing, 10))
    db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=10_000)
    args = parser.parse_args()
    with bench_database("hf_bench_schema") as url:
        run(url, args.records)


if __name__ == "__main__":
    main()

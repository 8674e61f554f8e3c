"""Helpers for the collection and access tests (no tests here): column definitions, creating a
table over HTTP, and seeding records in bulk through SQL the way store/records.py stores them."""
from __future__ import annotations

from typing import Any

import requests
from psycopg.types.json import Jsonb

from store.collections import get_collection
from store.columns import identity_of, search_blob, stored_columns, unique_column
from store.db import Database


def col(name: str, type_: str = "text", **flags: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, "description": f"the {name}", **flags}


def create(operator: requests.Session, url: str, name: str, columns: list[dict[str, Any]] | None = None,
           **extra: Any) -> dict[str, Any]:
    r = operator.post(f"{url}/api/collections", json={"name": name, "purpose": f"{name} table",
                                                       "columns": columns if columns is not None else [col("title")],
                                                       **extra})
    assert r.status_code == 201, r.text
    return r.json()


def seed(db: Database, org_id: int, collection_id: int, bodies: list[dict[str, Any]]) -> list[int]:
    """Insert live records in one statement (ids from next_id), with identity and search text from
    the same functions the record writes use. Returns the ids."""
    with db.transaction() as conn:
        c = get_collection(conn, org_id, collection_id, lock=True)
        columns = stored_columns(c.columns)
        unique = unique_column(columns)
        ids = list(range(c.next_id, c.next_id + len(bodies)))
        conn.execute(
            """INSERT INTO artifacts (org_id, kind, level, collection_id, key, display_path, content_json,
                                      identity, search_blob, created_by, updated_by)
               SELECT %s, 'object', 'org', %s, k::text, %s || '/' || k, b, i, s, 'seed', 'seed'
                 FROM unnest(%s::bigint[], %s::jsonb[], %s::text[], %s::text[]) AS t(k, b, i, s)""",
            (org_id, c.id, c.display_path, ids, [Jsonb(b) for b in bodies],
             [identity_of(unique, b.get(unique.name)) if unique else None for b in bodies],
             [search_blob(columns, b) for b in bodies]))
        conn.execute("UPDATE artifact_collections SET next_id = %s WHERE id = %s", (ids[-1] + 1 if ids else c.next_id, c.id))
    return ids


def live_records(db: Database, collection_id: int) -> dict[int, dict[str, Any]]:
    """id -> {body, identity, search_blob, version, display_path} of every live record."""
    with db.connection() as conn:
        rows = conn.execute(
            """SELECT key::bigint AS id, content_json, identity, search_blob, version, display_path
                 FROM artifacts WHERE collection_id = %s AND kind = 'object' AND deleted_at IS NULL""",
            (collection_id,)).fetchall()
    return {r["id"]: r for r in rows}


def changes(db: Database, display_path: str) -> list[str]:
    """The operations recorded on a display path, oldest first."""
    with db.connection() as conn:
        rows = conn.execute("SELECT operation FROM file_changes WHERE display_path = %s ORDER BY id",
                            (display_path,)).fetchall()
    return [r["operation"] for r in rows]

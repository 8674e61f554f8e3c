"""Helpers for the record tests: collections made with plain SQL (so record tests do not depend on the
collections code for their set-up), bulk records in one statement, and the tool route."""
from __future__ import annotations

import json
from typing import Any

import requests
from psycopg.types.json import Jsonb

from store.db import Database

# The specification's example table: its rejection message names exactly these four columns.
LEADS = [
    {"name": "email", "type": "text", "description": "contact address", "required": True, "unique": True},
    {"name": "status", "type": "text", "description": "pipeline state", "required": False, "unique": False,
     "values": ["new", "contacted", "won", "lost"]},
    {"name": "score", "type": "number", "description": "lead score", "required": False, "unique": False},
    {"name": "signed_up_at", "type": "datetime", "description": "sign-up time", "required": False, "unique": False},
]

# One column of every type and flag, for where and validation.
PEOPLE = [
    {"name": "name", "type": "text", "description": "full name", "required": True, "unique": True},
    {"name": "city", "type": "text", "description": "home city", "required": False, "unique": False},
    {"name": "stage", "type": "text", "description": "stage", "required": False, "unique": False,
     "values": ["new", "active", "done"]},
    {"name": "age", "type": "number", "description": "age in years", "required": False, "unique": False},
    {"name": "met_at", "type": "datetime", "description": "first meeting", "required": False, "unique": False},
    {"name": "vip", "type": "boolean", "description": "important", "required": False, "unique": False},
    {"name": "tags", "type": "array", "description": "free tags", "required": False, "unique": False},
    {"name": "langs", "type": "array", "description": "languages", "required": False, "unique": False,
     "values": ["en", "fr", "de"]},
]


def make_collection(db: Database, org_id: int, name: str, columns: list[dict[str, Any]], *,
                    guild_id: int | None = None, purpose: str = "test table") -> dict[str, Any]:
    with db.transaction() as conn:
        return conn.execute(
            "INSERT INTO artifact_collections (org_id, guild_id, name, purpose, columns)"
            " VALUES (%s, %s, %s, %s, %s) RETURNING id, org_id, guild_id, name",
            (org_id, guild_id, name, purpose, Jsonb(columns))).fetchone()


def grant(db: Database, collection_id: int, *, agent_id: int | None = None, guild_id: int | None = None,
          mode: str) -> None:
    with db.transaction() as conn:
        conn.execute("INSERT INTO collection_access (collection_id, agent_id, guild_id, mode) VALUES (%s, %s, %s, %s)",
                     (collection_id, agent_id, guild_id, mode))


def bulk_records(db: Database, coll: dict[str, Any], n: int) -> None:
    """``n`` records (email userN@example.com, score N) in one INSERT; next_id moves past them."""
    with db.transaction() as conn:
        conn.execute(
            """INSERT INTO artifacts (org_id, kind, level, collection_id, key, display_path, content_json,
                                      identity, search_blob, created_by, updated_by)
               SELECT %(org)s, 'object', 'org', %(cid)s, g::text, %(prefix)s || g,
                      jsonb_build_object('email', 'user' || g || '@example.com', 'score', g),
                      'user' || g || '@example.com', 'user' || g || '@example.com' || chr(10) || g, 'seed', 'seed'
                 FROM generate_series(1, %(n)s) AS g""",
            {"org": coll["org_id"], "cid": coll["id"], "n": n,
             "prefix": f"org/{coll['org_id']}/collections/{coll['name']}/"})
        conn.execute("UPDATE artifact_collections SET next_id = %s WHERE id = %s", (n + 1, coll["id"]))


def call_tool(server: Any, service: requests.Session, agent_id: int, name: str, **args: Any) -> requests.Response:
    return service.post(f"{server.url}/api/agents/{agent_id}/tools/{name}", json=args)


def ok(resp: requests.Response, status: int = 200) -> Any:
    assert resp.status_code == status, (resp.status_code, resp.text)
    return resp.json()


def q(value: Any) -> str:
    """A query-string JSON value."""
    return json.dumps(value)

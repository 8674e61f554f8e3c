"""Collections and records as files: collection.json and <id>.json in org/<org>/collections/<name>/,
read-only, holding the JSON the API returns (store.collections.collection_json, store.records.as_record)."""
from __future__ import annotations

import json
from typing import Any

from store.collections import collection_json
from store.columns import stored_columns
from store.db import Conn
from store.families.base import JSON, Family
from store.grants import Collection
from store.layout import Folder
from store.paths import parse_id
from store.records import as_record

_COLLECTION = ("SELECT c.id, c.org_id, c.guild_id, c.name, c.purpose, c.columns, c.next_id, c.created_at,"
               " c.updated_at FROM artifact_collections c WHERE c.org_id = %s AND c.name = %s"
               " AND c.deleted_at IS NULL")


def _json(value: Any) -> bytes:
    return (json.dumps(value, ensure_ascii=False, indent=2, default=str) + "\n").encode("utf-8")


class _ReadOnlyJson(Family):
    content_type = JSON
    group = "json"

    def read_only_sentence(self, folder: Folder) -> str:
        return (f"/{folder.path} is read-only: collections and records change through the Databases page "
                "or the API, not as files")


class CollectionFile(_ReadOnlyJson):
    """collection.json: the table's definition and its count of live records."""
    kind = "collection_json"
    fixed_name = "collection.json"

    def list(self, conn: Conn, folder: Folder) -> list[dict]:
        row = self.read(conn, folder, "collection.json")
        return [row] if row else []

    def read(self, conn: Conn, folder: Folder, name: str, *, hidden_for: int | None = None) -> dict | None:
        coll = conn.execute(
            f"SELECT * FROM ({_COLLECTION}) c, LATERAL (SELECT count(*) AS total FROM artifacts"
            " WHERE collection_id = c.id AND kind = 'object' AND deleted_at IS NULL) n",
            (folder.org_id, folder.name)).fetchone()
        if coll is None:
            return None
        count = coll["total"]
        body = _json(collection_json(Collection.from_row(coll), count=count))
        return {"name": "collection.json", "size": len(body), "version": 1,
                "tag": f"c{coll['id']}-n{count}-{int(coll['updated_at'].timestamp())}",
                "created_at": coll["created_at"], "updated_at": coll["updated_at"], "content": body}


class Records(_ReadOnlyJson):
    """<id>.json: one live record."""
    kind = "record"

    def _rows(self, conn: Conn, folder: Folder, record_key: str | None) -> list[dict]:
        where = " AND r.key = %s" if record_key is not None else ""
        rows = conn.execute(
            "SELECT r.id, r.key, r.display_path, r.content_json, r.version, r.created_at, r.updated_at,"
            f" r.updated_by, c.name AS collection_name, c.columns FROM ({_COLLECTION}) c"
            " JOIN artifacts r ON r.collection_id = c.id AND r.kind = 'object' AND r.deleted_at IS NULL"
            f"{where} ORDER BY r.key::bigint",
            [folder.org_id, folder.name, *([record_key] if record_key is not None else [])]).fetchall()
        out = []
        for r in rows:
            body = _json(as_record(r, r["collection_name"], stored_columns(r["columns"]), display_path=True))
            out.append({"name": f"{r['key']}.json", "size": len(body), "version": r["version"],
                        "tag": f"a{r['id']}", "created_at": r["created_at"], "updated_at": r["updated_at"],
                        "content": body})
        return out

    def list(self, conn: Conn, folder: Folder) -> list[dict]:
        return self._rows(conn, folder, None)

    def read(self, conn: Conn, folder: Folder, name: str, *, hidden_for: int | None = None) -> dict | None:
        stem = name.removesuffix(".json")
        if not name.endswith(".json") or parse_id(stem) is None:
            return None
        rows = self._rows(conn, folder, stem)
        return rows[0] if rows else None

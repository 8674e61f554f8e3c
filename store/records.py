"""Collection records: add, update, remove, read, list, search, clear and export, and the five
record tools.

A record is an artifacts row of kind 'object' at the organisation level: key is its decimal id,
content_json its declared columns, identity the normalised unique value and search_blob the value
text it is searched by. Every write locks the collection row first, so writes to one collection are
serialised: ids come from next_id under that lock (never reused), the 10 000-record cap is counted
under it, and an add whose unique value already exists finds that record and merges into it instead
of meeting the partial unique index. Each write bumps the record's version and writes its
file_changes row and NOTIFY (store.provenance.record_change) in the same transaction.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from psycopg.types.json import Jsonb, JsonbLoader

from store import db as store_db
from store import record_query as rq
from store.access import Actor
from store.agents import AgentCall
from store.columns import Column, identity_of, search_blob, stored_columns, unique_column
from store.db import Conn, Database
from store.errors import Conflict, Invalid, LimitReached, NotFound, PreconditionFailed, at_most_listed, rejected
from store.grants import Collection, collection_for_agent, granted_collections
from store.paths import collection_path, is_id, record_path
from store.provenance import append_changes, record_change
from store.tools import Arg, tool
from store.values import check_body, record_problems, shown, utc_iso

MAX_RECORDS = 10_000
MAX_BLOB_BYTES = 32 * 1024
META = ("created_at", "updated_at", "updated_by", "version")
# An export is sent in pieces of at most this many bytes, each one chunk on the wire. What an export
# holds beyond the rows of its current fetch is then a piece (twice: its bytes and the chunk framing
# the server builds around them) whatever its records hold: when pieces were 500 lines, 500 records
# of control characters (each escaped in JSON as six bytes, "\u0001") made a 96 MB string, held
# three times over, and 8 such exports took a gateway from 58 MB to 3.6 GB.
EXPORT_PIECE_BYTES = 256 * 1024
# The rows of each fetch from an export's cursor are fitted to about this many bytes (as PostgreSQL
# sends them), at most ``batch`` rows: 500 of those records were a 96 MB result (jsonb's text escapes
# a control character as six bytes too), held with its rows until the next fetch, however small the
# pieces sent.
EXPORT_FETCH_BYTES = 1024 * 1024
_FIRST_FETCH = 20  # rows in an export's first fetch, before their size is known
_ROW_BYTES = 200   # what a row brings besides its values (id, path, times, who, version)


# The lock makes a duplicate identity impossible from record writes; a write that still meets the
# index (a schema change racing outside the lock) reads as a sentence, not a psycopg error.
store_db.on_constraint("artifacts_live_identity", lambda d: Conflict(
    "another live record of this collection already holds that unique value; update that record instead"))


@dataclass
class WriteResult:
    """A write's outcome: the record as returned, the record it merged into (record_add on an
    existing unique value), and problems in untouched columns (warnings, not refusals)."""
    record: dict[str, Any]
    merged: int | None = None
    warnings: list[str] = field(default_factory=list)


# --- reading helpers ------------------------------------------------------------------------------

def as_record(row: dict[str, Any], collection: str, columns: Sequence[Column], *,
              display_path: bool = False) -> dict[str, Any]:
    """A record as tools and the API return it: id, collection, every declared column (null when
    it has no value), created_at, updated_at, updated_by, version; display_path for the API."""
    body = row["content_json"] or {}
    out: dict[str, Any] = {"id": int(row["key"]), "collection": collection}
    for column in columns:
        # A table stored before collection/version/display_path were reserved may still have such a
        # column: the record's own fields win (below), never the other way round.
        if column.name not in out:
            out[column.name] = body.get(column.name)
    out["created_at"] = utc_iso(row["created_at"])
    out["updated_at"] = utc_iso(row["updated_at"])
    out["updated_by"] = row["updated_by"]
    out["version"] = row["version"]
    if display_path:
        out["display_path"] = row["display_path"]
    return out


def _lock(conn: Conn, collection: Collection) -> tuple[dict[str, Any], list[Column]]:
    """Lock the collection row and read it afresh (columns and next_id as of the lock)."""
    row = conn.execute("SELECT id, org_id, name, columns, next_id FROM artifact_collections"
                       " WHERE id = %s AND deleted_at IS NULL FOR UPDATE", (collection.id,)).fetchone()
    if row is None:
        raise NotFound(f"unknown collection {collection.name}")
    return row, stored_columns(row["columns"])


def _live_row(conn: Conn, collection_id: int, record_id: object, name: str, *, lock: bool = False) -> dict[str, Any]:
    if not is_id(record_id):
        raise NotFound(f"unknown record {shown(record_id)} in collection {name}; ids are whole numbers from 1")
    row = conn.execute(
        f"SELECT {rq.RECORD_COLUMNS}, a.id AS row_id, a.identity FROM artifacts a"
        f" WHERE a.collection_id = %s AND a.key = %s AND {rq.LIVE}" + (" FOR UPDATE" if lock else ""),
        (collection_id, str(record_id))).fetchone()
    if row is None:
        raise NotFound(f"unknown record {record_id} in collection {name}: no live record has that id;"
                       " record_list or record_search find ids")
    return row


def _rejected(problems: list[str]) -> Invalid:
    problems = at_most_listed(problems)
    return rejected("record rejected", problems)


_SHORTEN = "shorten the longest text values or keep long documents in a note and store its display path here"


def _size_problem(size: int) -> str:
    return f"indexed value text: {size} bytes; at most {MAX_BLOB_BYTES} ({MAX_BLOB_BYTES // 1024} KB): {_SHORTEN}"


def _blob_problem(columns: Sequence[Column], content: dict[str, Any]) -> str | None:
    """The record cap's problem line for ``content``, or None when its values fit."""
    size = len(search_blob(columns, content).encode("utf-8"))
    return _size_problem(size) if size > MAX_BLOB_BYTES else None


def _check_blob(blob: str) -> None:
    """The record cap, as one of a rejected body's problems: the same 422 whether it is the only
    one or one of several (_rejected_with_size), never a 413 in one case and a 422 in the other."""
    size = len(blob.encode("utf-8"))
    if size > MAX_BLOB_BYTES:
        raise _rejected([_size_problem(size)])


def _rejected_with_size(problems: list[str], columns: Sequence[Column], content: dict[str, Any]) -> Invalid:
    """Every problem at once: when the values that did pass are already over the record cap, the
    422 says so too, rather than a 413 after the others are mended."""
    too_big = _blob_problem(columns, {k: v for k, v in content.items() if v is not None})
    return _rejected(problems + ([too_big] if too_big else []))


def _holder(conn: Conn, collection_id: int, identity: str, *, lock: bool = True) -> dict[str, Any] | None:
    return conn.execute(
        f"SELECT {rq.RECORD_COLUMNS}, a.id AS row_id, a.identity FROM artifacts a"
        f" WHERE a.collection_id = %s AND a.identity = %s AND {rq.LIVE}" + (" FOR UPDATE" if lock else ""),
        (collection_id, identity)).fetchone()


# --- writes ---------------------------------------------------------------------------------------

def record_add(conn: Conn, collection: Collection, body: object, actor: Actor) -> WriteResult:
    """Validate ``body`` whole, then insert it under the next id, or, when its unique value is
    already held by a live record, merge it into that record as a patch. Call inside a transaction."""
    if not isinstance(body, dict):
        raise _rejected([f"body: expected an object of column values; got {shown(body)}"])
    row, columns = _lock(conn, collection)
    clean, problems = check_body(columns, body)
    if problems:
        raise _rejected_with_size(problems, columns, clean)
    unique = unique_column(columns)
    identity = identity_of(unique, clean.get(unique.name)) if unique else None
    if identity is not None:
        existing = _holder(conn, row["id"], identity)
        if existing is not None:
            return _apply_patch(conn, row, columns, existing, clean, actor, merged=True)
    count = conn.execute(f"SELECT count(*) AS n FROM artifacts a WHERE a.collection_id = %s AND {rq.LIVE}",
                         (row["id"],)).fetchone()["n"]
    if count >= MAX_RECORDS:
        raise LimitReached(f"collection {row['name']} already holds {count} live records, the most a collection may"
                           " hold; remove records (record_remove, or a record's Delete on the Databases page,"
                           " where the operator may also clear the table) before adding more", [f"records: {count} of {MAX_RECORDS}"])
    content = {k: v for k, v in clean.items() if v is not None}
    blob = search_blob(columns, content)
    _check_blob(blob)
    record_id = row["next_id"]
    inserted = conn.execute(
        f"""INSERT INTO artifacts AS a (org_id, kind, level, collection_id, key, display_path, content_json,
                                   identity, search_blob, version, created_at, updated_at, created_by, updated_by)
            SELECT %s, 'object', 'org', %s, %s, %s, %s, %s, %s, 1, t.at, t.at, %s, %s
              FROM (SELECT clock_timestamp() AS at) AS t
            RETURNING {rq.RECORD_COLUMNS}""",
        (row["org_id"], row["id"], str(record_id), record_path(row["org_id"], row["name"], record_id),
         Jsonb(content), identity, blob, actor.name, actor.name)).fetchone()
    conn.execute("UPDATE artifact_collections SET next_id = next_id + 1 WHERE id = %s", (row["id"],))
    # The record's history starts on its own path; the event is the collection's (a new file in it).
    record_change(conn, org_id=row["org_id"], display_path=inserted["display_path"], operation="create",
                  version=1, actor=actor, event_paths=[collection_path(row["org_id"], row["name"])])
    return WriteResult(as_record(inserted, row["name"], columns, display_path=True))


def record_update(conn: Conn, collection: Collection, record_id: object, patch: object, actor: Actor, *,
                  if_version: int | None = None) -> WriteResult:
    """Merge ``patch`` into a live record: present columns validated, null clears an optional
    column, the rest kept; problems left in untouched columns come back as warnings.
    ``if_version``: refuse (PreconditionFailed) unless the record is still at that version."""
    if not isinstance(patch, dict):
        raise _rejected([f"body: expected an object of the columns that change; got {shown(patch)}"])
    row, columns = _lock(conn, collection)
    existing = _live_row(conn, row["id"], record_id, row["name"], lock=True)
    if if_version is not None and existing["version"] != if_version:
        raise PreconditionFailed(f"record {existing['key']} of {row['name']} is at version {existing['version']}, "
                                 f"not {if_version}: it changed since it was read; read it again and reapply "
                                 "the change")
    if not patch:
        raise _rejected(["body: no columns to change; send the columns that change, null clears an optional one"])
    clean, problems = check_body(columns, patch, patch=True)
    if problems:
        raise _rejected_with_size(problems, columns, {**(existing["content_json"] or {}), **clean})
    return _apply_patch(conn, row, columns, existing, clean, actor, merged=False)


def _same_json(a: Any, b: Any) -> bool:
    """Equal as JSON values: booleans apart from numbers (1 == True in Python, and a number
    retyped to a boolean must still be written as true), numbers by value (2 and 2.0 alike)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_json(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_json(x, y) for x, y in zip(a, b))
    numbers = (int, float, Decimal)
    if isinstance(a, numbers) and isinstance(b, numbers):
        return a == b
    return type(a) is type(b) and a == b


def _apply_patch(conn: Conn, coll: dict[str, Any], columns: Sequence[Column], existing: dict[str, Any],
                 clean: dict[str, Any], actor: Actor, *, merged: bool) -> WriteResult:
    content = dict(existing["content_json"] or {})
    for name, value in clean.items():
        if value is None:
            content.pop(name, None)
        else:
            content[name] = value
    warnings = record_problems(columns, content, skip=set(clean))
    if _same_json(content, existing["content_json"] or {}):
        # A patch that changes nothing writes nothing: no new version, no provenance row, no
        # event (as a collection's PATCH and a grant that change nothing; the web form does not
        # send one at all). Records are not files of the mount, whose own writes count events.
        return WriteResult(as_record(existing, coll["name"], columns, display_path=True),
                           merged=int(existing["key"]) if merged else None, warnings=warnings)
    unique = unique_column(columns)
    identity = identity_of(unique, content.get(unique.name)) if unique else None
    if identity is not None and identity != existing["identity"]:
        holder = _holder(conn, coll["id"], identity, lock=False)
        if holder is not None and holder["row_id"] != existing["row_id"]:
            msg = (f'column "{unique.name}": {shown(content[unique.name])} is already held by record {holder["key"]}'  # type: ignore[union-attr]
                   f" of {coll['name']}; a unique value belongs to one record, so update record {holder['key']}"
                   " instead, or choose another value")
            raise Conflict(msg, [msg])
    blob = search_blob(columns, content)
    _check_blob(blob)
    updated = conn.execute(
        f"""UPDATE artifacts AS a SET content_json = %s, identity = %s, search_blob = %s, version = a.version + 1,
                   updated_at = clock_timestamp(), updated_by = %s
             WHERE a.id = %s RETURNING {rq.RECORD_COLUMNS}""",
        (Jsonb(content), identity, blob, actor.name, existing["row_id"])).fetchone()
    # A merged record_add is still a record_add: its event is the collection's too, beside the
    # record's own (whose file changed).
    record_change(conn, org_id=coll["org_id"], display_path=updated["display_path"], operation="update",
                  version=updated["version"], actor=actor,
                  event_paths=[updated["display_path"]] + ([collection_path(coll["org_id"], coll["name"])]
                                                           if merged else []))
    return WriteResult(as_record(updated, coll["name"], columns, display_path=True),
                       merged=int(existing["key"]) if merged else None, warnings=warnings)


def record_remove(conn: Conn, collection: Collection, record_id: object, actor: Actor) -> int:
    """Soft-delete one live record (its id is never reused); returns the id."""
    row, _ = _lock(conn, collection)
    existing = _live_row(conn, row["id"], record_id, row["name"], lock=True)
    removed = conn.execute(
        """UPDATE artifacts SET deleted_at = clock_timestamp(), updated_at = clock_timestamp(),
                  version = version + 1, updated_by = %s
            WHERE id = %s RETURNING version""", (actor.name, existing["row_id"])).fetchone()
    record_change(conn, org_id=row["org_id"], display_path=existing["display_path"], operation="delete",
                  version=removed["version"], actor=actor)
    return int(existing["key"])


def clear_facts(conn: Conn, collection_id: int) -> dict[str, int] | None:
    """What a confirmation of "clear all records" shows and sends back, in one statement (one
    snapshot): {count, next_id, versions}: how many live records, the next id (it moves with every
    add, even of a record removed since) and the sum of the live records' versions (it goes up
    with every change). None when the collection is gone."""
    row = conn.execute(
        f"""SELECT c.next_id, count(a.id) AS count, coalesce(sum(a.version), 0) AS versions
              FROM artifact_collections c LEFT JOIN artifacts a ON a.collection_id = c.id AND {rq.LIVE}
             WHERE c.id = %s AND c.deleted_at IS NULL GROUP BY c.next_id""", (collection_id,)).fetchone()
    if row is None:
        return None
    return {"count": int(row["count"]), "next_id": int(row["next_id"]), "versions": int(row["versions"])}


def clear_records(conn: Conn, collection: Collection, actor: Actor, *,
                  seen: dict[str, int] | None = None) -> int:
    """Soft-delete every live record at once; the table, its grants and next_id stay, so ids are
    still never reused. Each record gets its own 'delete' row (in the same statement), so its
    history ends where it ended; the table gets one 'clear' row and event. Returns how many; a
    table with no live record is left as it is, with no row and no event.

    ``seen``: what a confirmation showed ({count, next_id, versions}: how many live records, the
    next id, the sum of their versions; store.member_records.clear_facts). The clear then happens
    only while the live records are still those: any record added (next_id moved), removed (count)
    or changed (a version went up) since refuses with PreconditionFailed, nothing written. It is
    checked under the collection row's lock, which every record write takes first, so no write
    can slip in between the check and the clear."""
    row, _ = _lock(conn, collection)
    if seen is not None:
        now = clear_facts(conn, row["id"]) or {}
        if any(seen.get(k) != v for k, v in now.items()):
            added = now["next_id"] - seen.get("next_id", now["next_id"])
            plural = "" if seen.get("count") == 1 else "s"
            raise PreconditionFailed(
                f"nothing was cleared: the records of {row['name']} changed after the confirmation showed"
                f" {seen.get('count')} live record{plural} ({now['count']} now"
                + (f", {added} added since" if added > 0 else "") + "); look at them again and confirm the"
                " clear of the records as they are now", [f"records: {now['count']} live"])
    cleared = remove_all(conn, row["id"], actor)
    if cleared == 0:
        return 0
    record_change(conn, org_id=row["org_id"], display_path=collection_path(row["org_id"], row["name"]),
                  operation="clear", version=None, actor=actor)
    return cleared


def remove_all(conn: Conn, collection_id: int, actor: Actor) -> int:
    """Soft-delete every live record of a (locked) collection, each one version up with its own
    'delete' provenance row, in one statement; returns how many. The caller records the
    collection's own change (and so its one event)."""
    insert, params = append_changes("removed", actor)
    return conn.execute(
        f"""WITH removed AS (
              UPDATE artifacts SET deleted_at = clock_timestamp(), updated_at = clock_timestamp(),
                     version = version + 1, updated_by = %s
               WHERE collection_id = %s AND kind = 'object' AND deleted_at IS NULL
           RETURNING org_id, display_path, 'delete' AS operation, version)
            {insert}""", (actor.name, collection_id, *params)).rowcount


# --- reads ----------------------------------------------------------------------------------------

def get_record(conn: Conn, collection: Collection, record_id: object, *, display_path: bool = True) -> dict[str, Any]:
    """One live record; NotFound names the collection and how to find ids."""
    row = _live_row(conn, collection.id, record_id, collection.name)
    return as_record(row, collection.name, stored_columns(collection.columns), display_path=display_path)


def misfits(collection: Collection, record: dict[str, Any]) -> list[str]:
    """What a record (as get_record returns it) holds that its table's columns no longer accept:
    a column retyped or narrowed after the record was written. The same lines record_update
    returns as warnings, for a form to show whenever the record is opened."""
    columns = stored_columns(collection.columns)
    return record_problems(columns, {c.name: record[c.name] for c in columns if record.get(c.name) is not None})


def list_records(conn: Conn, collection: Collection, *, where: object = None, since: object = None,
                 order: object = None, limit: object = None, offset: object = None,
                 display_path: bool = False, tool_name: str = "record_list") -> dict[str, Any]:
    """{total, records}; total counts every match regardless of paging. A narrowed listing (where
    or since) that matches nothing adds a hint saying what was asked and what to try."""
    columns = stored_columns(collection.columns)
    plan = rq.plan_list(columns, where=where, since=since, order=order, limit=limit, offset=offset, tool=tool_name)
    rows, total = rq.run_list(conn, collection.id, plan)
    out: dict[str, Any] = {"total": total,
                           "records": [as_record(r, collection.name, columns, display_path=display_path) for r in rows]}
    if total == 0 and (where is not None or since is not None):
        out["hint"] = rq.empty_hint(conn, collection.id, collection.name, columns, where=where, since=since)
    return out


def search_records(conn: Conn, collections: Sequence[Collection], query: object, *, where: object = None,
                   limit: object = None, offset: object = None, since: object = None, order: object = None,
                   named: bool = True, display_path: bool = False,
                   tool_name: str = "record_search") -> dict[str, Any]:
    """Text search over ``collections``: the one the caller named (``named``), or every readable
    one. where and order need a named collection, since they name that collection's columns.
    offset pages the ranked hits, since narrows them, and order sorts them by a column instead of
    rank (the Databases page searches and pages at once; the record_search tool sends none)."""
    problems: list[str] = []
    text = rq.check_query(query, problems)
    filters = rq.Filters()
    one = named and len(collections) == 1
    if where is not None:
        if not one:
            problems.append("where: needs collection, since where names a collection's columns; name the"
                            " collection, or drop where to search every collection you can read")
        else:
            filters = rq.parse_where(stored_columns(collections[0].columns), where, problems)
    moment = rq.parse_since(since, problems)
    sort: rq.Fragment | None = None
    if order is not None:
        if not one:
            problems.append("order: needs collection, since order names a collection's column; name the"
                            " collection, or drop order to rank the hits")
        else:
            sort = rq.parse_order(stored_columns(collections[0].columns), order, False, problems)
    size = rq.parse_limit(limit, problems, paged=tool_name != "record_search")
    skip = rq.parse_offset(offset, problems)
    rq.reject(tool_name, problems)
    if not collections:
        return {"total": 0, "records": [], "hint": "no collection is readable, so there is nothing to search"}
    by_id = {c.id: (c, stored_columns(c.columns)) for c in collections}
    rows, total = rq.run_search(conn, list(by_id), text, filters, size, offset=skip, since=moment, order=sort)
    out: dict[str, Any] = {"total": total, "records": [
        as_record(r, by_id[r["collection_id"]][0].name, by_id[r["collection_id"]][1], display_path=display_path)
        for r in rows]}
    if total == 0:
        out["hint"] = rq.search_hint(text)
    return out


def export_records(db: Database, collection: Collection, *, batch: int = 500) -> Iterator[dict[str, Any]]:
    """Every live record, by id, as the API returns it. A server-side cursor feeds the rows in
    fetches of at most ``batch`` rows and about EXPORT_FETCH_BYTES, so memory stays constant however
    many records there are, and however large; the connection is held only while the iterator is
    consumed, and closing the iterator early releases it."""
    columns = stored_columns(collection.columns)
    read = [0]   # bytes of values (content_json) the fetches brought, as PostgreSQL sent them

    class _CountingJsonb(JsonbLoader):
        def load(self, data: Any) -> Any:
            read[0] += len(data)
            return super().load(data)
    with db.connection() as conn, conn.transaction():
        with conn.cursor(name=f"export_{collection.id}") as cur:
            cur.adapters.register_loader("jsonb", _CountingJsonb)
            cur.execute(f"SELECT {rq.RECORD_COLUMNS} FROM artifacts a WHERE a.collection_id = %s AND {rq.LIVE}"
                        " ORDER BY (a.key::bigint)", (collection.id,))
            size = min(batch, _FIRST_FETCH)
            while rows := cur.fetchmany(size):
                # As many rows as would bring about EXPORT_FETCH_BYTES at this fetch's bytes a row
                # (the values, and about 200 bytes for the rest of the row).
                sent, read[0] = read[0] + _ROW_BYTES * len(rows), 0
                size = max(1, min(batch, len(rows) * EXPORT_FETCH_BYTES // sent))
                for row in rows:
                    yield as_record(row, collection.name, columns, display_path=True)
                del rows  # (before the next fetch: one fetch's rows at a time)


def in_pieces(texts: Iterable[str], limit: int = EXPORT_PIECE_BYTES) -> Iterator[bytes]:
    """``texts`` in UTF-8, in pieces of at most ``limit`` bytes: consecutive texts joined up to the
    limit, and a text longer than the limit by itself cut into slices (anywhere, even inside a
    character: the pieces are sent one after the other, so the bytes are exactly the texts')."""
    parts: list[bytes] = []
    size = 0
    for text in texts:
        data = text.encode("utf-8")
        if parts and size + len(data) > limit:
            yield b"".join(parts)
            parts, size = [], 0
        if len(data) > limit:
            for start in range(0, len(data), limit):
                yield data[start:start + limit]
            continue
        parts.append(data)
        size += len(data)
    if parts:
        yield b"".join(parts)


def export_jsonl(db: Database, collection: Collection, *, batch: int = 500) -> Iterator[bytes]:
    """``export_records`` as JSON Lines in UTF-8, in pieces of at most EXPORT_PIECE_BYTES (``batch``:
    at most so many rows per fetch): what the records route's export and the Databases page's JSONL
    download both send."""
    rows = export_records(db, collection, batch=batch)
    try:
        yield from in_pieces(json.dumps(record, ensure_ascii=False) + "\n" for record in rows)
    finally:
        rows.close()  # an export abandoned by its client releases its connection now


# --- the agent tools ------------------------------------------------------------------------------

def _tool_record(record: dict[str, Any]) -> dict[str, Any]:
    record.pop("display_path", None)
    return record


@tool("record_add", "Add a record to a collection; every problem with the body is reported at once.",
      collection=Arg("string", required=True, description="the collection's name"),
      body=Arg("object", required=True, description="declared columns only"))
def tool_record_add(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    with db.transaction() as conn:
        collection = collection_for_agent(conn, call.agent, args["collection"], "write", lock=True)
        result = record_add(conn, collection, args["body"], call.actor)
    out: dict[str, Any] = {"record": _tool_record(result.record)}
    if result.merged is not None:
        out["note"] = f"merged into existing record {result.merged}"
        if result.warnings:
            out["warnings"] = result.warnings
    return out


@tool("record_update", "Change columns of one record; null clears an optional column.",
      collection=Arg("string", required=True), id=Arg("integer", required=True),
      body=Arg("object", required=True, description="the columns that change"))
def tool_record_update(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    with db.transaction() as conn:
        collection = collection_for_agent(conn, call.agent, args["collection"], "write", lock=True)
        result = record_update(conn, collection, args["id"], args["body"], call.actor)
    out: dict[str, Any] = {"record": _tool_record(result.record)}
    if result.warnings:
        out["warnings"] = result.warnings
    return out


@tool("record_remove", "Remove one record by id.",
      collection=Arg("string", required=True), id=Arg("integer", required=True))
def tool_record_remove(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    with db.transaction() as conn:
        collection = collection_for_agent(conn, call.agent, args["collection"], "write", lock=True)
        return {"removed": record_remove(conn, collection, args["id"], call.actor)}


@tool("record_list", "List one collection's records, narrowed by where and since, ordered and paged.",
      collection=Arg("string", required=True), where=Arg("object"), since=Arg("string"),
      order=Arg("string|object"), limit=Arg("integer"), offset=Arg("integer"))
def tool_record_list(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    with db.connection() as conn:
        collection = collection_for_agent(conn, call.agent, args["collection"], "read")
        return list_records(conn, collection, where=args.get("where"), since=args.get("since"),
                            order=args.get("order"), limit=args.get("limit"), offset=args.get("offset"))


@tool("record_search", "Search records by the words in their values, in one collection or every readable one.",
      collection=Arg("string"), query=Arg("string", required=True), where=Arg("object"), limit=Arg("integer"))
def tool_record_search(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    with db.connection() as conn:
        if "collection" in args:
            collections = [collection_for_agent(conn, call.agent, args["collection"], "read")]
        else:
            collections = [c for c, _ in granted_collections(conn, call.agent)]
        return search_records(conn, collections, args.get("query"), where=args.get("where"),
                              limit=args.get("limit"), named="collection" in args)

"""Records as an organisation's member edits them (the Databases page and its API routes): the
member acts as the operator, with write on every collection of the organisation. Each function is
one store call for one route: it opens its own transaction, finds the collection among the
member's organisations (NotFound otherwise, whether it is missing or another organisation's) and
applies store.records' rules.

A change takes {"body": {...}}: the record's column values (record_add) or the columns that
change (record_update).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from store import records
from store.access import Principal
from store.collections import collection_for_member
from store.db import Database
from store.errors import Invalid, NotFound, rejected
from store.grants import Collection


def body_of(payload: object) -> tuple[Any, list[str]]:
    """The record values a change sends (the "body" field of the request's object), and the
    problems of the fields beside it, reported with the body's own (see _with)."""
    msg = 'send {"body": {...}} with the record\'s column values'
    if not isinstance(payload, dict) or "body" not in payload:
        raise Invalid(f"the request needs a body field: {msg}", [f"body: required; {msg}"])
    unknown = [f'unknown field "{key}"; {msg} and nothing beside it' for key in payload if key != "body"]
    return payload["body"], unknown


def _with(unknown: list[str], write: Callable[[], records.WriteResult]) -> records.WriteResult:
    """``write`` (in the caller's transaction), refused with every problem at once when the request
    also held unknown fields: the body's own problems beside them, or theirs alone, in which case
    raising here undoes the write."""
    try:
        result = write()
    except Invalid as exc:
        if not unknown:
            raise
        problems = [*unknown, *exc.problems]
        raise rejected("record rejected", problems) from None
    if unknown:
        raise rejected("record rejected", unknown)
    return result


def find(db: Database, principal: Principal, collection_id: int, *, query: str | None = None,
         where: object = None, since: object = None, order: object = None, limit: object = None,
         offset: object = None) -> dict[str, Any]:
    """{total, records, columns}: a listing, or with ``query`` (words) the text search, narrowed
    by where and since, sorted by order, paged by limit and offset. Every record carries its
    display_path, for the provenance strip."""
    with db.connection() as conn:
        collection = collection_for_member(conn, principal, collection_id)
        if query is not None and query.strip():
            out = records.search_records(conn, [collection], query, where=where, limit=limit, offset=offset,
                                         since=since, order=order, display_path=True, tool_name="records search")
        else:
            out = records.list_records(conn, collection, where=where, since=since, order=order, limit=limit,
                                       offset=offset, display_path=True, tool_name="records listing")
    out["columns"] = collection.columns
    return out


def get(db: Database, principal: Principal, collection_id: int, record_id: int) -> dict[str, Any]:
    with db.connection() as conn:
        return records.get_record(conn, collection_for_member(conn, principal, collection_id), record_id)


def add(db: Database, principal: Principal, collection_id: int, payload: object) -> records.WriteResult:
    """A new record, or, when the unique column matches a live record, the body merged into it
    (``merged`` is then that record's id)."""
    body, unknown = body_of(payload)
    with db.transaction() as conn:
        collection = collection_for_member(conn, principal, collection_id, lock=True)
        return _with(unknown, lambda: records.record_add(conn, collection, body, principal.actor))


def update(db: Database, principal: Principal, collection_id: int, record_id: int,
           payload: object, *, if_version: int | None = None) -> records.WriteResult:
    """The columns that change (null clears an optional one); ``if_version`` (If-Match): only
    while the record is still at that version."""
    body, unknown = body_of(payload)
    with db.transaction() as conn:
        collection = collection_for_member(conn, principal, collection_id, lock=True)
        return _with(unknown, lambda: records.record_update(conn, collection, record_id, body, principal.actor,
                                                            if_version=if_version))


def remove(db: Database, principal: Principal, collection_id: int, record_id: int) -> int:
    with db.transaction() as conn:
        collection = collection_for_member(conn, principal, collection_id, lock=True)
        return records.record_remove(conn, collection, record_id, principal.actor)


def clear_facts(db: Database, principal: Principal, collection_id: int) -> tuple[Collection, dict[str, int]]:
    """The collection and what a confirmation to clear it shows: {count, next_id, versions}, the
    ``seen`` that ``clear`` takes back."""
    with db.connection() as conn:
        collection = collection_for_member(conn, principal, collection_id)
        facts = records.clear_facts(conn, collection.id)
    if facts is None:  # deleted between the two statements
        raise NotFound(f"unknown collection {collection_id}")
    return collection, facts


def clear(db: Database, principal: Principal, collection_id: int, *,
          seen: dict[str, int] | None = None) -> tuple[Collection, int]:
    """Every live record removed; the table, its grants and next_id stay. (collection, how many).
    ``seen`` (from ``clear_facts``, as a confirmation showed it): only while the live records are
    still those, else PreconditionFailed with nothing removed (records.clear_records)."""
    with db.transaction() as conn:
        collection = collection_for_member(conn, principal, collection_id, lock=True)
        return collection, records.clear_records(conn, collection, principal.actor, seen=seen)


def export(db: Database, principal: Principal, collection_id: int, *,
           batch: int = 500) -> tuple[Collection, Iterator[bytes]]:
    """The collection and its live records as JSONL, streamed in pieces of bounded size."""
    with db.connection() as conn:
        collection = collection_for_member(conn, principal, collection_id)
    return collection, records.export_jsonl(db, collection, batch=batch)

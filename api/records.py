"""The Databases page's record routes: list or search, read, add, change, remove, clear and export
the records of one collection, acting as the operator (an organisation member, with write on every
collection of the organisation).

where and order travel as JSON in the query string (order may also be the plain string
"column desc"); query runs the text search instead of a listing, with the same since, order,
limit and offset. Every record carries display_path
so the provenance strip can look it up.
"""
from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, Response, jsonify, request

from api.auth import principal, requires
from api.context import (INT64_MAX, check_shape, db, if_match_version, json_body, json_mistake, number_problem,
                         too_deep, too_long_number)
from store import member_records
from store.errors import Invalid

bp = Blueprint("records", __name__)

# Records read per fetch from the export's cursor (at most; store.records fits each fetch to its
# bytes). What is sent goes in pieces of at most store.records.EXPORT_PIECE_BYTES, however many
# records a piece holds.
EXPORT_BATCH = 500


# What a person may have meant by each JSON argument, for a refusal of text that is not JSON.
_JSON_EXAMPLE = {"where": 'an object such as {"status": "new"}',
                 "order": '{"column": "updated_at", "direction": "desc"}, or the plain text "updated_at desc"'}


def _json_arg(name: str, broken: dict[str, str]) -> Any:
    """A query-string argument holding JSON. Text that is not JSON goes to the store as the string
    it is, so the store reports every other argument's problem in the same 422, and the sentence
    saying why it is not JSON is kept in ``broken`` to stand in for the store's (which would call
    {"status": "new",} the wrong kind of value: it is JSON gone wrong). order may be the plain
    string "column desc": text that does not start like JSON is not broken JSON."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = json.loads(raw)
    except RecursionError:  # the decoder recurses once per level: thousands of [ are not a filter
        too_deep(name)
    except ValueError as exc:
        if name != "order" or raw.lstrip().startswith(("{", "[", '"')):
            mistake = json_mistake(exc, lines=False)
            if mistake is None:
                too_long_number(name)
            broken[name] = f"{name} is not valid JSON: {mistake}; send {_JSON_EXAMPLE[name]}"
        return raw
    check_shape(value, name)
    return value


def _not_json(exc: Invalid | None, broken: dict[str, str]) -> Invalid:
    """The store's refusal (``exc``) with its problem of each argument in ``broken`` replaced by
    the sentence saying why the argument is not JSON, in the store's order of problems. (A text
    where or a text order starting like JSON is always one of the store's problems.)"""
    message = exc.message if exc is not None else ""
    problems: list[str] = []
    for problem in exc.problems if exc is not None else []:
        name = problem.split(":", 1)[0]
        if name in broken:
            if broken[name] in problems:  # (order's column and direction: one sentence for both)
                message = message.replace("\n- " + problem, "")
                continue
            message = message.replace(problem, broken[name])
            problem = broken[name]
        problems.append(problem)
    missing = [sentence for sentence in broken.values() if sentence not in problems]
    problems = [*missing, *problems]
    return Invalid(message if exc is not None and not missing else "; ".join(problems), problems)


def _int_arg(name: str) -> Any:
    """An integer query argument (ASCII digits only: int() would read '١' as 1); anything else is
    passed on as text so the store can say what it got, with the other arguments' problems."""
    raw = request.args.get(name)
    if raw is None or raw == "":
        return None
    return raw if number_problem(raw, name, maximum=INT64_MAX) else int(raw.strip())


@bp.get("/api/collections/<int:collection_id>/records")
@requires("user")
def list_or_search(collection_id: int):  # type: ignore[no-untyped-def]
    """{total, records, columns}: a listing (where, since, order, limit, offset), or with query the
    text search: the hits ranked (or sorted by order), narrowed by where and since, paged by limit
    and offset."""
    broken: dict[str, str] = {}
    try:
        found = member_records.find(
            db(), principal(), collection_id, query=request.args.get("query"), where=_json_arg("where", broken),
            since=request.args.get("since") or None, order=_json_arg("order", broken),
            limit=_int_arg("limit"), offset=_int_arg("offset"))
    except Invalid as exc:
        raise (_not_json(exc, broken) if broken else exc) from None
    if broken:
        raise _not_json(None, broken)
    return jsonify(found)


@bp.post("/api/collections/<int:collection_id>/records")
@requires("user")
def add(collection_id: int):  # type: ignore[no-untyped-def]
    """{body} -> {record, merged}: 201 for a new record; 200 when the unique column matched a live
    record and the body was merged into it (merged is that record's id)."""
    result = member_records.add(db(), principal(), collection_id, json_body())
    out = {"record": result.record, "merged": result.merged}
    if result.warnings:
        out["warnings"] = result.warnings
    return jsonify(out), 200 if result.merged is not None else 201


@bp.delete("/api/collections/<int:collection_id>/records")
@requires("user")
def clear(collection_id: int):  # type: ignore[no-untyped-def]
    """Remove every live record; the table, its grants and next_id stay."""
    collection, cleared = member_records.clear(db(), principal(), collection_id)
    return jsonify({"cleared": cleared, "collection": collection.name})


@bp.get("/api/collections/<int:collection_id>/records/<int:record_id>")
@requires("user")
def get(collection_id: int, record_id: int):  # type: ignore[no-untyped-def]
    """The record, with its version as the ETag a conditional PATCH sends back as If-Match."""
    record = member_records.get(db(), principal(), collection_id, record_id)
    return _with_version(jsonify(record), record)


def _with_version(resp: Response, record: dict[str, Any]) -> Response:
    resp.headers["ETag"] = f'"{record["version"]}"'
    return resp


@bp.patch("/api/collections/<int:collection_id>/records/<int:record_id>")
@requires("user")
def update(collection_id: int, record_id: int):  # type: ignore[no-untyped-def]
    """{body} (the columns that change; null clears an optional one) -> {record, warnings}.
    If-Match: <version> makes it conditional (412 when the record changed since)."""
    if_version = if_match_version("the record")
    result = member_records.update(db(), principal(), collection_id, record_id, json_body(), if_version=if_version)
    return _with_version(jsonify({"record": result.record, "warnings": result.warnings}), result.record)


@bp.delete("/api/collections/<int:collection_id>/records/<int:record_id>")
@requires("user")
def remove(collection_id: int, record_id: int):  # type: ignore[no-untyped-def]
    return jsonify({"removed": member_records.remove(db(), principal(), collection_id, record_id)})


@bp.get("/api/collections/<int:collection_id>/export")
@requires("user")
def export(collection_id: int):  # type: ignore[no-untyped-def]
    """The live records as JSONL, one record per line by id, streamed in pieces of at most 256 KB:
    memory bounded by bytes however many records the collection holds, and however large."""
    wanted = request.args.get("format")
    if wanted is not None and wanted.lower() not in ("jsonl", "ndjson"):
        # (asked for CSV, a caller would otherwise save JSONL under the name it chose)
        problem = (f"format: the API exports JSONL only, not {wanted!r}; leave format out, or take CSV from the "
                   f"web app's table page (Export as CSV, /databases/{collection_id}/export.csv)")
        raise Invalid(problem, [problem])
    collection, lines = member_records.export(db(), principal(), collection_id, batch=EXPORT_BATCH)
    return Response(lines, mimetype="application/x-ndjson", headers={
        "Content-Disposition": f'attachment; filename="{collection.name}.jsonl"',
        "Cache-Control": "no-store"})

"""record_list and record_search as SQL: where, order, since and limit parsed against the columns,
composed into one statement over the live records, and the hint for a narrowed list that found
nothing.

Every argument is checked before any SQL runs and every problem is reported at once. Column names
reach SQL only as bound parameters (``content_json -> %s``), never as identifiers, so nothing a
model sends is ever spliced into a statement. Each where term matches by its column's type, as the
specification's table says; similar spelling (pg_trgm word_similarity >= 0.5) is scoped to one text
or open array column and only matches for terms without a digit, because against a whole record, or
with dates, hashes and versions, close neighbours are too many to mean anything. Every text or open
array term's similarity adds to record_search's rank, digit or not.
"""
from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from typing import Any

from store.columns import Column
from store.db import Conn, like_escape
from store.errors import rejected
from store.paths import nfc
from store.search_query import websearch_text
from store.values import NUL_PROBLEM, is_number, parse_datetime, shown, utc_iso

MAX_WHERE = 8
MAX_TERM = 200
DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MAX_QUERY = 1000
SIMILARITY_FLOOR = 0.5
META_ORDER = ("id", "created_at", "updated_at")

# The columns a record is returned from; ``a`` is the artifacts row.
RECORD_COLUMNS = ("a.collection_id, a.key, a.display_path, a.content_json, a.version, a.created_at,"
                  " a.updated_at, a.created_by, a.updated_by")
LIVE = "a.kind = 'object' AND a.deleted_at IS NULL"
# A record's updated_at as the records' index reads it (sql/157: the same instant, in a column
# only records fill, so that a note's save does not change an indexed column).
UPDATED = "a.record_updated_at"
_NULL = "coalesce(jsonb_typeof(a.content_json -> %s), 'null') = 'null'"
_ITEMS = ("jsonb_array_elements_text(CASE WHEN jsonb_typeof(a.content_json -> %s) = 'array'"
          " THEN a.content_json -> %s END) AS item(v)")


@dataclass
class Fragment:
    """A piece of SQL with its bound parameters, in order."""
    sql: str
    params: list[Any] = field(default_factory=list)


@dataclass
class Filters:
    """Parsed where: the conditions (ANDed) and the similarity terms that add to a search's rank."""
    conditions: list[Fragment] = field(default_factory=list)
    rank: list[Fragment] = field(default_factory=list)


def _contains(term: str) -> str:
    """The ILIKE pattern for 'holds ``term`` anywhere'."""
    return "%" + like_escape(term) + "%"


def _decimal(value: int | float) -> Decimal:
    return Decimal(value) if isinstance(value, int) else Decimal(repr(value))


def _has_digit(term: str) -> bool:
    return any(ch.isdigit() for ch in term)


def _term_problem(term: str) -> str | None:
    if len(term) > MAX_TERM:
        return f"the term is {len(term)} characters long; at most {MAX_TERM} are allowed"
    if not term.strip():
        return "the term is empty; send text to match, or null for records without a value"
    if "\x00" in term:
        return f"the term {NUL_PROBLEM}"
    return None


def filterable(columns: Sequence[Column]) -> str:
    return ", ".join(["id", *(c.name for c in columns)])


def parse_where(columns: Sequence[Column], where: object, problems: list[str]) -> Filters:
    """Parse ``where`` into filters, appending every problem to ``problems``."""
    out = Filters()
    if where is None:
        return out
    if not isinstance(where, dict):
        problems.append(f'where: expected an object such as {{"status": "new"}}; got {shown(where)}')
        return out
    if len(where) > MAX_WHERE:
        problems.append(f"where: at most {MAX_WHERE} columns; got {len(where)}")
        return out
    by_name = {c.name: c for c in columns}
    for name, term in where.items():
        if name == "id":
            if term is None:  # null matches a missing or null value, and a record always has its id
                out.conditions.append(Fragment("false", []))
            elif is_number(term) and isinstance(term, int) and term >= 1:
                out.conditions.append(Fragment("a.key = %s", [str(term)]))
            else:
                problems.append(f'where "id": expected a record id (a whole number from 1); got {shown(term)}')
            continue
        column = by_name.get(name)
        if column is None:
            problems.append(f'where "{name}": unknown column; you can filter on {filterable(columns)}')
            continue
        if term is None:
            out.conditions.append(Fragment(_NULL, [name]))
            continue
        problem = _column_term(column, term, out)
        if problem:
            problems.append(f'where "{name}": {problem}')
    return out


def _column_term(column: Column, term: object, out: Filters) -> str | None:
    """Add the condition for one non-null term, or return why the term does not fit the column."""
    name, kind = column.name, column.type
    if isinstance(term, str):
        term = nfc(term)  # values are stored NFC (store.values), listed values too
    if kind in ("text", "array") and column.values is not None:
        if not isinstance(term, str) or term not in column.values:
            return f"expected one of {', '.join(column.values)}; got {shown(term)}"
        if kind == "text":
            out.conditions.append(Fragment("(a.content_json ->> %s) = %s", [name, term]))
        else:
            out.conditions.append(Fragment("(a.content_json -> %s) @> %s::jsonb", [name, json.dumps([term])]))
        return None
    if kind in ("text", "array"):
        if not isinstance(term, str):
            return f"expected a text term (at most {MAX_TERM} characters) or null; got {shown(term)}"
        problem = _term_problem(term)
        if problem:
            return problem
        fuzzy = not _has_digit(term)
        if kind == "text":
            sql = "(a.content_json ->> %s) ILIKE %s"
            params: list[Any] = [name, _contains(term)]
            if fuzzy:
                sql = f"({sql} OR word_similarity(%s, a.content_json ->> %s) >= {SIMILARITY_FLOOR})"
                params += [term, name]
            out.conditions.append(Fragment(sql, params))
            # Ranked by similarity whether or not the term has a digit: the digit rule keeps
            # neighbours out of the matches, and among the matches the closer value comes first.
            out.rank.append(Fragment("coalesce(word_similarity(%s, a.content_json ->> %s), 0)", [term, name]))
        else:
            match = "item.v ILIKE %s"
            params = [name, name, _contains(term)]
            if fuzzy:
                match += f" OR word_similarity(%s, item.v) >= {SIMILARITY_FLOOR}"
                params.append(term)
            out.conditions.append(Fragment(f"EXISTS (SELECT 1 FROM {_ITEMS} WHERE {match})", params))
            out.rank.append(Fragment(
                f"coalesce((SELECT max(word_similarity(%s, item.v)) FROM {_ITEMS}), 0)", [term, name, name]))
        return None
    if kind == "boolean":
        if not isinstance(term, bool):
            return f"expected true, false or null; got {shown(term)}"
        out.conditions.append(Fragment("(a.content_json -> %s) = %s::jsonb", [name, json.dumps(term)]))
        return None
    if kind == "number":
        return _range(name, term, out, "record_number(a.content_json -> %s)", "a number",
                      lambda v: _decimal(v) if is_number(v) else None, "42")
    if kind == "datetime":
        def instant(v: object) -> datetime | None:
            moment = parse_datetime(v) if isinstance(v, str) else None
            return moment if isinstance(moment, datetime) else None
        return _range(name, term, out, "record_instant(a.content_json -> %s)",
                      "an ISO 8601 datetime with a timezone", instant, '"2024-05-01T00:00:00Z"')
    return f"the column has an unknown type {kind}"


def _range(name: str, term: object, out: Filters, expr: str, what: str, convert: Any, example: str) -> str | None:
    """Exact, or {"gte": v}, {"lte": v} or both, for numbers and datetimes."""
    expected = f'expected {what}, or {{"gte": {example}}}, {{"lte": {example}}} or both'
    if isinstance(term, dict):
        if not term or set(term) - {"gte", "lte"}:
            return f"{expected}; got {shown(term)}"
        for op, sign in (("gte", ">="), ("lte", "<=")):
            if op in term:
                value = convert(term[op])
                if value is None:
                    return f'{expected}; got {shown(term[op])} for "{op}"'
                out.conditions.append(Fragment(f"{expr} {sign} %s", [name, value]))
        return None
    value = convert(term)
    if value is None:
        return f"{expected}; got {shown(term)}"
    out.conditions.append(Fragment(f"{expr} = %s", [name, value]))
    return None


def parse_order(columns: Sequence[Column], order: object, since: bool, problems: list[str]) -> Fragment:
    """The ORDER BY: a declared non-array column, id, created_at or updated_at; default id asc, or
    updated_at asc with since. Ties break by id so that paging is stable."""
    tiebreak = "(a.key::bigint) ASC"
    if order is None:
        return Fragment(f"{UPDATED} ASC, {tiebreak}" if since else tiebreak)
    allowed = ", ".join([*META_ORDER, *(c.name for c in columns if c.type != "array")])
    name: object
    direction: object = "asc"
    if isinstance(order, str):
        parts = order.split()
        name = parts[0] if parts else ""
        if len(parts) == 2:
            direction = parts[1].lower()
        elif len(parts) > 2:
            direction = None
    elif isinstance(order, dict) and set(order) <= {"column", "direction"}:
        name = order.get("column")
        direction = str(order.get("direction") or "asc").lower()
    else:
        problems.append(f'order: expected {{"column": "<name>", "direction": "asc" or "desc"}} or a string such as'
                        f' "updated_at desc"; got {shown(order)}')
        return Fragment(tiebreak)
    # Both halves are checked, so a bad column and a bad direction are told at once.
    bad_direction = direction not in ("asc", "desc")
    if bad_direction:
        problems.append(f"order: the direction is asc or desc; got {shown(order)}")
    by_name = {c.name: c for c in columns}
    sql_dir = "ASC NULLS LAST" if direction == "asc" else "DESC NULLS LAST"
    column = by_name.get(name) if isinstance(name, str) else None
    if name not in ("id", "created_at", "updated_at") and (column is None or column.type == "array"):
        if name is None or name == "":
            problems.append(f"order: name a column to order by, one of {allowed}")
        else:
            why = "is an array column, which has no order" if column is not None else "is not a column"
            problems.append(f"order: {shown(name)} {why}; order by one of {allowed}")
        return Fragment(tiebreak)
    if bad_direction:
        return Fragment(tiebreak)
    if name == "id":
        return Fragment(f"(a.key::bigint) {sql_dir}")
    if name in ("created_at", "updated_at"):
        return Fragment(f"{UPDATED if name == 'updated_at' else 'a.created_at'} {sql_dir}, {tiebreak}")
    assert column is not None
    expr = {"number": "record_number(a.content_json -> %s)", "datetime": "record_instant(a.content_json -> %s)",
            "boolean": "(a.content_json -> %s)"}.get(column.type, "(a.content_json ->> %s)")
    return Fragment(f"{expr} {sql_dir}, {tiebreak}", [column.name])


def parse_since(since: object, problems: list[str]) -> datetime | None:
    if since is None:
        return None
    moment = parse_datetime(since) if isinstance(since, str) else "unparsable"
    if moment == "out of range":
        problems.append(f"since: {shown(since)} falls outside the years 0001 to 9999 once in UTC; "
                        "send a timestamp within them, such as a wake-up's previous_run_at")
        return None
    if not isinstance(moment, datetime):
        problems.append("since: expected an ISO 8601 timestamp with a timezone, such as a wake-up's previous_run_at"
                        f" (2024-05-01T09:30:00Z); got {shown(since)}")
        return None
    return moment


def parse_limit(limit: object, problems: list[str], *, paged: bool = True) -> int:
    """``paged``: the call takes an offset too (record_search, the tool, does not)."""
    if limit is None:
        return DEFAULT_LIMIT
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        problems.append(f"limit: expected a whole number from 1 to {MAX_LIMIT}; got {shown(limit)}"
                        + ("; page further with offset" if paged else "; narrow the query or add where"))
        return DEFAULT_LIMIT
    return limit


# The largest offset PostgreSQL takes (a bigint); any offset past a collection's records reads none.
MAX_OFFSET = 2**63 - 1


def parse_offset(offset: object, problems: list[str]) -> int:
    if offset is None:
        return 0
    if not isinstance(offset, int) or isinstance(offset, bool) or not 0 <= offset <= MAX_OFFSET:
        problems.append(f"offset: expected a whole number from 0 to {MAX_OFFSET}; got {shown(offset)}")
        return 0
    return offset


def reject(tool: str, problems: list[str]) -> None:
    if problems:
        raise rejected(f"{tool} arguments rejected", problems)


# --- record_list ----------------------------------------------------------------------------------

@dataclass
class ListPlan:
    filters: Filters
    since: datetime | None
    order: Fragment
    limit: int
    offset: int


def plan_list(columns: Sequence[Column], *, where: object = None, since: object = None, order: object = None,
              limit: object = None, offset: object = None, tool: str = "record_list") -> ListPlan:
    """Check every argument of a listing; Invalid lists every problem at once."""
    problems: list[str] = []
    filters = parse_where(columns, where, problems)
    moment = parse_since(since, problems)
    plan = ListPlan(filters, moment, parse_order(columns, order, moment is not None, problems),
                    parse_limit(limit, problems), parse_offset(offset, problems))
    reject(tool, problems)
    return plan


def _where_sql(collection_ids: Fragment, filters: Filters, since: datetime | None) -> Fragment:
    parts = [collection_ids.sql, LIVE]
    params = list(collection_ids.params)
    if since is not None:
        parts.append(f"{UPDATED} >= %s")
        params.append(since)
    for cond in filters.conditions:
        parts.append(cond.sql)
        params += cond.params
    return Fragment(" AND ".join(parts), params)


def run_list(conn: Conn, collection_id: int, plan: ListPlan) -> tuple[list[dict[str, Any]], int]:
    """(the page of rows, total matching regardless of paging). Two statements: the page follows
    an index in order and stops at limit; the count does not have to sort."""
    where = _where_sql(Fragment("a.collection_id = %s", [collection_id]), plan.filters, plan.since)
    rows = conn.execute(
        f"SELECT {RECORD_COLUMNS} FROM artifacts a WHERE {where.sql} ORDER BY {plan.order.sql}"
        " LIMIT %s OFFSET %s", [*where.params, *plan.order.params, plan.limit, plan.offset]).fetchall()
    if not rows and plan.offset == 0:
        return rows, 0
    if len(rows) < plan.limit and (rows or plan.offset == 0):
        return rows, plan.offset + len(rows)
    total = conn.execute(f"SELECT count(*) AS n FROM artifacts a WHERE {where.sql}", where.params).fetchone()["n"]
    return rows, total


def describe_columns(columns: Sequence[Column]) -> str:
    out = []
    for c in columns:
        flags = [c.type]
        if c.required:
            flags.append("required")
        if c.unique:
            flags.append("unique")
        if c.values is not None:
            flags.append("values " + " | ".join(c.values))
        out.append(f"{c.name} ({', '.join(flags)})")
    return "; ".join(out) or "none declared"


def empty_hint(conn: Conn, collection_id: int, name: str, columns: Sequence[Column], *,
               where: object, since: object) -> str:
    """Why a narrowed listing found nothing and what to try: the ask, the collection's size and last
    change, its columns, that a bigger limit changes nothing, and the since or where advice."""
    facts = conn.execute(
        f"SELECT count(*) AS n, max(a.updated_at) AS newest FROM artifacts a WHERE a.collection_id = %s AND {LIVE}",
        (collection_id,)).fetchone()
    asked = []
    if where is not None:
        asked.append(f"where {json.dumps(where, ensure_ascii=False)}")
    if since is not None:
        asked.append(f"since {since}")
    parts = [f"record_list on {name} with {' and '.join(asked)} matched no records."]
    if facts["n"]:
        parts.append(f"{name} holds {facts['n']} live record{'s' if facts['n'] != 1 else ''};"
                     f" the newest change was at {utc_iso(facts['newest'])}.")
    else:
        parts.append(f"{name} holds no live records.")
    parts.append(f"Columns: {describe_columns(columns)}.")
    parts.append("A larger limit will not change the answer: total already counts every match.")
    if since is not None:
        unique = next((c.name for c in columns if c.unique), None)
        check = f"where on the unique column {unique}" if unique else "where on a column"
        parts.append("since keeps only records created or updated at or after it, so older records are left out;"
                     f" to check whether a record exists, use {check} without since, or record_search.")
    else:
        parts.append("where matches by column type: text by substring, and by similar spelling when the term has"
                     " no digit; a column with values exactly (one of its values); an array by an item the same"
                     ' way; number and datetime exactly or with {"gte": …, "lte": …}; boolean and id exactly;'
                     " null matches a missing or null value. record_search matches words anywhere in the values.")
    return " ".join(parts)


# --- record_search --------------------------------------------------------------------------------

_ONE_TOKEN = re.compile(r'^[^\s"]+$')


def check_query(query: object, problems: list[str]) -> str:
    if not isinstance(query, str) or not query.strip():
        problems.append('query: expected words to search for, such as "acme OR globex"; got ' + shown(query))
        return ""
    if len(query) > MAX_QUERY:
        problems.append(f"query: {len(query)} characters long; at most {MAX_QUERY} are allowed")
    if "\x00" in query:
        problems.append(f"query {NUL_PROBLEM}")
    return nfc(query.strip())  # the values it searches are stored NFC


def one_token(query: str) -> bool:
    """A query of one token (no spaces, quotes, exclusion or OR) also matches values by substring."""
    return bool(_ONE_TOKEN.match(query)) and not query.startswith("-") and query.lower() != "or"


def run_search(conn: Conn, collection_ids: list[int], query: str, filters: Filters, limit: int, *,
               offset: int = 0, since: datetime | None = None,
               order: Fragment | None = None) -> tuple[list[dict[str, Any]], int]:
    """(the hits from ``offset`` up to ``limit`` of them, how many matched). Rank is ts_rank_cd plus
    the similarity of every text or open-array where term, then the newest change first; ``order``
    (from ``parse_order``) sorts the hits by a column instead. ``since`` keeps the hits created or
    updated at or after it, as it does for a listing."""
    match = "a.search @@ websearch_to_tsquery('simple', %s)"
    words = websearch_text(query)
    params: list[Any] = [words]
    if one_token(query):
        match = f"({match} OR a.search_blob ILIKE %s)"
        params.append(_contains(query))
    rank = " + ".join(["ts_rank_cd(a.search, websearch_to_tsquery('simple', %s))", *(r.sql for r in filters.rank)])
    rank_params: list[Any] = [words, *(p for r in filters.rank for p in r.params)]
    where = _where_sql(Fragment("a.collection_id = ANY(%s)", [collection_ids]), filters, since)
    by = order if order is not None else Fragment("rank DESC, a.updated_at DESC, a.id")
    rows = conn.execute(
        f"SELECT {RECORD_COLUMNS}, ({rank}) AS rank, count(*) OVER () AS total FROM artifacts a"
        f" WHERE {where.sql} AND {match} ORDER BY {by.sql} LIMIT %s OFFSET %s",
        [*rank_params, *where.params, *params, *by.params, limit, offset]).fetchall()
    if rows:
        return rows, rows[0]["total"]
    if offset == 0:
        return rows, 0
    # A page past the last hit still says how many there are.
    total = conn.execute(f"SELECT count(*) AS n FROM artifacts a WHERE {where.sql} AND {match}",
                         [*where.params, *params]).fetchone()["n"]
    return rows, total


def search_hint(query: str) -> str:
    return (f"record_search for {json.dumps(query, ensure_ascii=False)} matched no records. It matches whole words in"
            " the values and ids (terms are ANDed; OR widens, quotes keep a phrase, - excludes); a one-token query"
            " also matches by substring. It is not fuzzy: a misspelled word finds nothing. Try fewer words, OR"
            " between alternatives, or record_list with where on one column.")

"""Per-type checks of record values: what a column accepts, and the exact line a rejected value gets.

A body is checked whole and every problem comes back at once, in the specification's wording
(``column "score": expected number; got "42"``), so that a model fixes all of them in one retry.
There is no coercion: "42" is not a number and "true" is not a boolean. The only rewriting is of
datetimes, which are stored in UTC so that equal instants compare equal whatever offset they came in.
"""
from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from store.paths import nfc

if TYPE_CHECKING:  # store.columns imports shown and is_number from here
    from store.columns import Column

MAX_ITEMS = 50
MAX_ITEM_LENGTH = 200
_MISSING = object()


def shown(value: object, limit: int = 80) -> str:
    """A value as the model sent it (JSON), shortened so one huge value cannot flood the message.
    A value JSON cannot print back (nested deeper than the encoder recurses) is named by its type."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (RecursionError, ValueError, TypeError):
        return {list: "a list", dict: "an object"}.get(type(value), type(value).__name__)
    if len(text) <= limit:
        return text
    if isinstance(value, str):  # keep the quotes, so the cut reads as a cut string
        return json.dumps(value[: max(limit - 5, 1)], ensure_ascii=False)[:-1] + '..."'
    return text[: limit - 3] + "..."


def is_number(value: object) -> bool:
    """A finite JSON number: an int that is not a bool, or a finite float."""
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and math.isfinite(value))


def _past_doubles(value: object) -> bool:
    """A number no JSON reader holds: 1e400 (which Python's reader makes infinity, as JavaScript's
    does) or an integer written out past 1.8e308, refused alike whichever way it was written."""
    if isinstance(value, float):
        return math.isinf(value)
    return isinstance(value, int) and not isinstance(value, bool) and abs(value) > sys.float_info.max


def utc_iso(moment: datetime) -> str:
    """The stored form of an instant: UTC, ISO 8601 with a Z, microseconds only when present."""
    text = moment.astimezone(timezone.utc).replace(tzinfo=None).isoformat()
    return text + "Z"


def parse_datetime(value: str) -> datetime | str:
    """The aware datetime, or the reason it is not one ('unparsable', 'no timezone' or 'out of range')."""
    text = value.strip()
    # ASCII and printable only: fromisoformat stops reading at a NUL, so "…Z\x00 anything" would
    # pass as the datetime before it.
    if len(text) < 10 or not text[:4].isdigit() or not (text.isascii() and text.isprintable()):
        return "unparsable"
    try:
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        return "unparsable"
    if moment.tzinfo is None or moment.utcoffset() is None:
        return "no timezone"
    try:
        # Stored in UTC: an instant whose UTC form leaves years 1..9999 (0001-01-01T00:00:00+01:00)
        # has no stored form.
        moment.astimezone(timezone.utc)
    except OverflowError:
        return "out of range"
    return moment


NUL_PROBLEM = "contains a NUL character (\\u0000), which text cannot hold; remove it"


# A unique value is indexed whole (sql/001's artifacts_live_identity, a btree), and PostgreSQL
# refuses a btree entry past about 2 700 bytes with an internal error: the limit is checked here
# first, with room for the collection id beside it.
MAX_IDENTITY_BYTES = 2000


def number_text(value: int | float) -> str:
    """A number's decimal string: 42 and 42.0 are both '42', 1.5 is '1.5', 1e-7 is '0.0000001', 1e23
    is '100000000000000000000000' (never exponent notation, so equal numbers always read alike).
    A float is read as the shortest decimal that gives it back, which is what json.dumps writes
    and so what PostgreSQL stores: the same text whether the record was just sent (1e23, a float)
    or read back from jsonb (100000000000000000000000, an int). The float's own binary value,
    99999999999999991611392, would give the stored number a second identity."""
    if isinstance(value, int):
        return str(value)
    exact = Decimal(repr(value))
    if exact == exact.to_integral_value():
        return str(int(exact))
    return format(exact.normalize(), "f")


def identity_text(value: object) -> str | None:
    """A unique value normalised: text NFC, trimmed and lowercased; a number its decimal string.
    None for blank text ("" or only spaces), which is no value: otherwise every record left blank
    would share one identity and merge into one."""
    if isinstance(value, str):
        return nfc(value).strip().lower() or None
    if is_number(value):
        return number_text(value)  # type: ignore[arg-type]
    return None


def check_value(column: Column, value: object) -> tuple[Any, str | None]:
    """(the value to store, None) when ``column`` accepts ``value``; (None, the problem) otherwise.
    The problem is the part after ``column "x": ``."""
    stored, problem = _check_type(column, value)
    if problem is None and column.unique:
        size = len((identity_text(stored) or "").encode())
        if size > MAX_IDENTITY_BYTES:
            return None, (f"a unique value is at most {MAX_IDENTITY_BYTES} bytes once normalised (the store "
                          f"indexes it whole); this one is {size} bytes; send a shorter value")
    return stored, problem


def _check_type(column: Column, value: object) -> tuple[Any, str | None]:
    kind = column.type
    if kind == "text":
        if not isinstance(value, str):
            return None, f"expected text; got {shown(value)}"
        if "\x00" in value:  # (store.db would refuse it too, but alone: here it joins the other problems)
            return None, NUL_PROBLEM
        value = nfc(value)  # stored NFC, and listed values are NFC: compare like with like
        if column.values is not None and value not in column.values:
            return None, f"expected one of {', '.join(column.values)}; got {shown(value)}"
        return value, None
    if kind == "number":
        if _past_doubles(value):
            return None, ("expected a number no larger than 1.8e308 either way, the largest a JSON reader "
                          f"holds; got {'one larger' if isinstance(value, float) else shown(value, 40)}")
        if not is_number(value):
            return None, f"expected number; got {shown(value)}"
        return value, None
    if kind == "boolean":
        if not isinstance(value, bool):
            return None, f"expected true or false; got {shown(value)}"
        return value, None
    if kind == "datetime":
        if not isinstance(value, str):
            return None, f"expected an ISO 8601 datetime with a timezone, such as 2024-05-01T09:30:00Z; got {shown(value)}"
        moment = parse_datetime(value)
        if moment == "unparsable":
            return None, (f"unparsable datetime; got {shown(value)}; send ISO 8601 with a timezone, "
                          "such as 2024-05-01T09:30:00Z")
        if moment == "no timezone":
            return None, (f"datetime without a timezone; got {shown(value)}; add Z or an offset, "
                          "such as 2024-05-01T09:30:00+02:00")
        if moment == "out of range":
            return None, (f"datetime {shown(value)} falls outside the years 0001 to 9999 once in UTC, "
                          "where datetimes are stored; send one within them")
        return utc_iso(moment), None  # type: ignore[arg-type]
    if kind == "array":
        return _check_array(column, value)
    return None, f"the column has an unknown type {kind}; ask the operator to fix the collection's columns"


def _check_array(column: Column, value: object) -> tuple[Any, str | None]:
    if not isinstance(value, list):
        return None, f"expected a list of distinct non-empty strings; got {shown(value)}"
    if len(value) > MAX_ITEMS:
        return None, f"expected at most {MAX_ITEMS} items; got {len(value)}"
    seen: set[str] = set()
    items: list[str] = []
    problems: list[str] = []   # every item's, in the column's one line ("every problem at once")
    for index, item in enumerate(value, 1):
        if not isinstance(item, str) or not item:
            problems.append(f"expected a list of distinct non-empty strings; item {index} is {shown(item)}")
            continue
        if "\x00" in item:
            problems.append(f"item {index}: {NUL_PROBLEM}")
            continue
        item = nfc(item)  # "é" and "e\u0301" are one item
        if len(item) > MAX_ITEM_LENGTH:
            problems.append(f"item {index} is {len(item)} characters long; at most {MAX_ITEM_LENGTH} are allowed")
        elif item in seen:
            problems.append(f"expected distinct items; {shown(item)} appears twice")
        elif column.values is not None and item not in column.values:
            problems.append(f"expected items from {', '.join(column.values)}; got {shown(item)}")
        seen.add(item)
        items.append(item)
    return (None, "; ".join(problems)) if problems else (items, None)


def declared_list(columns: Sequence[Column]) -> str:
    return ", ".join(c.name for c in columns) or "(none)"


def check_body(columns: Sequence[Column], body: dict[str, Any], *,
               patch: bool = False) -> tuple[dict[str, Any], list[str]]:
    """Validate ``body`` against ``columns``. Returns (the values to store, every problem line).

    A full body (record_add) must carry every required column; a patch (record_update) carries only
    the columns that change, and null in it clears an optional column. In a full body null is the
    same as leaving the column out; it stays in the result as None so that a body merged into an
    existing record (the unique column matched) clears that column as a patch would."""
    by_name = {c.name: c for c in columns}
    clean: dict[str, Any] = {}
    problems: list[str] = []
    for name, value in body.items():
        column = by_name.get(name)
        if column is None:
            problems.append(f'column "{name}": unknown column; declared columns are {declared_list(columns)}')
            continue
        if value is None:
            if column.required:
                problems.append(f'column "{name}": missing required column' if not patch else
                                f'column "{name}": required, so it cannot be cleared (null); give it a value')
            else:
                clean[name] = None  # null clears (a patch) or leaves the column empty (a body)
            continue
        stored, problem = check_value(column, value)
        if problem:
            problems.append(f'column "{name}": {problem}')
        else:
            clean[name] = stored
    if not patch:
        for column in columns:
            if column.required and column.name not in body:
                problems.append(f'column "{column.name}": missing required column')
    return clean, problems


def record_problems(columns: Sequence[Column], content: dict[str, Any],
                    skip: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """Problems of a stored record against the current columns (a retyped column, a changed
    values list, a column that became required), leaving out the columns in ``skip``."""
    problems = []
    for column in columns:
        if column.name in skip:
            continue
        value = content.get(column.name, _MISSING)
        if value is _MISSING or value is None:
            if column.required:
                problems.append(f'column "{column.name}": missing required column')
            continue
        _, problem = check_value(column, value)
        if problem:
            problems.append(f'column "{column.name}": {problem}')
    return problems

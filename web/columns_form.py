"""The columns editor as a plain HTML form: one row per column (name, type, description, listed
values one per line, required, unique, remove), plus blank rows to add. Rows carry the column's current name in
a hidden ``from`` input, so a changed name goes to the store as ``rename_from`` and the records
keep their values. Every rule is the store's (store.columns); its sentences are shown as they are.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from werkzeug.datastructures import MultiDict

from store.columns import TYPES

BLANK_ROWS = 3
_ROW = re.compile(r"col-([0-9]{1,3})-name\Z")


def rows_of(columns: Sequence[Mapping[str, Any]], *, blank: int = BLANK_ROWS) -> list[dict[str, Any]]:
    """Editor rows for the current columns, then ``blank`` empty rows to add columns."""
    rows = [{"name": c["name"], "type": c["type"], "description": c.get("description", ""),
             "values": "\n".join(c.get("values") or []), "values_was": json.dumps(c.get("values") or []),
             "required": bool(c.get("required")), "unique": bool(c.get("unique")), "from": c["name"],
             "remove": False} for c in columns]
    return rows + [blank_row() for _ in range(blank)]


def blank_row() -> dict[str, Any]:
    return {"name": "", "type": "text", "description": "", "values": "", "values_was": "", "required": False,
            "unique": False, "from": "", "remove": False}


def parse(form: MultiDict) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the columns to send to the store, the rows as typed, for showing the form again)."""
    indexes = sorted(int(m.group(1)) for key in form if (m := _ROW.match(key)))
    rows: list[dict[str, Any]] = []
    for i in indexes:
        get = lambda f, i=i: form.get(f"col-{i}-{f}", "")  # noqa: E731
        rows.append({"name": get("name").strip(), "type": get("type"), "description": get("description").strip(),
                     "values": get("values"), "values_was": get("values-was"), "required": bool(get("required")),
                     "unique": bool(get("unique")), "from": get("from"), "remove": bool(get("remove"))})
    columns: list[dict[str, Any]] = []
    for row in rows:
        if row["remove"]:
            continue
        if not row["name"] and not row["description"] and not row["from"] and not row["values"].strip():
            continue  # an untouched blank row
        column: dict[str, Any] = {"name": row["name"], "type": row["type"], "description": row["description"],
                                  "required": row["required"], "unique": row["unique"]}
        values = listed_values(row["values"], row["values_was"])
        if values:
            column["values"] = values
        if row["from"] and row["from"] != row["name"]:
            column["rename_from"] = row["from"]
        columns.append(column)
    return columns, rows


def listed_values(text: str, was: str) -> list[str]:
    """The listed values, one per line as typed (a value may hold commas; each line is stripped and
    blank lines skipped). The editor sends every column on each save, so a list left as shown
    comes back exactly as it was, even a value no line can hold as it is (surrounding spaces or a
    line break, possible through the API): then it is ``was``, the JSON the row carried."""
    text = text.replace("\r\n", "\n")
    try:
        kept = json.loads(was) if was else None
    except ValueError:
        kept = None
    if isinstance(kept, list) and all(isinstance(v, str) for v in kept) and text == "\n".join(kept):
        return kept
    return [v.strip() for v in text.split("\n") if v.strip()]


def types() -> tuple[str, ...]:
    return TYPES

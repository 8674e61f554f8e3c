"""The columns editor as a plain HTML form: one row per column (name, type, description, listed
values one per line, required, unique, remove), plus blank rows to add. Rows carry the column's current name in
a hidden ``from`` input, so a changed name goes to the store as ``rename_from`` and the records
keep their values. Every rule is the store's (store.columns); its sentences are shown as they are.

Each row also carries the definition it was loaded with (hidden ``was`` and ``values-was``), so
that when someone else changed the columns meanwhile (the store refuses the save: the etag moved)
``merge`` can tell what this person changed from what the other did, and show the table as it is
now with this person's change applied on top, instead of a save that would undo the other's.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from werkzeug.datastructures import MultiDict

from store.columns import TYPES
from store.errors import Invalid, rejected

BLANK_ROWS = 3
NEW_TABLE_BLANK_ROWS = 4   # (New table has no columns above its blank rows)
_ROW = re.compile(r"col-([0-9]{1,3})-name\Z")
# Where a store problem names a column: "column 2: ..." (counting the columns sent, from 1),
# 'column 2 ("email"): ...' or 'column "email" ...'.
_PROBLEM_AT = re.compile(r'column (?:([0-9]+)(?: \("[^"]*"\))?|"([a-z][a-z0-9_]*)")[: ]')


FLAGS = ("type", "description", "required", "unique")   # what ``was`` holds besides the name and values


def row_of(column: Mapping[str, Any]) -> dict[str, Any]:
    """The editor row of a current column, carrying that column's definition as loaded."""
    return {"name": column["name"], "type": column["type"], "description": column.get("description", ""),
            "values": "\n".join(column.get("values") or []), "values_was": json.dumps(column.get("values") or []),
            "required": bool(column.get("required")), "unique": bool(column.get("unique")), "from": column["name"],
            "remove": False, "was": json.dumps({k: definition(column)[k] for k in FLAGS})}


def rows_of(columns: Sequence[Mapping[str, Any]], *, blank: int = BLANK_ROWS) -> list[dict[str, Any]]:
    """Editor rows for the current columns, then ``blank`` empty rows to add columns."""
    return [row_of(c) for c in columns] + [blank_row() for _ in range(blank)]


def blank_row() -> dict[str, Any]:
    return {"name": "", "type": "text", "description": "", "values": "", "values_was": "", "required": False,
            "unique": False, "from": "", "remove": False, "was": ""}


def parse(form: MultiDict) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the columns to send to the store, the rows as typed, for showing the form again)."""
    indexes = sorted(int(m.group(1)) for key in form if (m := _ROW.match(key)))
    rows: list[dict[str, Any]] = []
    for i in indexes:
        get = lambda f, i=i: form.get(f"col-{i}-{f}", "")  # noqa: E731
        rows.append({"name": get("name").strip(), "type": get("type"), "description": get("description").strip(),
                     "values": get("values"), "values_was": get("values-was"), "required": bool(get("required")),
                     "unique": bool(get("unique")), "from": get("from"), "remove": bool(get("remove")),
                     "was": get("was")})
    columns: list[dict[str, Any]] = []
    for row in rows:
        if row["remove"]:
            continue
        if untouched(row):
            continue
        column: dict[str, Any] = {"name": row["name"], "type": row["type"], "description": row["description"],
                                  "required": row["required"], "unique": row["unique"]}
        values = listed_values(row["values"], row["values_was"])
        if values:
            column["values"] = values
        if row["from"] and row["from"] != row["name"]:
            column["rename_from"] = row["from"]
        columns.append(column)
    return columns, rows


def removed_and_added(rows: Sequence[Mapping[str, Any]]) -> Invalid | None:
    """The refusal of a save that removes a column and adds a new one of the same name, or None.
    The store is sent the columns that remain, where a column named as a current one, with no
    rename_from, is that column: it would keep the removed column's values under the new
    definition (as a retype does) instead of dropping them, as the operator asked. Two saves say
    it: the removal first, then the new column. (A column renamed to a removed one's name is
    fine: the store moves the renamed column's values there and drops the removed one's.)"""
    removed = {row["from"] for row in rows if row["remove"] and row["from"]}
    added = [row["name"] for row in rows if not row["remove"] and not row["from"] and row["name"] in removed]
    if not added:
        return None
    return rejected("columns not saved: a removed column's name is taken by a new column in the same save",
                    [f'column "{name}" is removed and added again: saved at once, the new "{name}" would keep '
                     f'the removed one\'s values. Save the removal first (it drops "{name}" from every '
                     f'record), then add the new column "{name}"' for name in dict.fromkeys(added)])


def untouched(row: Mapping[str, Any]) -> bool:
    """A blank row left as it was: nothing typed in it and no column behind it (a save skips it)."""
    return not (row["name"] or row["description"] or row["from"] or row["values"].strip())


def editor_rows(rows: list[dict[str, Any]], problems: list[str], *, blank: int = BLANK_ROWS) -> list[dict[str, Any]]:
    """The editor's rows shown again after a refused save: the rows as typed, without the untouched
    blank ones, then ``blank`` empty rows (as many as the editor first had: a blank row more on each
    refusal grew the form). Each row that a problem names carries it, to be shown beside the row."""
    kept = [dict(r, problems=[]) for r in rows
            if not untouched(r) or r["type"] != "text" or r["required"] or r["unique"]]
    sent = [r for r in kept if not r["remove"] and not untouched(r)]
    for problem in problems:
        m = _PROBLEM_AT.match(problem)
        if not m:
            continue
        if m.group(1):
            at = int(m.group(1)) - 1
            row = sent[at] if 0 <= at < len(sent) else None
        else:
            row = next((r for r in sent if r["name"] == m.group(2)), None)
        if row is not None:
            row["problems"].append(problem)
    return kept + [blank_row() for _ in range(blank)]


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


# --- a save refused because someone else changed the columns meanwhile -----------------------------

def definition(column: Mapping[str, Any]) -> dict[str, Any]:
    """A column as compared here: name, type, description, listed values, required, unique."""
    return {"name": column.get("name", ""), "type": column.get("type", "text"),
            "description": column.get("description", "") or "", "values": list(column.get("values") or []),
            "required": bool(column.get("required")), "unique": bool(column.get("unique"))}


def typed_definition(row: Mapping[str, Any]) -> dict[str, Any]:
    """A row as typed, as a definition."""
    return definition({**row, "values": listed_values(row["values"], row["values_was"])})


def loaded_definition(row: Mapping[str, Any]) -> dict[str, Any] | None:
    """The definition a row was loaded with (None for a new row). A form without ``was`` (sent
    before rows carried it) counts as typed where it does not say, so nothing reads as changed."""
    if not row["from"]:
        return None
    typed = typed_definition(row)
    try:
        was = json.loads(row["was"]) if row["was"] else {}
        values = json.loads(row["values_was"]) if row["values_was"] else typed["values"]
    except ValueError:
        was, values = {}, typed["values"]
    was = was if isinstance(was, dict) else {}
    return definition({**typed, **{k: was[k] for k in FLAGS if k in was}, "name": row["from"],
                       "values": values if isinstance(values, list) else typed["values"]})


def changes(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What differs between two definitions of one column, in words."""
    out = []
    if after["name"] != before["name"]:
        out.append(f"renamed to {after['name']}")
    if after["type"] != before["type"]:
        out.append(f"type {before['type']} became {after['type']}")
    if after["description"] != before["description"]:
        out.append(f"description now \u201c{after['description']}\u201d")
    if after["values"] != before["values"]:
        out.append(f"listed values now {', '.join(after['values'])}" if after["values"] else "no listed values")
    if after["required"] != before["required"]:
        out.append("now required" if after["required"] else "no longer required")
    if after["unique"] != before["unique"]:
        out.append("now unique" if after["unique"] else "no longer unique")
    return out


@dataclass
class Merge:
    """The columns as they are now with one person's change on top, and what each side changed."""
    rows: list[dict[str, Any]]
    theirs: list[str] = field(default_factory=list)   # what the other change did, in words
    mine: list[str] = field(default_factory=list)     # what this person's form changes, in words
    both: list[str] = field(default_factory=list)     # where both changed the same thing (theirs gave way)
    lost: list[str] = field(default_factory=list)     # changes to columns that are no longer there


_LABELS = {"name": "name", "type": "type", "description": "description", "values": "listed values",
           "required": "required flag", "unique": "unique flag"}


def _said(value: Any) -> str:
    """A definition's value in a sentence."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    return ", ".join(value) or "none" if isinstance(value, list) else str(value)


def _merged_row(column: Mapping[str, Any], row: Mapping[str, Any], loaded: Mapping[str, Any],
                both: list[str]) -> dict[str, Any]:
    """The current ``column`` with what ``row`` changed from ``loaded`` applied (the rest as the
    column is now), carrying the current definition as loaded, so the next save is a change of it."""
    now, typed = definition(column), typed_definition(row)
    merged = row_of(column)
    for key, label in _LABELS.items():
        if typed[key] == loaded[key]:
            continue  # not this person's change: the column as it is now
        if now[key] not in (loaded[key], typed[key]):
            both.append(f"the {label} of {column['name']} (theirs: {_said(now[key])}; yours: {_said(typed[key])})")
        if key == "values":
            merged["values"] = row["values"]
        else:
            merged[key] = typed[key]
    merged["remove"] = bool(row["remove"])
    return merged


def merge(rows: Sequence[Mapping[str, Any]], current: Sequence[Mapping[str, Any]]) -> Merge:
    """``rows`` as typed on a page loaded before someone else changed the columns to ``current``:
    the editor rows of ``current`` with this person's changes applied (a column they did not touch
    is as it is now; a column they added comes after), and both changes in words. Where both
    changed the same thing, this person's value is in the editor and ``both`` says so."""
    now = {c["name"]: c for c in current}
    loaded = {row["from"]: (row, loaded_definition(row)) for row in rows if row["from"]}
    out = Merge(rows=[])
    for name, (row, was) in loaded.items():
        if name not in now:
            out.theirs.append(f"removed the column {name} (or renamed it)")
            if row["remove"] or changes(was, typed_definition(row)):
                out.lost.append(name)
        elif said := changes(was, definition(now[name])):
            out.theirs.append(f"changed the column {name}: {', '.join(said)}")
    for c in current:
        if c["name"] not in loaded:
            out.theirs.append(f"added the column {c['name']} ({c['type']})")
            out.rows.append(row_of(c))
            continue
        row, was = loaded[c["name"]]
        if row["remove"]:
            out.mine.append(f"remove the column {c['name']}")
        elif said := changes(was, typed_definition(row)):
            out.mine.append(f"change the column {c['name']}: {', '.join(said)}")
        out.rows.append(_merged_row(c, row, was, out.both))
    for row in rows:
        if row["from"] or row["remove"] or not (row["name"] or row["description"] or row["values"].strip()):
            continue  # a column of the loaded page (above), or an untouched blank row
        if row["name"] in now and row["name"] not in loaded:
            out.both.append(f"a new column named {row['name']} (theirs is kept: change it if yours differs)")
            continue
        out.mine.append(f"add the column {row['name'] or '(no name yet)'} ({row['type']})")
        out.rows.append(dict(row))
    return out

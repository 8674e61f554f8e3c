"""The column dialect (the specification's columns.ts): parsing and checking column definitions,
the text a record is searched by, the identity of a unique value, and schema changes applied to
the live records of a collection.

A definition is checked whole and every problem is reported at once, so an operator fixing a
columns editor sees the full list in one round trip. Records (store/records.py) call
``search_blob`` and ``identity_of`` on every write; this module calls them again when a schema
change rebuilds the records, so both paths derive the same text from the same body.
"""
from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from store.access import Actor
from store.db import Conn
from store.errors import Conflict, Invalid, at_most_listed
from store.paths import nfc
from store.provenance import append_changes
from store.values import MAX_IDENTITY_BYTES, NUL_PROBLEM, identity_text, is_number, number_text, shown

ColumnType = Literal["text", "number", "boolean", "datetime", "array"]
TYPES: tuple[ColumnType, ...] = ("text", "number", "boolean", "datetime", "array")
COLUMN_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}\Z")
# Every record as returned carries these beside its columns, so a column of the same name would
# overwrite the field or lose its own value.
RESERVED = ("id", "collection", "created_at", "updated_at", "created_by", "updated_by", "version", "display_path")
# The names reserved before collection, version and display_path were: a table stored with one of
# those still reads (stored_columns), and a change of its columns asks for a rename.
_STORED_RESERVED = ("id", "created_at", "updated_at", "created_by", "updated_by")
MAX_COLUMNS = 64
MAX_DESCRIPTION = 200
MAX_VALUES = 50
MAX_VALUE_LENGTH = 64
_FIELDS = ("name", "type", "description", "required", "unique", "values")
_UNIQUE_TYPES = ("text", "number")
# A sent value as a definition problem quotes it: short, since one change may quote many.
_QUOTE_LIMIT = 42
_VALUES_TYPES = ("text", "array")


@dataclass(frozen=True)
class Column:
    """One declared column. ``values`` is None for an open column, else the accepted strings.
    ``rename_from`` exists only while a schema change is applied; it is never stored."""
    name: str
    type: ColumnType
    description: str
    required: bool = False
    unique: bool = False
    values: list[str] | None = None
    rename_from: str | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        """The stored and returned form: the six fields, values only when listed."""
        out: dict[str, Any] = {"name": self.name, "type": self.type, "description": self.description,
                               "required": self.required, "unique": self.unique}
        if self.values is not None:
            out["values"] = list(self.values)
        return out


def columns_json(columns: Sequence[Column]) -> list[dict[str, Any]]:
    return [c.to_json() for c in columns]


def unique_column(columns: Sequence[Column]) -> Column | None:
    """The collection's unique column, if it declares one (at most one can be)."""
    return next((c for c in columns if c.unique), None)


# --- text derived from values -------------------------------------------------------------------

def value_text(value: object) -> str:
    """One value as search text: strings as they are, numbers in decimal, booleans as true/false,
    lists item by item. Values stored before a retype keep their own type's text."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if is_number(value):
        return number_text(value)  # type: ignore[arg-type]
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(t for t in (value_text(v) for v in value) if t)
    if isinstance(value, dict):
        return "\n".join(t for t in (value_text(v) for v in value.values()) if t)
    return str(value)


def search_blob(columns: Sequence[Column], body: dict[str, Any]) -> str:
    """Every value of ``body`` as text, one per line, keys left out: a column name that every record
    shares must never match a search. Declared columns come first in their order, so the blob is
    stable whatever order the body's keys arrived in."""
    declared = [c.name for c in columns]
    keys = [k for k in declared if k in body] + sorted(k for k in body if k not in set(declared))
    return "\n".join(t for t in (value_text(body[k]) for k in keys) if t)


def identity_of(column: Column | None, value: object) -> str | None:
    """The normalised unique value (store.values.identity_text), or None when there is no unique
    column or no value. The comparison built on it is exact."""
    if column is None or value is None:
        return None
    return identity_text(value)


# --- parsing definitions --------------------------------------------------------------------------

def _quote(value: object) -> str:
    return shown(value, _QUOTE_LIMIT)


def _label(index: int, raw: object, repeated: frozenset[str] = frozenset()) -> str:
    """How a problem names a column: by its name, and by its place too when the list declares that
    name more than once (two rows both called column "email" could not be told apart)."""
    name = raw.get("name") if isinstance(raw, dict) else None
    if isinstance(name, str) and COLUMN_NAME.fullmatch(name):
        return f'column {index + 1} ("{name}")' if name in repeated else f'column "{name}"'
    return f"column {index + 1}"


def _spaces_problem(item: str) -> str | None:
    """Why a listed value may not be ``item`` for its spaces, or None. A record's text must equal
    a listed value exactly (store.values.check_value), so a value of spaces only is a choice no one
    can read, and one with spaces around it a choice whose spaces every record must repeat unseen
    (the choices are shown joined by ", "). Refused rather than trimmed: the store keeps a value
    as it was sent (only NFC), as it does a record's text, and says what would work."""
    if not item.strip():
        return (f"is blank ({_quote(item)}): a listed value is a choice that records hold as it is "
                "written, so it needs visible characters, such as \"new\"; type one or remove the item")
    if item.strip() != item:
        return (f"{_quote(item)} starts or ends with a space, which a list of the choices does not show, "
                f"so every record would have to repeat it unseen; remove the spaces: {_quote(item.strip())}")
    return None


def _parse_one(index: int, raw: object, *, allow_rename: bool, problems: list[str],
               reserved: tuple[str, ...] = RESERVED, repeated: frozenset[str] = frozenset(),
               stored: bool = False, listed_before: Mapping[str, frozenset[str]] | None = None) -> Column | None:
    """One definition; appends its problems and returns the column only when it has none.
    ``stored``: a definition read back from its row, which passed the rules of its day (a values
    item with spaces around it, accepted before that was refused, still reads). ``listed_before``:
    each previous column's values (by name), which keep their spaces in that column, or the one
    renamed from it (records hold them; the web editor sends every column back on a purpose-only
    save)."""
    if not isinstance(raw, dict):
        problems.append(f"column {index + 1}: expected an object {{name, type, description, required?, "
                        f"unique?, values?}}; got {_quote(raw)}")
        return None
    label = _label(index, raw, repeated)
    before = len(problems)
    allowed = _FIELDS + (("rename_from",) if allow_rename else ())
    for key in raw:
        if key not in allowed:
            extra = (" (rename_from applies only when changing the columns of an existing collection)"
                     if key == "rename_from" else "")
            problems.append(f'{label}: unknown field "{key}"; a column has {", ".join(allowed)}{extra}')

    name = raw.get("name")
    if name is None:
        problems.append(f"{label}: name is required, such as \"email\"")
    elif not isinstance(name, str) or not COLUMN_NAME.fullmatch(name):
        problems.append(f"{label}: name {_quote(name)} is not a column name: start with a lowercase letter, "
                        "then lowercase letters, digits or _, at most 64 characters (^[a-z][a-z0-9_]{0,63}$)")
    elif name in reserved:
        problems.append(f'{label}: the name "{name}" is reserved for a field the store keeps on every record '
                        f'({", ".join(RESERVED)}); choose another name')

    ctype = raw.get("type")
    if ctype not in TYPES:
        got = "nothing" if ctype is None else _quote(ctype)
        problems.append(f"{label}: type must be one of {', '.join(TYPES)}; got {got}")

    description = raw.get("description")
    if description is None or (isinstance(description, str) and not description.strip()):
        problems.append(f"{label}: description is required: a sentence, at most {MAX_DESCRIPTION} "
                        "characters, that tells agents what the column holds")
    elif not isinstance(description, str):
        problems.append(f"{label}: description must be a string; got {_quote(description)}")
    elif len(description) > MAX_DESCRIPTION:
        problems.append(f"{label}: description is {len(description)} characters; at most "
                        f"{MAX_DESCRIPTION} are allowed")
    elif "\x00" in description:
        problems.append(f"{label}: description {NUL_PROBLEM}")

    flags: dict[str, bool] = {}
    for flag in ("required", "unique"):
        value = raw.get(flag, False)
        if value is None:
            value = False
        if not isinstance(value, bool):
            problems.append(f"{label}: {flag} must be true or false; got {_quote(value)}")
        flags[flag] = value is True
    if flags["unique"] and ctype in TYPES and ctype not in _UNIQUE_TYPES:
        problems.append(f"{label}: unique applies to text or number columns only; this column is {ctype}")

    values = raw.get("values")
    listed: list[str] | None = None
    if values is not None:
        if ctype in TYPES and ctype not in _VALUES_TYPES:
            problems.append(f"{label}: values applies to text or array columns only; this column is {ctype}")
        elif not isinstance(values, list) or not 1 <= len(values) <= MAX_VALUES:
            got = f"{len(values)} values" if isinstance(values, list) else _quote(values)
            problems.append(f"{label}: values must list 1 to {MAX_VALUES} distinct strings; got {got}")
        else:
            source = raw.get("rename_from") if allow_rename and isinstance(raw.get("rename_from"), str) \
                else raw.get("name")
            kept = (listed_before or {}).get(source, frozenset()) if isinstance(source, str) else frozenset()
            for position, item in enumerate(values, start=1):
                if not isinstance(item, str) or not item or len(item) > MAX_VALUE_LENGTH:
                    problems.append(f"{label}: values item {position} must be a non-empty string of at most "
                                    f"{MAX_VALUE_LENGTH} characters; got {_quote(item)}")
                elif "\x00" in item:
                    problems.append(f"{label}: values item {position} {NUL_PROBLEM}")
                elif not stored and nfc(item) not in kept and (problem := _spaces_problem(item)):
                    problems.append(f"{label}: values item {position} {problem}")
            # Distinct as stored: "é" and "e\u0301" are one value once NFC.
            listed = [nfc(v) for v in values if isinstance(v, str)]
            repeated = sorted({v for v in listed if listed.count(v) > 1})
            for item in repeated:
                problems.append(f'{label}: values lists "{item}" more than once; each value appears once')

    rename_from = raw.get("rename_from")
    if rename_from is not None and allow_rename and not isinstance(rename_from, str):
        problems.append(f"{label}: rename_from must be the current name of a column; got {_quote(rename_from)}")
    if len(problems) > before:
        return None
    return Column(name=name, type=ctype, description=description, required=flags["required"],
                  unique=flags["unique"], values=listed,
                  rename_from=rename_from if allow_rename and rename_from != name else None)


def column_problems(raw: object, *, previous: Sequence[Column] | None = None,
                    reserved: tuple[str, ...] = RESERVED, stored: bool = False) -> tuple[list[Column], list[str]]:
    """Parse a columns list; returns (columns, problems). With ``previous`` (a schema change),
    each column may carry rename_from naming one of the previous columns. ``stored``: the list is
    read back from its row (stored_columns), so rules added since it was written do not apply."""
    if not isinstance(raw, list):
        return [], ['columns must be a list of column definitions, such as [{"name": "email", '
                    '"type": "text", "description": "the contact address", "unique": true}]']
    problems: list[str] = []
    if len(raw) > MAX_COLUMNS:
        problems.append(f"a collection has at most {MAX_COLUMNS} columns; got {len(raw)}")
    places: dict[str, list[int]] = {}   # each name's places in the list, from 1
    for i, item in enumerate(raw, start=1):
        if isinstance(item, dict) and isinstance(item.get("name"), str):
            places.setdefault(item["name"], []).append(i)
    repeated = frozenset(n for n, at in places.items() if len(at) > 1)
    listed_before = {c.name: frozenset(c.values or ()) for c in previous or ()}
    parsed = [_parse_one(i, item, allow_rename=previous is not None, problems=problems, reserved=reserved,
                         repeated=repeated, stored=stored, listed_before=listed_before)
              for i, item in enumerate(raw)]
    columns = [c for c in parsed if c is not None]

    for name in sorted(repeated):
        at = ", ".join(str(i) for i in places[name][:10]) + (", ..." if len(places[name]) > 10 else "")
        problems.append(f'column "{name}": the name is declared more than once (columns {at}); column names '
                        "are unique in a collection")
    uniques = [item.get("name") for item in raw if isinstance(item, dict) and item.get("unique") is True]
    if len(uniques) > 1:
        names = ", ".join(f'"{n}"' if isinstance(n, str) else _quote(n) for n in uniques)
        problems.append(f"columns {names} are all unique: at most one column per collection can be unique")

    if previous is not None:
        problems.extend(_rename_problems(raw, previous))
    return columns, at_most_listed(problems)


def _rename_problems(raw: list, previous: Sequence[Column]) -> list[str]:
    old = [c.name for c in previous]
    # Names the new list keeps as they are (a swap renames both, so neither is kept).
    # (A name that is not a string is a problem of its own, reported by _parse_one.)
    kept = {item["name"] for item in raw if isinstance(item, dict) and isinstance(item.get("name"), str)
            and item.get("rename_from") in (None, item["name"])}
    sources: dict[str, str] = {}
    problems: list[str] = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or not isinstance(item.get("rename_from"), str):
            continue
        source, label = item["rename_from"], _label(index, item)
        if source == item.get("name"):
            continue
        if source not in old:
            problems.append(f'{label}: rename_from "{source}" is not a column of this collection; its columns '
                            f'are {", ".join(old) or "none"}')
        elif source in sources:
            problems.append(f'{label}: rename_from "{source}" is already renamed to "{sources[source]}"; a '
                            "column can be renamed once per change")
        elif source in kept:
            problems.append(f'{label}: rename_from "{source}" names a column that the new definition still '
                            f'declares; rename it (drop "{source}" from the list) or add a new column')
        else:
            sources[source] = str(item.get("name"))
    return problems


def parse_columns(raw: object, *, previous: Sequence[Column] | None = None) -> list[Column]:
    """The columns of ``raw`` (a list of definitions); Invalid listing every problem otherwise.
    Stored columns are read with ``stored_columns``, which accepts the names reserved later."""
    columns, problems = column_problems(raw, previous=previous)
    if problems:
        raise Invalid("columns rejected: " + "; ".join(problems), problems)
    return columns


# --- schema changes on live records ---------------------------------------------------------------

def stored_columns(raw: object) -> list[Column]:
    """The columns as stored on artifact_collections (always valid: every write went through
    ``parse_columns``, under the reserved names and values rules of its day)."""
    columns, problems = column_problems(raw or [], reserved=_STORED_RESERVED, stored=True)
    if problems:
        raise Invalid("columns rejected: " + "; ".join(problems), problems)
    return columns


def _too_long_conflict(column: Column, rows: list[dict[str, Any]]) -> Conflict | None:
    """A 409 naming the live records whose value in ``source`` is longer than a unique value may
    be (store.values.MAX_IDENTITY_BYTES), or None when every value fits."""
    long = [int(r["key"]) for r in rows
            if len((identity_of(column, r["value"]) or "").encode()) > MAX_IDENTITY_BYTES]
    if not long:
        return None
    long.sort()
    listed = ", ".join(str(i) for i in long[:20]) + (", ..." if len(long) > 20 else "")
    message = (f'column "{column.name}" cannot become unique: {len(long)} live record(s) hold a value longer than '
               f"a unique value may be ({MAX_IDENTITY_BYTES} bytes once normalised; records {listed}); shorten "
               "those values or remove those records, then make the column unique")
    return Conflict(message, [message])


def _repeat_conflict(column: Column, rows: list[dict[str, Any]]) -> Conflict | None:
    """A 409 naming one value that live records repeat in ``source``, or None when all differ."""
    holders: dict[str, list[int]] = {}
    first_seen: dict[str, Any] = {}
    for row in rows:
        ident = identity_of(column, row["value"])
        if ident is not None:
            holders.setdefault(ident, []).append(int(row["key"]))
            first_seen.setdefault(ident, row["value"])
    repeated = sorted((ids for ids in holders.values() if len(ids) > 1), key=lambda ids: min(ids))
    if not repeated:
        return None
    ids = sorted(repeated[0])
    value = first_seen[next(k for k, v in holders.items() if v is repeated[0])]
    more = f"; {len(repeated) - 1} other value(s) repeat as well" if len(repeated) > 1 else ""
    listed = ", ".join(str(i) for i in ids[:20]) + (", ..." if len(ids) > 20 else "")
    message = (f'column "{column.name}" cannot become unique: {len(ids)} live records repeat the value '
               f'{_quote(value) if isinstance(value, str) else value_text(value)} (records {listed}){more}; '
               "make those values distinct or remove the extra records, then make the column unique")
    return Conflict(message, [message])


def apply_schema_change(conn: Conn, collection_id: int, old: Sequence[Column], new: Sequence[Column],
                        actor: Actor) -> int:
    """Move the live records of a (locked) collection from ``old`` to ``new`` columns, in the
    caller's transaction: renamed keys move, removed keys go, identities and search text are rebuilt.
    A column that becomes unique while records repeat a value is a Conflict and nothing changes.
    Returns how many records had their body rewritten.

    The keys move in one UPDATE (jsonb ops over a source -> target map), so every record moves once
    however many columns change, its version moves by one and its updated_at/updated_by say when
    and by whom (so a listing with since finds it); the same statement appends each
    moved record's provenance row (its event is the collection's, published by the caller: one per
    change, not one per record). The derived text is computed in
    Python, because ``search_blob`` and ``identity_of`` must be the very functions records use on
    writes, and written in one more UPDATE for the records where it differs (a rename changes no
    search text; a new unique flag changes only identities)."""
    old_names = {c.name for c in old}
    mapping = [(c.rename_from or c.name, c.name) for c in new if (c.rename_from or c.name) in old_names]
    unique = unique_column(new)
    if unique is not None:
        source = unique.rename_from or unique.name
        was = unique_column(old)
        if source in old_names and (was is None or was.name != source):
            rows = conn.execute(
                """SELECT key, content_json -> %s AS value FROM artifacts
                    WHERE collection_id = %s AND kind = 'object' AND deleted_at IS NULL
                      AND content_json ? %s""", (source, collection_id, source)).fetchall()
            conflict = _too_long_conflict(unique, rows) or _repeat_conflict(unique, rows)
            if conflict is not None:
                raise conflict
    moved = 0
    if any(src != dst for src, dst in mapping) or len(mapping) < len(old_names):
        insert, actor_params = append_changes("moved", actor)
        moved = conn.execute(
            f"""WITH moved AS (
                 UPDATE artifacts a SET content_json = m.body, version = a.version + 1,
                        updated_at = clock_timestamp(), updated_by = %s
                   FROM (SELECT b.id, (SELECT coalesce(jsonb_object_agg(k.dst, b.content_json -> k.src), '{{}}'::jsonb)
                                         FROM unnest(%s::text[], %s::text[]) AS k(src, dst)
                                        WHERE b.content_json ? k.src) AS body
                           FROM artifacts b
                          WHERE b.collection_id = %s AND b.kind = 'object' AND b.deleted_at IS NULL
                            FOR UPDATE) AS m
                  WHERE a.id = m.id AND m.body IS DISTINCT FROM a.content_json
              RETURNING a.org_id, a.display_path, 'update' AS operation, a.version)
               {insert}""",
            (actor.name, [s for s, _ in mapping], [d for _, d in mapping], collection_id, *actor_params)).rowcount
    rows = conn.execute(
        """SELECT id, content_json, identity, search_blob FROM artifacts
            WHERE collection_id = %s AND kind = 'object' AND deleted_at IS NULL""", (collection_id,)).fetchall()
    changed: list[tuple[int, str, str | None]] = []
    clear_first: list[int] = []
    for r in rows:
        blob = search_blob(new, r["content_json"])
        ident = identity_of(unique, r["content_json"].get(unique.name)) if unique else None
        if blob != r["search_blob"] or ident != r["identity"]:
            changed.append((r["id"], blob, ident))
            # The live unique index is checked row by row within the batch UPDATE, so a record
            # taking a value must not meet the record giving it up (a swap, or unique moving from
            # x to y while one record's x equals another's y): every old identity that changes is
            # cleared first, whatever it becomes.
            if r["identity"] is not None and ident != r["identity"]:
                clear_first.append(r["id"])
    if clear_first:
        conn.execute("UPDATE artifacts SET identity = NULL WHERE id = ANY(%s)", (clear_first,))
    if changed:
        conn.execute(
            """UPDATE artifacts a SET search_blob = v.blob, identity = v.ident
                 FROM unnest(%s::bigint[], %s::text[], %s::text[]) AS v(id, blob, ident)
                WHERE a.id = v.id""",
            ([c[0] for c in changed], [c[1] for c in changed], [c[2] for c in changed]))
    return moved

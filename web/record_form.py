"""A record as an HTML form and back: one input per declared column, fitted to its type, and the
submitted fields turned into the body the store checks.

The form only translates: every rule (required, listed values, types) is the store's, which
answers with every problem at once; ``problems_by_field`` puts each beside the input it names.
What the person typed is kept as text (``typed``), so a refused save shows it unchanged.

An existing record's form also carries the values it was rendered with (hidden ``orig.<column>``
inputs, ``originals_of``): a save is a patch of the fields that differ from them, whatever the
stored record holds by then, and a save refused as stale lists only those fields.

A date and time input the person left partly filled (a date without its time, an hour deleted) is
sent by the browser as an empty string, the same as an input emptied on purpose. So an emptied
date and time clears a stored value only when its Clear box says so (``_clear.<column>``), and the
form's script names the inputs it saw partly filled (``_incomplete``): ``unsent_datetimes`` finds
both, and the save is refused beside those fields instead of storing nothing.

A field missing from the form altogether (a script's or another client's request; a browser sends
every input, empty or not) is no wish to empty its column: a save leaves that column as it is
(``sent``, ``unsent_columns``), as the API's record_update leaves the columns a patch does not
name. The browser's own omissions read as it means them: a list of listed values is checkboxes,
left out when none is ticked, so a form that carried the list's original showed it and empties it;
a boolean is a select, always sent; a date and time is cleared by its Clear box.
"""
from __future__ import annotations

import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from werkzeug.datastructures import MultiDict

from store.columns import stored_columns
from store.errors import Invalid, rejected
from store.values import check_body, check_value

_INTEGER = re.compile(r"[-+]?[0-9]+\Z")
_DECIMAL = re.compile(r"[-+]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?\Z")
_LOCAL_DATETIME = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?\Z")
_COLUMN_PROBLEM = re.compile(r'column "([a-z][a-z0-9_]*)": ')
TYPE_LABELS = {"text": "text", "number": "number", "boolean": "yes / no", "datetime": "date and time (UTC)",
               "array": "list"}


@dataclass
class Field:
    """One input of the form, ready for the template."""
    name: str
    type: str
    widget: str            # text, textarea, number, select, boolean, datetime, checkboxes, lines
    description: str
    required: bool
    unique: bool
    text: Any              # the input's value: a string, or a list of strings for checkboxes
    options: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    clearable: bool = False  # an optional date and time holding a value: it has a Clear box
    clear: bool = False      # ... and the box is ticked
    incomplete: str = ""     # the sentence the script shows beside a partly filled date and time


def widget_of(column: Mapping[str, Any], text: Any = "") -> str:
    kind, values = column["type"], column.get("values")
    if kind == "datetime" and isinstance(text, str) and text and not _LOCAL_DATETIME.match(text):
        # A stored value that is no datetime (the column was retyped): a date input would show it
        # blank, and an untouched save would clear it.
        return "text"
    if kind == "text":
        if values:
            return "select"
        return "textarea" if isinstance(text, str) and ("\n" in text or len(text) > 80) else "text"
    if kind == "array":
        return "checkboxes" if values else "lines"
    return {"number": "number", "boolean": "boolean", "datetime": "datetime"}.get(kind, "text")


def field_text(column: Mapping[str, Any], value: Any) -> Any:
    """A stored value as its input shows it."""
    kind = column["type"]
    if value is None:
        return [] if kind == "array" and column.get("values") else ""
    if kind == "boolean":
        return "true" if value is True else "false" if value is False else str(value)
    if kind == "datetime" and isinstance(value, str):
        # datetime-local shows no zone: values are UTC (the label says so); seconds kept.
        return value.removesuffix("Z")[:19] if value.endswith("Z") else value
    if kind == "array":
        items = [_as_text(v) for v in value] if isinstance(value, list) else [_as_text(value)]
        return items if column.get("values") else "\n".join(items)
    return _as_text(value)


def _as_text(value: Any) -> str:
    """A value of another type than its column's (the column was retyped since) as JSON writes it:
    true, not Python's True, so that saving the field unchanged stores what the record showed."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool | dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


ORIGINAL = "orig."   # the hidden input holding the value a field was rendered with: orig.<column>
CLEAR = "_clear."    # a date and time's Clear box: ticked, the save removes the stored value
INCOMPLETE = "_incomplete"  # the date and time inputs the script saw partly filled, by name, comma-separated
EVERY_PART = "day, month, year, hours, minutes and seconds"


def cleared(form: MultiDict, name: str) -> bool:
    """Whether the Clear box of the date and time ``name`` was ticked."""
    return bool(form.get(CLEAR + name))


def sent(column: Mapping[str, Any], form: MultiDict) -> bool:
    """Whether the form sent the column's input at all. A browser sends every input, select and
    textarea, empty or not, so one missing altogether was left out by a script or another client
    and says nothing about the column: it is no wish to empty it. The exceptions are a browser's
    own: a list of listed values is checkboxes, none of which is sent when none is ticked, so it
    counts as sent when the form says it showed the list (its original, ``orig.<column>``, which an
    existing record's form carries for every column); a date and time whose Clear box is ticked is
    sent as emptied."""
    name = column["name"]
    if name in form:
        return True
    if column["type"] == "array" and column.get("values"):
        return form.get("_originals") == "1" and ORIGINAL + name in form
    return column["type"] == "datetime" and cleared(form, name)


def unsent_columns(columns: Sequence[Mapping[str, Any]], form: MultiDict) -> set[str]:
    """The columns the form did not send (``sent``): a save leaves them as they are."""
    return {c["name"] for c in columns if not sent(c, form)}


def typed_of(columns: Sequence[Mapping[str, Any]], form: MultiDict) -> dict[str, Any]:
    """What was typed, per column, as the inputs hold it; a date and time whose Clear box is
    ticked reads as emptied, whatever its input still holds (the box is the person's word)."""
    out: dict[str, Any] = {}
    for c in columns:
        if c["type"] == "array" and c.get("values"):
            out[c["name"]] = form.getlist(c["name"])
        elif c["type"] == "datetime" and cleared(form, c["name"]):
            out[c["name"]] = ""
        else:
            out[c["name"]] = form.get(c["name"], "")
    return out


def _shows_datetime(text: Any) -> bool:
    """Whether an input's text is a date and time as its datetime-local input holds one."""
    return isinstance(text, str) and bool(_LOCAL_DATETIME.match(text))


def _what_works(column: Mapping[str, Any], *, stored: bool) -> str:
    """How a date and time the browser could not send gets saved, or cleared when that can be."""
    every = f"fill in every part ({EVERY_PART})"
    if column.get("required"):
        return every
    return f"{every}, {'or tick Clear to remove the value' if stored else 'or empty every part to leave it blank'}"


def partly_filled(column: Mapping[str, Any], *, stored: bool) -> str:
    """The sentence beside a date and time left partly filled (the script shows it before the
    save is sent; the server, when the script named the field). ``stored``: the field showed a
    value, which the refusal keeps."""
    kept = " The stored value is kept." if stored else ""
    return (f"This date and time is incomplete (a part of it is empty), so it cannot be saved.{kept} To save it,"
            f" {_what_works(column, stored=stored)}.")


def arrived_empty(column: Mapping[str, Any], shown: str) -> str:
    """The sentence beside a date and time that showed a value and arrived empty without its
    Clear box ticked: a browser sends a partly filled one that way, so it is no wish to clear."""
    return (f"This date and time arrived empty although Clear was not ticked, which is how a browser sends one"
            f" with a part missing, so the stored value ({shown.replace('T', ' ')} UTC) is kept. To change it,"
            f" {_what_works(column, stored=True)}.")


def unsent_datetimes(columns: Sequence[Mapping[str, Any]], form: MultiDict) -> dict[str, str]:
    """{column: the sentence saying why} for each date and time input that arrived empty without
    meaning "no value": one the form's script saw partly filled, and one that showed a stored value
    and arrived empty with its Clear box unticked (without the script, the only sign of a partly
    filled input). Saving either as null would silently remove what the record holds."""
    partial = {n.strip() for n in form.get(INCOMPLETE, "").split(",") if n.strip()}
    originals = originals_of(columns, form) or {}
    out: dict[str, str] = {}
    for c in columns:
        name = c["name"]
        if c["type"] != "datetime" or cleared(form, name) or name not in form or form[name].strip():
            continue  # (a date and time not sent at all is left as it is: nothing to refuse)
        shown = originals.get(name, "")
        if name in partial:
            out[name] = partly_filled(c, stored=_shows_datetime(shown))
        elif _shows_datetime(shown):
            out[name] = arrived_empty(c, shown)
    return out


def unsent_refusal(columns: Sequence[Mapping[str, Any]], unsent: Mapping[str, str], body: Mapping[str, Any], *,
                   patch: bool) -> Invalid:
    """The refusal of a save with dates and times that did not arrive (``unsent``), listing with
    them every other problem the store finds in the rest of ``body`` (its own check_body, nothing
    written), so that one answer shows them all beside their fields."""
    rest = {k: v for k, v in body.items() if k not in unsent}
    _, others = check_body(stored_columns(list(columns)), rest, patch=patch)
    problems = [f'column "{name}": {why}' for name, why in unsent.items()]
    problems += [p for p in others if not any(p.startswith(f'column "{name}":') for name in unsent)]
    return rejected("record rejected:", problems)


def kept_texts(columns: Sequence[Mapping[str, Any]], form: MultiDict,
               record: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What a refused form shows again: what was typed, except that a date and time which did not
    arrive shows the value it showed before (the one still stored), not an empty input, and a
    column the form did not send shows ``record``'s value (the save left it as it is; shown empty,
    the next save would empty it)."""
    texts = typed_of(columns, form)
    originals = originals_of(columns, form) or {}
    for name in unsent_datetimes(columns, form):
        if originals.get(name):
            texts[name] = originals[name]
    stored = texts_of(columns, record)
    for name in unsent_columns(columns, form):
        texts[name] = stored[name]
    return texts


def originals_of(columns: Sequence[Mapping[str, Any]], form: MultiDict) -> dict[str, Any] | None:
    """The values the form was rendered with, as its inputs held them (they reach the server
    through the same browser rules as the inputs: line breaks, a datetime's seconds), or None for
    a form that did not carry them (a new record, a hand-made request). A list of listed values
    travels as one JSON list."""
    if form.get("_originals") != "1":
        return None
    out: dict[str, Any] = {}
    for c in columns:
        raw = form.get(ORIGINAL + c["name"], "")
        if c["type"] == "array" and c.get("values"):
            try:
                items = json.loads(raw) if raw else []
            except ValueError:
                items = []
            out[c["name"]] = [i for i in items if isinstance(i, str)] if isinstance(items, list) else []
        else:
            out[c["name"]] = raw
    return out


def value_of(column: Mapping[str, Any], text: Any) -> Any:
    """The typed text as the JSON value the store checks; None for an empty input (no value).
    Text that cannot be the column's type is passed on as it is, so the store says what is wrong."""
    kind = column["type"]
    if kind == "array":
        items = list(text) if isinstance(text, list) else [line.strip() for line in str(text).splitlines()]
        items = [i for i in items if i]
        return items or None
    if not isinstance(text, str):
        return None
    if kind == "text":
        # Browsers send a textarea's line breaks as CRLF; the stored text uses LF.
        return text.replace("\r\n", "\n") if text != "" else None
    stripped = text.strip()
    if stripped == "":
        return None
    if kind == "number":
        # JSON's number syntax only: float() also takes "1_000", "inf" and other scripts' digits,
        # which would store a number the person did not type. An integer stays exact at any length.
        if _INTEGER.match(stripped):
            try:
                return int(stripped)
            except ValueError:  # past Python's 4 300-digit conversion limit: the store says why
                return stripped
        if not _DECIMAL.match(stripped):
            return stripped
        number = float(stripped)
        return number if math.isfinite(number) else stripped
    if kind == "boolean":
        return {"true": True, "false": False}.get(stripped, stripped)
    if kind == "datetime":
        # The browser's datetime-local has no zone; the form is in UTC.
        # Chromium drops ":00" seconds from the value it sends; put them back so an untouched
        # input reads the same as the stored value.
        if _LOCAL_DATETIME.match(stripped):
            return stripped + (":00Z" if len(stripped) == 16 else "Z")
        return stripped
    return stripped


def body_for_create(columns: Sequence[Mapping[str, Any]], typed: Mapping[str, Any]) -> dict[str, Any]:
    """Every column that has a value (an empty input adds nothing)."""
    body = {c["name"]: value_of(c, typed.get(c["name"], "")) for c in columns}
    return {k: v for k, v in body.items() if v is not None}


def differs(column: Mapping[str, Any], typed: Any, shown: Any) -> bool:
    """Whether an input differs from the text it was rendered with, compared as values (a browser
    may send the same datetime or lines in another spelling)."""
    return value_of(column, typed) != value_of(column, shown)


def changed(column: Mapping[str, Any], typed: Any, value: Any) -> bool:
    """Whether the input differs from the stored value as the form showed it."""
    return differs(column, typed, field_text(column, value))


def patch_for_update(columns: Sequence[Mapping[str, Any]], typed: Mapping[str, Any],
                     record: Mapping[str, Any], misfits: Sequence[str] = (),
                     shown: Mapping[str, Any] | None = None, unsent: Collection[str] = ()) -> dict[str, Any]:
    """The columns whose input differs from what the form showed (``shown``, the originals it
    carried; without them, the record as the form would show it); an emptied input sends null,
    which clears an optional column (and the store refuses it for a required one). A column the
    form did not send (``unsent``, from ``unsent_columns``) is left out: the patch keeps it.
    A column whose stored value no longer fits it (``misfits``, the store's lines) and whose input
    was left as shown is sent only when what it shows now fits (true shown as the text "true"):
    saving stores what the form showed. What does not fit stays stored as it is, as the spec keeps
    a retyped column's values: the store keeps an untouched column and warns, and the notice stays."""
    refit = {m.group(1) for m in map(_COLUMN_PROBLEM.match, misfits) if m}
    base = shown if shown is not None else texts_of(columns, record)
    patch: dict[str, Any] = {}
    for column, c in zip(stored_columns(list(columns)), columns):
        name = c["name"]
        if name in unsent:
            continue
        value = value_of(c, typed.get(name, ""))
        if differs(c, typed.get(name, ""), base.get(name, "")) or (
                name in refit and value is not None and check_value(column, value)[1] is None):
            patch[name] = value
    return patch


def problems_by_field(problems: Sequence[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Each store problem beside the column it names (``column "x": ...``); the rest stay general."""
    by: dict[str, list[str]] = {}
    general: list[str] = []
    for p in problems:
        m = _COLUMN_PROBLEM.match(p)
        if m:
            by.setdefault(m.group(1), []).append(p[m.end():])
        else:
            general.append(p)
    return by, general


def fields(columns: Sequence[Mapping[str, Any]], texts: Mapping[str, Any],
           problems: Mapping[str, list[str]] | None = None, *, originals: Mapping[str, Any] | None = None,
           clear: frozenset[str] | set[str] = frozenset()) -> list[Field]:
    """The form's inputs showing ``texts``. ``originals``: the values an existing record's form
    shows it with (an optional date and time holding one gets a Clear box); ``clear``: the
    columns whose Clear box is ticked."""
    out = []
    for c in columns:
        text = texts.get(c["name"], [] if c["type"] == "array" and c.get("values") else "")
        options = list(c.get("values") or [])
        if isinstance(text, list):  # stored items the list no longer has: shown, checked, kept
            options += [t for t in text if t not in options]
        widget = widget_of(c, text)
        stored = widget == "datetime" and _shows_datetime((originals or {}).get(c["name"], ""))
        out.append(Field(name=c["name"], type=c["type"], widget=widget,
                         description=c.get("description", ""), required=bool(c.get("required")),
                         unique=bool(c.get("unique")), text=text, options=options,
                         problems=list((problems or {}).get(c["name"], [])),
                         clearable=stored and not c.get("required"), clear=c["name"] in clear,
                         incomplete=partly_filled(c, stored=stored) if widget == "datetime" else ""))
    return out


def texts_of(columns: Sequence[Mapping[str, Any]], record: Mapping[str, Any] | None) -> dict[str, Any]:
    return {c["name"]: field_text(c, (record or {}).get(c["name"])) for c in columns}

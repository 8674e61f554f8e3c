"""Fields every form of the web app sends alike, read with the sentence a wrong one gets."""
from __future__ import annotations

from flask import request

from store.errors import Invalid


def form_id(name: str) -> int:
    """The id in form field ``name`` (ASCII digits, within bigint), else Invalid naming the field."""
    raw = request.form.get(name, "")
    if not (raw.isascii() and raw.isdigit() and 0 < len(raw) < 19):
        raise Invalid(f"{name} must be a whole number; got {raw!r}", [f"{name}: a whole number; got {raw!r}"])
    return int(raw)


# The first word of a store's problem line that names a settings field ("name ...", "purpose is
# required: ...", "guild_id 7 is not a guild ..."), and the form field it belongs to.
_FIELD_WORDS = {"name": "name", "purpose": "purpose", "guild_id": "owner", "owner": "owner"}


def problem_ids(problems: list[str] | None, error: str | None, fields: tuple[str, ...]) -> dict[str, list[str]]:
    """For a refused form: field -> the ids of the sentences (in _flash.html's alert) that are
    about it, so its input is marked invalid and described by them (aria-describedby), each
    sentence shown once. A refusal that lists no problem but says a name is taken ("already
    exists") is the name's. The ids follow _flash.html: its error is #flash-error, and each
    problem that does not repeat the error is #problem-N in order."""
    out: dict[str, list[str]] = {}
    listed = 0
    for p in problems or []:
        repeats = p == error or p.partition(": ")[2] == error
        if not repeats:
            listed += 1
        field = _FIELD_WORDS.get(p.split(":", 1)[0].split(" ", 1)[0].strip().lower())
        if field in fields:
            out.setdefault(field, []).append("flash-error" if repeats else f"problem-{listed}")
    if error and not out and "name" in fields and "already exists" in error:
        out["name"] = ["flash-error"]
    return out

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
# required: ...", "guild_id 7 is not a guild ..."; a web form's own "scope: ..."), and the form
# field it belongs to.
_FIELD_WORDS = {"name": "name", "key": "name", "the": "name", "purpose": "purpose", "guild_id": "owner",
                "owner": "owner", "scope": "scope", "content": "content"}


def field_problems(problems: list[str] | None, error: str | None, fields: tuple[str, ...]) -> dict[str, list[str]]:
    """The problems a refused form's ``fields`` each have (field -> sentences), so that each is
    shown under its input and tied to it (aria-describedby). A refusal that lists no problem but
    says a name is taken ("already exists") is the name's."""
    out: dict[str, list[str]] = {}
    for p in problems or []:
        word = p.split(":", 1)[0].split(" ", 1)[0].strip().lower()
        field = _FIELD_WORDS.get(word)
        if field == "name" and word == "the" and not p.startswith("the key"):
            field = None
        if field in fields:
            out.setdefault(field, []).append(p.partition(": ")[2] if p.startswith(f"{word}: ") else p)
    if error and not out and "name" in fields and "already exists" in error:
        out["name"] = [error]
    return out

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

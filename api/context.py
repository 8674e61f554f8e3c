"""Request helpers shared by the API's views: the store, the caller, JSON bodies and ids."""
from __future__ import annotations

from typing import Any

from flask import current_app, request

from store.db import Database
from store.errors import Invalid


def db() -> Database:
    return current_app.extensions["hostfinder.db"]


def json_body(*, required: bool = True) -> Any:
    """The request's JSON body, or Invalid with a sentence saying what is wrong with it."""
    raw = request.get_data(cache=True)
    if not raw:
        if required:
            raise Invalid("the request needs a JSON body", ["body: expected a JSON object"])
        return {}
    data = request.get_json(silent=True, force=True)
    if data is None and raw.strip() != b"null":
        raise Invalid("the request body is not valid JSON", ["body: expected a JSON object"])
    return data


def header_int(name: str) -> int | None:
    value = request.headers.get(name)
    if value is None or value == "":
        return None
    if not value.isdigit():
        raise Invalid(f"the {name} header must be a numeric id; got {value!r}", [f"{name}: expected an id"])
    return int(value)

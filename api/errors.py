"""Store errors as HTTP: the one table, and the one JSON error shape.

Every error body is ``{"error": "<sentence>", "problems": [...], "status": N}``; ``problems`` lists
each problem when there are several (a rejected record, bad arguments) and is empty otherwise.
"""
from __future__ import annotations

import logging

from flask import Flask, Response, jsonify
from werkzeug.exceptions import BadRequest, HTTPException

from store import errors as e

log = logging.getLogger(__name__)

# Most specific first: the first class in the exception's MRO found here wins.
STATUS: dict[type[e.StoreError], int] = {
    e.Unauthenticated: 401,
    e.NotFound: 404,
    e.ReadOnly: 403,
    e.Forbidden: 403,
    e.NotANote: 422,
    e.Invalid: 422,
    e.Embedded: 409,
    e.AlreadyExists: 409,
    e.Contention: 409,
    e.Conflict: 409,
    e.TooLarge: 413,
    e.LimitReached: 422,
    e.PreconditionFailed: 412,
    e.Locked: 423,
    e.TooManyAttempts: 429,
    e.Unavailable: 503,
    e.StoreError: 400,
}


class Malformed(BadRequest):
    """400: a request no route can read at all (a body that is not UTF-8, or not JSON). Not a store
    error: the store never sees such a request, and DAV and FUSE, whose tables name every store
    error, never meet one. RFC 9110 keeps 422 for content that parses and breaks a rule."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        super().__init__(description=message)
        self.problems = problems or []


def status_of(exc: e.StoreError) -> int:
    return e.translate(STATUS, exc, 400)


def _printable(text: str) -> str:
    # A message may quote what the client sent; an unpaired surrogate in it cannot be encoded.
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def error_response(status: int, message: str, problems: list[str] | None = None) -> Response:
    resp = jsonify({"error": _printable(message), "problems": [_printable(p) for p in problems or []],
                    "status": status})
    resp.status_code = status
    if status == 401:
        resp.headers["WWW-Authenticate"] = 'Basic realm="Host Finder", charset="UTF-8"'
    if status == 503:
        resp.headers["Retry-After"] = "2"
    return resp


def register(app: Flask) -> None:
    @app.errorhandler(e.StoreError)
    def _store_error(exc: e.StoreError) -> Response:
        resp = error_response(status_of(exc), exc.message, exc.problems)
        retry_after = getattr(exc, "retry_after", None)  # TooManyAttempts, Unavailable: when to retry
        if retry_after is not None:
            resp.headers["Retry-After"] = str(retry_after)
        return resp

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> Response:
        return error_response(exc.code or 500, exc.description or exc.name, getattr(exc, "problems", None))

    @app.errorhandler(Exception)
    def _server_error(exc: Exception) -> Response:
        log.exception("unexpected error")
        return error_response(500, "internal error: the server could not complete the request; it has been logged")

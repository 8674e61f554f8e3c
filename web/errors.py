"""Store errors as web pages: the page that says what went wrong.

The status of a store error is the HTTP API's (api/errors.py ``STATUS``): the web app and the API
are two HTTP faces of one store, and a refusal reads with the same status on both.

A refusal the person can fix (a form with problems) is rendered by the form's own view beside its
fields; everything else reaching here is a page with the store's sentence and its problems.
"""
from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, render_template, request
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import HTTPException
from werkzeug.test import create_environ

from api.errors import status_of
from store import errors as e
from web.security import CSP, safe_next

log = logging.getLogger(__name__)

TITLES = {400: "Bad request", 401: "Not logged in", 403: "Not allowed", 404: "Not found", 405: "Not allowed here",
          409: "Conflict", 412: "Changed meanwhile", 413: "Too large", 414: "Address too long", 422: "Not accepted",
          423: "Locked", 429: "Too many attempts", 431: "Headers too large", 500: "Server error",
          503: "Unavailable"}


def _page_behind() -> str | None:
    """The page this request came from, on this site: the one to go back to (and to return to
    after logging in again). For a form's POST that is the form's page (Referer), not the URL
    it posted to, which may answer GET differently or not at all."""
    if request.method == "GET":
        return safe_next(request.full_path.rstrip("?"))
    referer = urlsplit(request.headers.get("Referer", ""))
    if f"{referer.scheme}://{referer.netloc}" != request.host_url.rstrip("/"):
        return None
    return safe_next(referer.path + (f"?{referer.query}" if referer.query else ""))


def page(status: int, message: str, problems: list[str] | None = None) -> ResponseReturnValue:
    """The message page: title for the status, the sentence, each problem, a way back."""
    return render_template("error.html", status=status, title=TITLES.get(status, "Error"), message=message,
                           problems=problems or [], back=_page_behind()), status


def refusal_page(app: Flask, status: int, message: str,
                 environ: dict[str, Any] | None = None) -> tuple[bytes, list[tuple[str, str]]]:
    """The message page for a request refused before the web app ran (gateway/server.py: a body
    over its limit; gateway/door.py: a head over its limit, ``environ`` None): the body and its
    headers. Rendered without the app's request hooks, which would read the unread body (a form's
    CSRF field) or look the session up: so the page says nothing of logging in, and offers the
    form's page back after a refused POST."""
    with app.request_context(environ if environ is not None else create_environ("/")):
        back = _page_behind() if environ is not None and request.method != "GET" else None
        body = render_template("error.html", status=status, title=TITLES.get(status, "Error"), message=message,
                               problems=[], back=back, before_app=True).encode("utf-8")
    return body, [("Content-Type", "text/html; charset=utf-8"), ("Content-Security-Policy", CSP),
                  ("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY"),
                  ("Referrer-Policy", "same-origin"), ("Cache-Control", "no-store")]


def store_error_page(exc: e.StoreError) -> ResponseReturnValue:
    """The message page for a store refusal, with Retry-After when the store says when to retry."""
    body, status = page(status_of(exc), exc.message, exc.problems)
    retry_after = getattr(exc, "retry_after", None)
    return (body, status, {"Retry-After": str(retry_after)}) if retry_after is not None else (body, status)


def register(app: Flask) -> None:
    @app.errorhandler(e.StoreError)
    def _store_error(exc: e.StoreError) -> ResponseReturnValue:
        return store_error_page(exc)

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> ResponseReturnValue:
        code = exc.code or 500
        if code == 404:
            return page(404, f"There is no page at {request.path}. Databases and Notes are in the menu above.")
        return page(code, exc.description or exc.name)

    @app.errorhandler(Exception)
    def _server_error(exc: Exception) -> ResponseReturnValue:
        log.exception("unexpected error in %s %s", request.method, request.path)
        return page(500, "The server could not complete the request; the error has been logged.")

"""The Flask application factory. Nothing happens at import; ``create_app`` wires the store in."""
from __future__ import annotations

import importlib
import logging
from datetime import datetime
from decimal import Decimal
from typing import Any

from flask import Flask, Response, jsonify, request, url_for
from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import MethodNotAllowed, NotFound

from api import errors
from api.context import AsciiIntConverter, same_origin, unrouted
from store import migrations
from store.access import Door
from store.db import UNAVAILABLE_MESSAGE, Database, lost_connection
from store.errors import StoreError

log = logging.getLogger(__name__)

# One blueprint per area, each a module exposing ``bp``.
BLUEPRINTS = ("api.tools", "api.agents", "api.runs", "api.file_changes", "api.collections", "api.records",
              "api.openapi")


def _number(literal: str) -> int | float:
    """A JSON number with a fraction or exponent: an int when its value is whole (1066.0, 1e3).
    JSON and JSON Schema do not tell 1066.0 from 1066 (both are integers to a schema), so an id
    or a limit sent either way is the same number; other values stay floats."""
    value = float(literal)
    if value.is_integer() and abs(value) < 2**63:
        whole = Decimal(literal)
        if whole == whole.to_integral_value():
            return int(whole)
    return value


class _JSONProvider(DefaultJSONProvider):
    """Readable UTF-8 JSON in key order; a response that echoes an unpaired surrogate a client
    sent falls back to ASCII escapes, which any JSON reader accepts, instead of failing. Request
    bodies read whole numbers written as 1066.0 as integers (see _number). The one place the API
    turns a date into JSON: ISO 8601 (Flask's own default is an HTTP date)."""

    sort_keys = False
    ensure_ascii = False

    @staticmethod
    def default(o: Any) -> Any:
        if isinstance(o, datetime):
            return o.isoformat()
        return DefaultJSONProvider.default(o)

    def loads(self, s: str | bytes, **kwargs: Any) -> Any:
        return super().loads(s, **{"parse_float": _number, **kwargs})

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        text = super().dumps(obj, **kwargs)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = super().dumps(obj, **{**kwargs, "ensure_ascii": True})
        return text


def _store_down(exc: Exception) -> Response:
    """/api/health's 503 when the store cannot be read: the error shape's sentence (a person reads
    it, not a Python class name such as OperationalError) beside ok and store, with Retry-After.
    An outage is an answer, not a fault of ours; anything else is logged whole for the operator."""
    if isinstance(exc, StoreError):
        sentence = exc.message
    elif lost_connection(exc):
        sentence = UNAVAILABLE_MESSAGE
    else:
        log.exception("the health check could not read the store")
        sentence = ("the store's database answered with an error when its schema version was read; "
                    "the gateway's log has the details")
    resp = jsonify({"ok": False, "store": "unreachable", "error": sentence, "problems": [], "status": 503})
    resp.status_code = 503
    resp.headers["Retry-After"] = str(getattr(exc, "retry_after", None) or 2)
    return resp


def create_app(db: Database, *, door: Door | None = None) -> Flask:
    app = Flask("hostfinder.api", static_folder=None)
    app.json = _JSONProvider(app)
    app.extensions["hostfinder.db"] = db
    app.extensions["hostfinder.door"] = door or Door(db)
    errors.register(app)

    @app.errorhandler(MethodNotAllowed)
    def _method_not_allowed(exc: MethodNotAllowed) -> Response:
        # RFC 9110 15.5.6: a 405 lists the methods the resource does take.
        allowed = sorted(exc.valid_methods or [])
        resp = errors.error_response(405, f"{request.method} is not allowed here; this route takes "
                                          f"{', '.join(allowed)}")
        resp.headers["Allow"] = ", ".join(allowed)
        return resp

    @app.errorhandler(NotFound)
    def _not_found(exc: NotFound) -> Response:
        # Werkzeug's sentence for a URL no route matched ("If you entered the URL manually please
        # check your spelling") is for a page; a program needs the route it missed, or the id the
        # route refused, and where the routes are listed.
        if request.url_rule is not None:  # raised by a view: its own sentence
            return errors.error_response(404, exc.description or exc.name)
        return errors.error_response(404, unrouted(app.url_map, request.method, request.path,
                                                   url_for("openapi.openapi_document")))
    # <int:id> in routes: ASCII digits within bigint only ('/api/collections/١' is no id).
    app.url_map.converters["int"] = AsciiIntConverter

    @app.before_request
    def _refuse_other_sites() -> Response | None:
        # A browser that has read a note over /dav/ keeps the Basic login and sends it with any
        # request to this host, also a form another site's page submits (a text/plain body needs
        # no CORS preflight): such a request names that page's origin, which is refused here.
        # Programs send no Origin; Host Finder's own pages send this one. A Bearer token is never
        # added by a browser on its own (a page would have to hold it), so it is not asked.
        basic = request.headers.get("Authorization", "").strip()[:6].lower() == "basic "
        if (not basic or request.method in ("GET", "HEAD", "OPTIONS")
                or same_origin(request.headers.get("Origin"), request.host_url)):
            return None
        return errors.error_response(403, f"a request from a page of another site (Origin: "
                                          f"{request.headers.get('Origin')}) is refused: the API answers "
                                          "programs and Host Finder's own pages")

    @app.get("/api/health")
    def health():  # type: ignore[no-untyped-def]
        """Store reachability and schema version; needs no credentials."""
        try:
            with db.connection() as conn:
                version = migrations.current_version(conn)
                missing = migrations.missing(conn)
        except Exception as exc:  # the point of the route is to report this, not to raise it
            return _store_down(exc)
        latest = migrations.latest_version()
        return jsonify({"ok": not missing, "store": "reachable", "schema_version": version,
                        "schema_latest": latest})

    for name in BLUEPRINTS:
        app.register_blueprint(importlib.import_module(name).bp)
    return app

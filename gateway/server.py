"""One WSGI application for the whole gateway and the cheroot server that runs it.

/dav/... goes to WsgiDAV, /api/... to the JSON API, everything else to the operator's web app
(web/). Every request leaves one access-log line: method, path, status, milliseconds, user. A server error is logged with its
traceback and answered with a short message, never the traceback."""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from cheroot import wsgi
from cheroot.ssl.builtin import BuiltinSSLAdapter

from api import create_app
from api.auth import parse_basic
from dav_provider.app import MOUNT_PATH, build_dav_app
from store.access import PRINCIPAL_KEY, Door
from store.db import Database
from store.filecache import FileCache
from web import create_app as create_web_app

access_log = logging.getLogger("hostfinder.access")
log = logging.getLogger(__name__)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Gateway:
    """The composed WSGI application: routes by path prefix and logs each request."""

    def __init__(self, db: Database, *, read_cache: bool = False) -> None:
        self.db = db
        self.door = Door(db)
        # Off by default: without it every GET is one query, so gateways behind a load balancer
        # always read what any of them last wrote. With it (one gateway), repeated reads come from
        # memory, kept exact by change events (store.filecache).
        self.cache = FileCache(db.conninfo).start() if read_cache else None
        self.api = create_app(db, door=self.door)
        self.dav = build_dav_app(db, self.door, cache=self.cache)
        self.web = create_web_app(db, door=self.door)

    def close(self) -> None:
        if self.cache is not None:
            self.cache.stop()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        started = time.perf_counter()
        status_holder: list[str] = []

        def recording_start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            status_holder[:] = [status]
            return start_response(status, headers, exc_info)

        path = environ.get("PATH_INFO", "")
        if path == MOUNT_PATH or path.startswith(MOUNT_PATH + "/"):
            # WsgiDAV expects its mount path in SCRIPT_NAME, as a path dispatcher would set it.
            environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + MOUNT_PATH
            environ["PATH_INFO"] = path[len(MOUNT_PATH):] or "/"
            app: WSGIApp = _refusal(environ) or self.dav
        elif path.startswith("/api/") or path == "/api":
            app = _refusal(environ) or self.api
        else:
            app = _refusal(environ) or self.web
        try:
            result = app(environ, recording_start_response)
            try:
                yield from result
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        except Exception:
            # Flask and WsgiDAV answer their own errors; reaching here is a bug of ours. Log it
            # whole, answer a short sentence (never the traceback), or drop the connection if the
            # response had already begun.
            log.exception("unhandled error in %s %s", environ.get("REQUEST_METHOD"), path)
            if status_holder:
                raise
            status_holder[:] = ["500"]
            yield from _plain(start_response, "500 Internal Server Error",
                              "internal error: the server could not complete the request; it has been logged")
        finally:
            principal = environ.get(PRINCIPAL_KEY)
            access_log.info('%s %s %s %.1fms %s', environ.get("REQUEST_METHOD"), path,
                            (status_holder or ["-"])[0].split(" ")[0], (time.perf_counter() - started) * 1000,
                            principal.name if principal else "-")


def _refusal(environ: dict[str, Any]) -> WSGIApp | None:
    """A short answer for a request no application should see: a path that is not UTF-8, a body
    length that is not a number, or a Basic header that cannot name a login. WsgiDAV would turn
    each into a 500 with the exception's text."""
    try:
        environ.get("PATH_INFO", "").encode("latin-1").decode("utf-8")
    except UnicodeError:
        return _answer("400 Bad Request", "the path is not valid UTF-8; percent-encode file names as UTF-8")
    length = environ.get("CONTENT_LENGTH", "")
    if length and not (length.isascii() and length.isdigit()):
        return _answer("400 Bad Request", f"Content-Length {length!r} is not a number of bytes")
    header = environ.get("HTTP_AUTHORIZATION", "")
    if header[:6].lower() == "basic " and parse_basic(header) is None:
        return _answer("401 Unauthorized", "the Basic credentials are not base64 of email:password in UTF-8",
                       [("WWW-Authenticate", 'Basic realm="Host Finder", charset="UTF-8"')])
    return None


def _answer(status: str, sentence: str, headers: list[tuple[str, str]] | None = None) -> WSGIApp:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        return _plain(start_response, status, sentence, headers)
    return app


def _plain(start_response: Callable[..., Any], status: str, sentence: str,
           headers: list[tuple[str, str]] | None = None) -> list[bytes]:
    body = (sentence + "\n").encode("utf-8")
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body))),
                            *(headers or [])])
    return [body]


def make_server(app: WSGIApp, host: str, port: int, *, threads: int = 16,
                tls_cert: str | None = None, tls_key: str | None = None) -> wsgi.Server:
    """A cheroot server, not yet bound. ``server.prepare()`` binds (raising OSError when the port
    is taken), ``server.serve()`` runs until ``server.stop()``."""
    server = wsgi.Server((host, port), app, numthreads=threads, server_name="hostfinder",
                         request_queue_size=64, timeout=60)
    # Finder and davfs2 keep connections open; cheroot's default 'max' would cap concurrency.
    server.max_request_body_size = 0
    if tls_cert:
        server.ssl_adapter = BuiltinSSLAdapter(str(tls_cert), str(tls_key))
    return server

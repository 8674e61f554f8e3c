"""One WSGI application for the whole gateway and the cheroot server that runs it.

/dav/... goes to WsgiDAV, /api/... to the JSON API, everything else to the operator's web app
(web/). Every request leaves one access-log line: method, path, status, milliseconds, user, every
field with its control characters escaped (gateway/logs.py) so a client cannot write a line of its
own. A server error is logged with its traceback and answered with a short message, never the
traceback. Before any application runs, the guard of gateway/limits.py bounds what the request may
make us read; its refusals, and the door's own for a head over its limit, are answered in the format
of the part of the tree asked (``Gateway.refusal``, the one place that decides it by the path).

Repeated slashes in a path outside /dav/ are read as one (as werkzeug's routing would, but with its
308 redirect, whose Location it built from the request's Host header). WebDAV paths keep theirs:
dav_provider normalises them itself."""
from __future__ import annotations

import errno
import json
import logging
import re
import time
from collections.abc import Callable, Iterable
from typing import Any

from cheroot import wsgi
from cheroot.ssl.builtin import BuiltinSSLAdapter

from api import create_app
from api.auth import parse_basic
from dav_provider.app import MOUNT_PATH, build_dav_app
from gateway import limits
from gateway.door import BODY_TIMEOUT, CLOSE_CONNECTION, SERVED_METHODS, DoorServer
from gateway.logs import clean, install as install_log_escaping
from store.access import PRINCIPAL_KEY, Door
from store.db import Database, outage_met
from store.errors import Unavailable
from store.filecache import FileCache
from store.login_watch import LoginWatch
from store.search_index import SearchIndexer
from store.throttle import PasswordChecks, cores
from web import create_app as create_web_app
from web.errors import refusal_page
from web.live import end_streams

access_log = logging.getLogger("hostfinder.access")
log = logging.getLogger(__name__)

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
_SLASHES = re.compile(r"//+")


def _is_dav(path: str) -> bool:
    return path == MOUNT_PATH or path.startswith(MOUNT_PATH + "/")


def _is_api(path: str) -> bool:
    return path == "/api" or path.startswith("/api/")


class Gateway:
    """The composed WSGI application: routes by path prefix and logs each request."""

    def __init__(self, db: Database, *, read_cache: bool = False, processes: int = 1) -> None:
        """``processes``: how many gateway processes share the machine (``serve --workers``), which
        share its cores for password verifications (store.throttle.PasswordChecks)."""
        install_log_escaping()
        self.db = db
        # Logins verified once are reused without a query until a change that could end them is
        # announced (sql/060, store/login_watch.py); while that channel is down, one query each.
        self.login_watch = LoginWatch(db.conninfo).start()
        checks = PasswordChecks(max(1, cores() // processes)) if processes > 1 else None
        self.door = Door(db, watch=self.login_watch, checks=checks)
        # Off by default: without it every GET is one query, so gateways behind a load balancer
        # always read what any of them last wrote. With it (one gateway), repeated reads come from
        # memory, kept exact by change events (store.filecache).
        self.cache = FileCache(db.conninfo).start() if read_cache else None
        # Notes' search vectors are filled after their saves, not in them (sql/015).
        self.indexer = SearchIndexer(db.conninfo).start()
        self.api = create_app(db, door=self.door)
        self.dav = build_dav_app(db, self.door, cache=self.cache)
        self.web = create_web_app(db, door=self.door)

    def stopping(self) -> None:
        """Called just before the HTTP server stops: ends what would otherwise hold its workers
        to the end of the server's shutdown timeout (the web app's live streams, one per open
        table page), so a stop waits only for the requests in flight."""
        end_streams(self.db.conninfo)

    def close(self) -> None:
        self.indexer.stop()
        self.login_watch.stop()
        if self.cache is not None:
            self.cache.stop()

    def refusal(self, path: str, status: str, sentence: str, headers: list[tuple[str, str]] | None = None,
                environ: dict[str, Any] | None = None) -> tuple[list[tuple[str, str]], bytes]:
        """A refusal made before any front end ran, as the front end ``path`` names would give it:
        the headers and the body. The one place that decides the format by the path: under /api/
        the API's JSON error (api/errors.py), under /dav/ a plain sentence (as WsgiDAV's errors),
        anywhere else the web app's error page. The guard's refusals come here (``_refusing``),
        and the door's for a head over its limit (gateway/door.py: ``environ`` None then)."""
        code = int(status.split(" ", 1)[0])
        if _is_api(path):
            body = json.dumps({"error": sentence, "problems": [], "status": code}).encode("utf-8")
            kind = [("Content-Type", "application/json")]
        elif _is_dav(path):
            body, kind = (sentence + "\n").encode("utf-8"), [("Content-Type", "text/plain; charset=utf-8")]
        else:
            try:
                body, kind = refusal_page(self.web, code, _capital(sentence), environ)
            except Exception:   # (a page that cannot be drawn must not turn a refusal into a 500)
                log.exception("could not draw the web page for a %s refusal", status)
                body, kind = (sentence + "\n").encode("utf-8"), [("Content-Type", "text/plain; charset=utf-8")]
        return [*kind, ("Content-Length", str(len(body))), *(headers or [])], body

    def _refusing(self, path: str, status: str, sentence: str, headers: list[tuple[str, str]]) -> WSGIApp:
        def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
            all_headers, body = self.refusal(path, status, sentence, headers, environ)
            start_response(status, all_headers)
            return [body]
        return app

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        started = time.perf_counter()
        status_holder: list[str] = []

        def recording_start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            status_holder[:] = [status]
            return start_response(status, headers, exc_info)

        path = environ.get("PATH_INFO", "")
        if "//" in path and not _is_dav(path):
            # /api//collections is /api/collections: the web app's and the API's paths have no
            # empty segment. (werkzeug answered it with a redirect to the request's Host.)
            path = environ["PATH_INFO"] = _SLASHES.sub("/", path)
        if environ.get("REQUEST_URI") == "*":
            # OPTIONS * asks about the server as a whole (RFC 9110 9.3.7), not a page at "/*" (the
            # PATH_INFO cheroot gives it; cheroot itself refuses * with any other method).
            app: WSGIApp = _server_options
        elif (refused := _refusal(environ, path)) is not None:
            app = self._refusing(path, *refused)
        elif _is_dav(path):
            # WsgiDAV expects its mount path in SCRIPT_NAME, as a path dispatcher would set it.
            environ["SCRIPT_NAME"] = environ.get("SCRIPT_NAME", "") + MOUNT_PATH
            environ["PATH_INFO"] = path[len(MOUNT_PATH):] or "/"
            app = _outage_as_503(self.dav)
        elif _is_api(path):
            app = self.api
        else:
            app = self.web
        try:
            result = app(environ, recording_start_response)
            try:
                yield from result
            finally:
                close = getattr(result, "close", None)
                if close is not None:
                    close()
        except Unavailable as exc:
            # The database went away under code that does not translate store errors itself.
            if status_holder:
                raise
            status_holder[:] = ["503"]
            yield from _plain(start_response, "503 Service Unavailable", exc.message,
                              [("Retry-After", str(exc.retry_after))])
        except Exception:
            # Flask and WsgiDAV answer their own errors; reaching here is a bug of ours. Log it
            # whole, answer a short sentence (never the traceback), or drop the connection if the
            # response had already begun.
            log.exception("unhandled error in %s %s", clean(environ.get("REQUEST_METHOD")), clean(path))
            if status_holder:
                raise
            status_holder[:] = ["500"]
            yield from _plain(start_response, "500 Internal Server Error",
                              "internal error: the server could not complete the request; it has been logged")
        finally:
            access_log.info('%s %s %s %.1fms %s', clean(environ.get("REQUEST_METHOD")), clean(path),
                            (status_holder or ["-"])[0].split(" ")[0], (time.perf_counter() - started) * 1000,
                            clean(_who(environ.get(PRINCIPAL_KEY))))


def _who(principal: Any) -> str:
    """The caller as the access log names it: a member by email; a service token by its
    organisation only, since its display name holds the first characters of the secret."""
    if principal is None:
        return "-"
    if principal.kind == "service":
        return "service of org " + ",".join(str(o) for o in sorted(principal.org_ids))
    return principal.name


def _capital(sentence: str) -> str:
    """A sentence as a page shows it: capital first, full stop last (the API's and WebDAV's
    sentences are lower-case clauses, as their clients quote them)."""
    sentence = sentence[:1].upper() + sentence[1:]
    return sentence if sentence.endswith((".", "!", "?")) else sentence + "."


def _refusal(environ: dict[str, Any], path: str) -> tuple[str, str, list[tuple[str, str]]] | None:
    """Status, sentence and headers for a request no application should see: a path that is not
    UTF-8, a body length that is not a number, a Basic header that cannot name a login (WsgiDAV
    would turn each into a 500 with the exception's text), or a request over a bound of
    gateway/limits.py."""
    try:
        environ.get("PATH_INFO", "").encode("latin-1").decode("utf-8")
    except UnicodeError:
        return "400 Bad Request", "the path is not valid UTF-8; percent-encode file names as UTF-8", []
    length = environ.get("CONTENT_LENGTH", "")
    if length and not (length.isascii() and length.isdigit()):
        # Where the body ends is unknown, so what follows on the connection is not a request.
        _close_after(environ)
        return "400 Bad Request", f"Content-Length {length!r} is not a number of bytes", [("Connection", "close")]
    header = environ.get("HTTP_AUTHORIZATION", "").strip()
    if header.split(" ", 1)[0].lower() == "basic" and parse_basic(header) is None:
        return ("401 Unauthorized", "the Basic credentials are not base64 of email:password in UTF-8",
                [("WWW-Authenticate", 'Basic realm="Host Finder", charset="UTF-8"')])
    return _bounded(environ, path)


def _bounded(environ: dict[str, Any], path: str) -> tuple[str, str, list[tuple[str, str]]] | None:
    """The guard's refusal, if any; its body was not read (or not wholly), so the connection
    closes after the answer: what follows on it is not a request."""
    refusal = limits.guard(environ, path)
    if refusal is None:
        return None
    _close_after(environ)
    return refusal.status, refusal.sentence, [("Connection", "close")]


def _close_after(environ: dict[str, Any]) -> None:
    """Ask the door to close the connection after this answer."""
    close = environ.get(CLOSE_CONNECTION)
    if close is not None:
        close()


def _outage_as_503(app: WSGIApp) -> WSGIApp:
    """WsgiDAV turns any exception from outside its provider's translated calls (the login check,
    the lock storage) into a 500. When that exception was the store's Unavailable, the client
    gets what it means: 503 with Retry-After, so Finder and davfs2 retry instead of giving up."""
    def wrapped(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        outage_met(reset=True)
        replaced: list[bytes] = []

        def watching_start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            sentence = outage_met()
            if status.startswith("500") and sentence:
                body = (sentence + "\n").encode("utf-8")
                replaced.append(body)
                return start_response("503 Service Unavailable", [
                    ("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body))),
                    ("Retry-After", "2")], exc_info)
            return start_response(status, headers, exc_info)

        result = app(environ, watching_start_response)
        try:
            for chunk in result:
                if not replaced:
                    yield chunk
            if replaced:
                yield replaced[0]
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
    return wrapped


def _server_options(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    """OPTIONS *: every method some path of this server takes (OPTIONS on a path says which of
    them that path does)."""
    start_response("200 OK", [("Allow", ", ".join(SERVED_METHODS)), ("Content-Length", "0")])
    return [b""]


def _plain(start_response: Callable[..., Any], status: str, sentence: str,
           headers: list[tuple[str, str]] | None = None) -> list[bytes]:
    body = (sentence + "\n").encode("utf-8")
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body))),
                            *(headers or [])])
    return [body]


def cannot_start(host: str, port: int, exc: Exception, *, tls: bool) -> str:
    """One sentence for a server that could not be made: with TLS, most often a certificate or
    key that does not load (ssl.SSLError's own text names only OpenSSL's function)."""
    hint = "; check --tls-cert and --tls-key (PEM files of one certificate and its key)" if tls else ""
    return f"cannot start the server on {host}:{port}: {exc}{hint}"


def cannot_listen(host: str, port: int, exc: OSError) -> str:
    """One sentence for a bind that failed: the port taken, or an address this machine lacks.
    (cheroot wraps the OSError in its own message, so the errno is looked for in the text too.)"""
    text = f"{exc.strerror or exc}"
    if exc.errno == errno.EADDRINUSE or "Errno 98" in text or "in use" in text:
        return (f"cannot listen on {host}:{port}: the port is in use (another server, or a gateway "
                "still running); choose another with --bind HOST:PORT")
    if exc.errno == errno.EACCES or "Errno 13" in text or "ermission denied" in text:
        return (f"cannot listen on {host}:{port}: permission denied (a port below 1024 needs root); "
                "choose a port from 1024 up with --bind HOST:PORT")
    return (f"cannot listen on {host}:{port} ({text}); check the address in --bind HOST:PORT (0.0.0.0 "
            "for every interface, 127.0.0.1 for this machine only)")


def make_server(app: WSGIApp, host: str, port: int, *, threads: int = 16,
                tls_cert: str | None = None, tls_key: str | None = None) -> wsgi.Server:
    """A cheroot server with the parking front (gateway/door.py), not yet bound.
    ``server.prepare()`` binds (raising OSError when the port is taken), ``server.serve()`` runs
    until ``server.stop()``. ``timeout`` is cheroot's socket timeout on a connection a worker is
    answering; the front bounds clients that send or read nothing (gateway/door.py: header_timeout,
    body_timeout), so no worker waits on one. Bodies are bounded per route by the guard, not by
    cheroot."""
    server = DoorServer((host, port), app, numthreads=threads, server_name="hostfinder",
                        request_queue_size=1024, timeout=BODY_TIMEOUT)
    server.max_request_body_size = 0
    if tls_cert:
        server.ssl_adapter = BuiltinSSLAdapter(str(tls_cert), str(tls_key))
    return server

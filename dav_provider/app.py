"""Builds the WsgiDAV application for /dav/ over the store."""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from wsgidav.dav_error import DAVError
from wsgidav.dir_browser import WsgiDavDirBrowser
from wsgidav.error_printer import ErrorPrinter
from wsgidav.http_authenticator import HTTPAuthenticator
from wsgidav.mw.base_mw import BaseMiddleware
from wsgidav.mw.cors import Cors
from wsgidav.request_resolver import RequestResolver
from wsgidav.wsgidav_app import WsgiDAVApp

from dav_provider import MOUNT_PATH, fastget, fastput, headers
from dav_provider.auth import StoreDomainController
from dav_provider.errors import dav_error, explained, internal_error
from dav_provider.locks import HostLockManager, PgLockStorage, reset_request_cache
from dav_provider.props import PgPropertyManager
from dav_provider.provider import HostDAVProvider
from store.access import PRINCIPAL_KEY, Door
from store.db import Database
from store.errors import StoreError
from store.filecache import FileCache


class CompleteAnswers:
    """The WsgiDAV app, with every answer complete. WsgiDAV 4.4's ``__call__`` is a generator, so
    an error it answers before reaching a provider (a path climbing above /dav/) is ``return``-ed
    and WSGI servers drop it: the client got the status and a Content-Length, never the body."""

    def __init__(self, app: WsgiDAVApp) -> None:
        self.app = app

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
        result = self.app(environ, start_response)
        returned = yield from result
        if returned is not None:
            yield from returned


class FastPaths:
    """The DAV application: a plain GET or HEAD of a file is answered by dav_provider.fastget,
    a plain PUT by dav_provider.fastput, without WsgiDAV's middleware stack; everything else goes
    to WsgiDAV. ``enabled`` exists so tests can compare both answers to the same request."""

    enabled = True

    def __init__(self, app: CompleteAnswers, provider: HostDAVProvider, door: Door) -> None:
        self.app, self.provider, self.door = app, provider, door

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        # The live locks this thread read belong to its previous request: forget them before
        # anything (WsgiDAV's dir browser resolves the path before the provider's handler runs).
        reset_request_cache(environ)
        # The dates of conditional requests, once for every method and path (the fast paths and
        # WsgiDAV evaluate them): one WsgiDAV cannot read would otherwise be a 500.
        headers.normalize_dates(environ)
        if self.enabled:
            fast = (fastput if environ.get("REQUEST_METHOD") == "PUT" else fastget).answer(
                self.provider, self.door, environ, start_response)
            if fast is not None:
                return fast
        return self.app(environ, start_response)


class PlainErrors(BaseMiddleware):
    """Sits below WsgiDAV's ErrorPrinter: an error body says what was wrong in a sentence, never
    "Source exception: ..." with a parser's or a driver's message (WsgiDAV prints the exception it
    wraps). A failure of ours is logged with its traceback and answered 500 with a sentence."""

    def is_disabled(self) -> bool:
        return False

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterator[bytes]:
        try:
            returned = yield from self.next_app(environ, start_response)
            if returned is not None:
                yield from returned
        except DAVError as exc:
            if exc.src_exception is not None:
                if isinstance(exc.src_exception, StoreError):
                    raise dav_error(exc.src_exception) from None
                if exc.value >= 500:
                    raise internal_error(exc.src_exception) from None
                exc.src_exception = None
            raise explained(exc, environ.get("REQUEST_METHOD", "")) from None
        except StoreError as exc:
            # A refusal, or the database being away (503): an answer, not a failure of ours, so
            # no traceback per request in the log while PostgreSQL is down.
            raise dav_error(exc) from None
        except Exception as exc:
            raise internal_error(exc) from None


class OneName(BaseMiddleware):
    """Sits below WsgiDAV's HTTPAuthenticator, which names the request's user as the Basic header
    spelt the email ("Ada@Example.com"): WsgiDAV's locks are held by that name, so each spelling
    was a holder of its own, with a lock limit of its own and no reach to the locks taken under
    another. The user is named as the store knows them (the login's email), as the mount and
    the fast paths do."""

    def is_disabled(self) -> bool:
        return False

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        principal = environ.get(PRINCIPAL_KEY)
        if principal is not None:
            environ["wsgidav.auth.user_name"] = principal.name
        return self.next_app(environ, start_response)


def build_dav_app(db: Database, door: Door, *, cache: FileCache | None = None) -> FastPaths:
    host_provider = HostDAVProvider(db, cache=cache)
    config: dict[str, Any] = {
        "mount_path": MOUNT_PATH,
        "provider_mapping": {"/": host_provider},
        "http_authenticator": {
            "domain_controller": StoreDomainController,
            "accept_basic": True,
            "accept_digest": False,
            "default_to_digest": False,
        },
        "hostfinder": {"door": door},
        "verbose": 1,
        "middleware_stack": [Cors, ErrorPrinter, PlainErrors, HTTPAuthenticator, OneName, WsgiDavDirBrowser,
                             RequestResolver],
        "logging": {"enable": False, "enable_loggers": []},
        # The gateway writes its own access log line per request.
        "dir_browser": {"enable": True, "response_trailer": "Host Finder"},
        # Locks and dead properties in PostgreSQL, so that several gateway processes share them.
        "lock_storage": PgLockStorage(db, watch=door.watch),
        "property_manager": PgPropertyManager(db),
    }
    app = WsgiDAVApp(config)
    # WsgiDAV builds its own LockManager over the storage; ours adds RFC 4918's shared-lock rule.
    manager = HostLockManager(app.lock_manager.storage)
    app.lock_manager = manager
    for provider in app.provider_map.values():
        provider.set_lock_manager(manager)
    return FastPaths(CompleteAnswers(app), host_provider, door)

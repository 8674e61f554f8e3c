"""The door of /api/: Basic (email and password or member token) or Bearer (member or service token).

The principal is put on ``flask.g``; views say which kinds of caller they take with
``@requires("user")`` or ``@requires("user", "service")``. A service token reaches only the
agent tool route, State and runs; everything else answers 404 for it, as for a stranger.
"""
from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar

from flask import current_app, g, request

from store.access import PRINCIPAL_KEY, Door, Principal
from store.errors import NotFound, Unauthenticated

F = TypeVar("F", bound=Callable[..., Any])

_NOT_FOR = {
    "service": "not found: a service token reaches the agent tools, State and runs; this route is the "
               "operator's (an email and password, or a member token)",
    "user": "not found: this route is the orchestrator's (its service token, Authorization: Bearer <token>); "
            "as an operator, use the Databases page's routes or WebDAV",
}


def parse_basic(header: str) -> tuple[str, str] | None:
    """(email, secret) from a 'Basic ...' Authorization value, or None when it is not one that
    could name a login (bad base64, not UTF-8, no colon). Shared by /api/ and the gateway's /dav/
    door, so both treat a garbled header as a failed login."""
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    email, sep, secret = decoded.partition(":")
    return (email, secret) if sep and email and secret else None


def authenticate(door: Door, header: str | None, client: str | None = None) -> Principal | None:
    """The principal for an Authorization header value, or None. ``client`` is the caller's
    address, which the door's throttle counts failures against (TooManyAttempts when too many)."""
    if not header:
        return None
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return door.bearer(value.strip(), client=client)
    credentials = parse_basic(header)
    return door.basic(*credentials, client=client) if credentials else None


def requires(*kinds: str) -> Callable[[F], F]:
    """Guard a view: authenticated, and of one of ``kinds`` ('user', 'service')."""
    def wrap(view: F) -> F:
        @wraps(view)
        def guarded(*args: Any, **kwargs: Any) -> Any:
            principal = authenticate(current_app.extensions["hostfinder.door"],
                                     request.headers.get("Authorization"), request.remote_addr)
            if principal is None:
                if request.headers.get("Authorization", "").strip():
                    # Credentials were sent: saying only "required" sends a client round again
                    # with the same ones.
                    raise Unauthenticated(
                        "the credentials sent were not accepted: check the email and password, or the "
                        "token (an administrator creates one with `hostfinder admin token create`)")
                raise Unauthenticated("authentication required: send HTTP Basic (email and password or token)"
                                      " or Authorization: Bearer <token>")
            if principal.kind not in kinds:
                # 404 as for a stranger; the sentence says which caller the route is for.
                raise NotFound(_NOT_FOR.get(principal.kind, "not found"))
            g.principal = principal
            request.environ[PRINCIPAL_KEY] = principal
            return view(*args, **kwargs)
        return guarded  # type: ignore[return-value]
    return wrap


def principal() -> Principal:
    return g.principal

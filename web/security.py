"""Who is asking, and the web's defences: the session cookie, CSRF, origin and response headers.

Every request looks its session up in PostgreSQL (store.sessions), joined to the user's current
memberships, so logging out, revoking a token or removing a membership ends access at once on
every gateway process. Unsafe requests need the session's CSRF token (form field ``csrf_token`` or
header ``X-CSRF-Token``) and, when the browser says where it comes from, this origin.
"""
from __future__ import annotations

import dataclasses
import hmac
from collections.abc import Callable
from functools import wraps
from typing import Any, TypeVar
from urllib.parse import urlsplit

from flask import Flask, Response, current_app, g, redirect, request, url_for
from werkzeug.exceptions import Forbidden as HTTPForbidden

from store import sessions
from store.access import PRINCIPAL_KEY, Door, Principal
from store.db import Database
from store.errors import Unauthenticated

COOKIE = "hf_session"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "X-CSRF-Token"
UNSAFE = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Only the gateway's own scripts and styles: no inline script or style, no frames, no plug-ins.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self';"
       " font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")

F = TypeVar("F", bound=Callable[..., Any])


def db() -> Database:
    return current_app.extensions["hostfinder.db"]


def door() -> Door:
    return current_app.extensions["hostfinder.door"]


def session() -> sessions.WebSession:
    """The current session; views behind ``login_required`` always have one."""
    return g.web_session


def principal() -> Principal:
    return g.web_session.principal


def in_view(org_id: int) -> None:
    """A page of ``org_id``'s (a table, a record, a note, an agent, a guild) shows that
    organisation: the session switches to it, so the header's switcher names the organisation the
    page shows and edits, and what the page leads to (New table, New note) goes there too. A link
    or a bookmark into another organisation used to leave the switcher naming the one before."""
    ws: sessions.WebSession = g.web_session
    if ws.org_id != org_id:
        sessions.switch_org(db(), ws, org_id)
        g.web_session = dataclasses.replace(ws, org_id=org_id)


def login_required(view: F) -> F:
    """A page for logged-in members: without a session, a GET goes to the login form (and back
    after), anything else is refused with a sentence."""
    @wraps(view)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        if g.get("web_session") is None:
            if request.method == "GET":
                return redirect(url_for("auth.login_form", next=request.full_path.rstrip("?")))
            raise Unauthenticated("You are not logged in (or your session ended); log in again and retry.")
        return view(*args, **kwargs)
    return guarded  # type: ignore[return-value]


def set_cookie(resp: Response, secret: str) -> None:
    resp.set_cookie(COOKIE, secret, httponly=True, samesite="Lax", secure=request.is_secure, path="/",
                    max_age=int(sessions.ABSOLUTE_LIMIT.total_seconds()))


def clear_cookie(resp: Response) -> None:
    resp.delete_cookie(COOKIE, path="/", httponly=True, samesite="Lax", secure=request.is_secure)


def safe_next(target: str | None) -> str | None:
    """A path on this site to return to after login, or None: never another host (an open redirect)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return None
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in target):
        return None  # a line break cannot go into the Location header (and no page has one)
    parts = urlsplit(target)
    return target if not parts.scheme and not parts.netloc else None


def _same_origin() -> bool:
    """False only when the browser names another origin (Origin, else Referer) for an unsafe request."""
    source = request.headers.get("Origin") or request.headers.get("Referer")
    if not source or source == "null":
        return source is None
    parts = urlsplit(source)
    return f"{parts.scheme}://{parts.netloc}" == request.host_url.rstrip("/")


def register(app: Flask) -> None:
    @app.before_request
    def _load_session() -> None:
        if request.endpoint in ("static", "favicon"):
            g.web_session = None  # stylesheets and scripts need no session: no query for them
            return
        g.web_session = sessions.lookup(db(), request.cookies.get(COOKIE))
        if g.web_session is not None:
            request.environ[PRINCIPAL_KEY] = g.web_session.principal
        if request.method in UNSAFE:
            if not _same_origin():
                raise HTTPForbidden("This form was sent from another site; open Host Finder and submit it there.")
            ws = g.web_session
            if ws is not None and request.endpoint not in ("auth.login",):
                sent = request.headers.get(CSRF_HEADER) or request.form.get(CSRF_FIELD) or ""
                if not hmac.compare_digest(sent.encode(), ws.csrf_token.encode()):
                    raise HTTPForbidden("The form's security token is missing or out of date (the page may be"
                                        " older than your login); reload the page and submit it again.")

    @app.after_request
    def _headers(resp: Response) -> Response:
        resp.headers["Content-Security-Policy"] = CSP
        resp.headers["X-Content-Type-Options"] = "nosniff"
        resp.headers["X-Frame-Options"] = "DENY"
        resp.headers["Referrer-Policy"] = "same-origin"
        if not request.path.startswith("/static/"):
            resp.headers.setdefault("Cache-Control", "no-store")
        return resp

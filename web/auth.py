"""Logging in and out, and choosing the organisation in view.

The login form (GET /, inputs ``email`` and ``password``) checks credentials through the same Door
as /dav/ and /api/: a password, or an API token typed in the password field. Whatever the Door
refuses with (too many failed logins: 429 with Retry-After) is shown as a message page.
"""
from __future__ import annotations

from flask import Blueprint, g, make_response, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from store import sessions
from store.errors import Invalid, StoreError
from web import errors
from web.security import COOKIE, clear_cookie, db, door, login_required, safe_next, session, set_cookie

bp = Blueprint("auth", __name__)

HOME = "databases.index"


@bp.get("/")
def login_form() -> ResponseReturnValue:
    if g.get("web_session") is not None:
        return redirect(safe_next(request.args.get("next")) or url_for(HOME))
    return render_template("login.html", email="", next=safe_next(request.args.get("next")) or "")


@bp.post("/")
@bp.post("/login")
def login() -> ResponseReturnValue:
    email = request.form.get("email", "").strip()
    password = request.form.get("password", "")
    target = safe_next(request.form.get("next"))
    if not email or not password:
        missing = " and ".join(n for n, v in (("your email", email), ("your password or API token", password)) if not v)
        return render_template("login.html", email=email, next=target or "",
                               error=f"Enter {missing} to log in."), 400
    try:
        principal = door().basic(email, password, client=request.remote_addr)
    except StoreError as exc:  # a refusal the Door gives (too many failed attempts)
        return errors.store_error_page(exc)
    if principal is None or principal.kind != "user" or not principal.org_ids:
        why = ("That email and password (or API token) do not match an account; check both and try again."
               if principal is None else "This account is not a member of any organisation yet; ask an administrator.")
        return render_template("login.html", email=email, next=target or "", error=why), 401
    # A login replaces the browser's earlier session (fixation: never reuse a cookie across logins).
    sessions.end(db(), request.cookies.get(COOKIE))
    resp = make_response(redirect(target or url_for(HOME)))
    set_cookie(resp, sessions.create(db(), principal))
    return resp


@bp.get("/login")
def login_page() -> ResponseReturnValue:
    return redirect(url_for("auth.login_form", **request.args))


@bp.post("/logout")
def logout() -> ResponseReturnValue:
    sessions.end(db(), request.cookies.get(COOKIE))
    resp = make_response(redirect(url_for("auth.login_form")))
    clear_cookie(resp)
    return resp


@bp.post("/org")
@login_required
def switch_org() -> ResponseReturnValue:
    """The org switcher: show another of the user's organisations."""
    raw = request.form.get("org_id", "")
    if not (raw.isascii() and raw.isdigit()) or len(raw) > 18:
        raise Invalid(f"org_id must be the number of one of your organisations; got {raw!r}")
    sessions.switch_org(db(), session(), int(raw))
    return redirect(safe_next(request.form.get("next")) or url_for(HOME))

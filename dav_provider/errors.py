"""Store errors as DAV statuses: the one table of the WebDAV front end.

The sentence travels in the DAVError's context_info, so it is in the response body (Finder hides
bodies, so a refusal is also logged)."""
from __future__ import annotations

import logging

from wsgidav.dav_error import ERROR_DESCRIPTIONS, HTTP_INTERNAL_ERROR, DAVError

from store import errors as e

# WsgiDAV has no reason phrase for 503 and would send "503 Status" (the store is unavailable).
ERROR_DESCRIPTIONS.setdefault(503, "503 Service Unavailable")

log = logging.getLogger(__name__)

# Most specific first: the first class in the exception's MRO found here wins.
STATUS: dict[type[e.StoreError], int] = {
    e.Unauthenticated: 401,
    e.NotFound: 404,
    e.ReadOnly: 403,
    e.Forbidden: 403,
    e.NotANote: 403,
    e.Invalid: 400,
    e.Embedded: 409,
    e.AlreadyExists: 412,
    e.Contention: 409,
    e.Conflict: 409,
    e.TooLarge: 413,
    e.LimitReached: 507,
    e.PreconditionFailed: 412,
    e.Locked: 423,
    e.TooManyAttempts: 429,
    e.Unavailable: 503,
    e.StoreError: 400,
}


def status_of(exc: e.StoreError) -> int:
    return e.translate(STATUS, exc, 400)


def dav_error(exc: e.StoreError) -> DAVError:
    """The DAVError a client receives for a store refusal, with the sentence as its body (a
    refusal of several problems lists them in its sentence already: store.errors.rejected)."""
    status = status_of(exc)
    text = exc.message
    log.info("refused (%s): %s", status, text)
    retry_after = getattr(exc, "retry_after", None)  # too many logins, or the store is down
    return DAVError(status, context_info=text,
                    add_headers=[("Retry-After", str(retry_after))] if retry_after is not None else None)


def internal_error(exc: BaseException) -> DAVError:
    """A failure of ours: logged whole (with its traceback), answered with a sentence only. The
    DAVError carries no src_exception, so WsgiDAV does not print the exception into the body."""
    log.error("WebDAV request failed", exc_info=exc)
    return DAVError(HTTP_INTERNAL_ERROR, context_info="the server failed to answer this request; the failure "
                    "is logged for the operator. Try again; if it persists, tell the operator the time")

"""Store errors as DAV statuses: the one table of the WebDAV front end; and WsgiDAV's own
refusals (a method it does not answer, a precondition) given the sentence they lack (``explained``).

The sentence travels in the DAVError's context_info, so it is in the response body (Finder hides
bodies, so a refusal is also logged); a precondition's body is its DAV:error XML, which carries
the sentence in an element of its own."""
from __future__ import annotations

import logging

from wsgidav import xml_tools
from wsgidav.dav_error import (ERROR_DESCRIPTIONS, HTTP_INTERNAL_ERROR, HTTP_METHOD_NOT_ALLOWED,
                               PRECONDITION_CODE_LockConflict, PRECONDITION_CODE_LockTokenMismatch,
                               PRECONDITION_CODE_MissingLockToken, PRECONDITION_CODE_ProtectedProperty, DAVError,
                               DAVErrorCondition)
from wsgidav.util import etree

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


# --- WsgiDAV's own refusals, with a sentence -------------------------------------------------------

# The methods this WebDAV server answers (WsgiDAV's RequestServer, class 2): a 405's Allow header
# (RFC 9110 15.5.6 requires one) and the sentence for a method it does not know.
METHODS = ("OPTIONS", "GET", "HEAD", "PUT", "DELETE", "PROPFIND", "PROPPATCH", "MKCOL", "COPY", "MOVE",
           "LOCK", "UNLOCK")

# What WsgiDAV's preconditions mean, said in place of its terse context (or its silence). One
# raised here with a sentence of its own (propfind-finite-depth, provider.py) keeps that.
CONDITIONS = {
    PRECONDITION_CODE_LockTokenMismatch: "the Lock-Token header names no lock on this resource: UNLOCK the URL the "
                                         "lock is on, with the token its LOCK answered in its Lock-Token header",
    PRECONDITION_CODE_LockConflict: "another client holds a lock on this resource or a folder above it (the href "
                                    "names the lock's root): wait until it is unlocked, or send that lock's token "
                                    "in an If header if it is yours",
    PRECONDITION_CODE_MissingLockToken: "this resource is locked (the href names the lock's root): send the lock's "
                                        "token in an If header, If: (<opaquelocktoken:...>), to change it",
    PRECONDITION_CODE_ProtectedProperty: "a live property (its size, dates, type, lock discovery...) is the "
                                         "server's: PROPPATCH sets and removes dead properties only",
}
# Where the sentence goes in a precondition's XML body: an element of Host Finder's own, which
# RFC 4918 (16) lets a server add to DAV:error and clients that do not know it ignore.
MESSAGE_TAG = "{urn:x-hostfinder}message"


class _Described(DAVErrorCondition):
    """A precondition whose DAV:error body also carries the refusal's sentence (WsgiDAV sends a
    condition's XML alone, so a sentence given with it never reached the client)."""

    def __init__(self, condition: DAVErrorCondition, sentence: str) -> None:
        super().__init__(condition.condition_code)
        self.hrefs, self.sentence = condition.hrefs, sentence

    def as_xml(self) -> etree.Element:
        error = super().as_xml()
        etree.SubElement(error, MESSAGE_TAG).text = self.sentence
        return error

    def as_string(self) -> str:
        return xml_tools.xml_to_bytes(self.as_xml(), pretty=False).decode("utf-8")


def explained(exc: DAVError, method: str) -> DAVError:
    """``exc`` (one of WsgiDAV's own refusals) with a sentence in its body when it had none: a
    precondition's meaning, or for a 405 the methods that are answered, with the Allow header."""
    if exc.value == HTTP_METHOD_NOT_ALLOWED:
        allow = ", ".join(METHODS)
        if not any(name.lower() == "allow" for name, _ in exc.add_headers or ()):
            exc.add_headers = [*(exc.add_headers or ()), ("Allow", allow)]
        if not exc.context_info and method not in METHODS:
            exc.context_info = f"{method[:40]} is not a method this WebDAV server answers; it answers {allow}"
        elif not exc.context_info:
            exc.context_info = f"{method} is not allowed on this resource"
    condition = exc.err_condition
    if condition is not None and type(condition) is DAVErrorCondition:
        # (the table's sentence before WsgiDAV's terse one, "Resource is not locked by token.")
        sentence = CONDITIONS.get(condition.condition_code) or exc.context_info
        if sentence:
            exc.err_condition = _Described(condition, sentence)
    return exc

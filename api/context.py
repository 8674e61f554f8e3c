"""Request helpers shared by the API's views: the store, the caller, JSON bodies and numbers."""
from __future__ import annotations

import json
import re
import sys
from typing import Any, NoReturn
from urllib.parse import urlsplit

from flask import current_app, request
from werkzeug.routing import IntegerConverter, Map

from api.errors import Malformed
from store.db import Database
from store.errors import Invalid

MAX_JSON_DEPTH = 64        # records and tool arguments are a few levels deep; deeper is an attack
INT32_MAX = 2**31 - 1      # versions, limits, counts
INT64_MAX = 2**63 - 1      # ids (PostgreSQL bigint)
_ASCII_NUMBER = re.compile(r"[0-9]+")
_SURROGATE = re.compile("[\ud800-\udfff]")


def db() -> Database:
    return current_app.extensions["hostfinder.db"]


def same_origin(origin: str | None, host_url: str) -> bool:
    """Whether a request's Origin header allows it: none (not a browser, or a browser's
    same-origin GET) or this host's own; "null" (a sandboxed or file: page) is another site."""
    if origin is None:
        return True
    parts = urlsplit(origin)
    return bool(parts.scheme) and f"{parts.scheme}://{parts.netloc}" == host_url.rstrip("/")


def json_body(*, required: bool = True) -> Any:
    """The request's JSON body, or a refusal with a sentence saying what is wrong with it: 400
    (Malformed) for bytes that are not UTF-8 or text that is not JSON, which no route can read at
    all (RFC 9110 keeps 422 for content that parses), 422 (Invalid) for JSON no route may take."""
    raw = request.get_data(cache=True)
    if not raw:
        if required:
            raise Invalid("the request needs a JSON body", ["body: expected a JSON object"])
        return {}
    encoding = json.detect_encoding(raw)  # what json.loads(bytes) reads: UTF-8 (a BOM allowed), or UTF-16/32
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        named = "UTF-8" if encoding.startswith("utf-8") else encoding.upper()
        at = exc.start + 1 + (3 if encoding == "utf-8-sig" else 0)  # (the codec counts after the BOM)
        msg = f"the request body is not {named} (byte {at})"
        raise Malformed(msg, [msg]) from None
    try:
        data = current_app.json.loads(text)
    except RecursionError:  # the decoder recurses once per level
        too_deep("body")
    except ValueError as exc:
        mistake = json_mistake(exc, lines=True)
        if mistake is None:
            too_long_number("the request body")
        msg = f"the request body is not valid JSON: {mistake}"
        raise Malformed(msg, [msg]) from None
    check_shape(data)
    return data


def json_mistake(exc: ValueError, *, lines: bool) -> str | None:
    """Where and why json.loads refused text (``exc``): a line and column in a body (``lines``),
    a character in a one-line query value, then the decoder's reason. None when the text is JSON
    holding a number longer than Python reads as an int (sys.get_int_max_str_digits), whose
    ValueError names no position and tells the reader to call a Python function."""
    if not isinstance(exc, json.JSONDecodeError):
        return None
    why = exc.msg.removesuffix(" at")  # "Invalid control character at": the position follows here
    return f"line {exc.lineno}, column {exc.colno}: {why}" if lines else f"{why} at character {exc.pos + 1}"


def too_long_number(what: str) -> NoReturn:
    """Invalid (422, like JSON nested too deeply: it parses) for a number of more digits than
    Python reads as an int in ``what``."""
    msg = (f"{what} holds a number of more than {sys.get_int_max_str_digits()} digits, more than any "
           "value here can hold")
    raise Invalid(msg, [msg])


def too_deep(what: str) -> NoReturn:
    """Invalid for JSON nested deeper than MAX_JSON_DEPTH in ``what`` (the body or a parameter)."""
    shown = "the JSON body" if what == "body" else f"the JSON in {what}"
    msg = f"{shown} is nested too deeply; at most {MAX_JSON_DEPTH} levels of arrays and objects"
    raise Invalid(msg, [f"{what}: {msg}"])


def check_shape(data: Any, what: str = "body") -> None:
    """Refuse what every later step would trip on: nesting deeper than MAX_JSON_DEPTH (recursive
    code further on) and lone surrogates such as "\\ud800" (no UTF-8 spells them: neither
    PostgreSQL nor a JSON answer echoing them could hold them). Iterative, so any depth is safe.
    ``what`` names where the JSON came from: the body, or a query parameter such as where. A
    place in the body is named by its keys alone (body.company is the field body's company,
    as the client wrote it); a place in a parameter starts with the parameter's name."""
    stack: list[tuple[Any, int, str]] = [(data, 0, "" if what == "body" else what)]
    while stack:
        value, depth, where = stack.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                _surrogate(_place(where))
        elif isinstance(value, (dict, list)):
            if depth >= MAX_JSON_DEPTH:
                too_deep(what)
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                if isinstance(key, str) and _SURROGATE.search(key):
                    _surrogate(f"a key in {_place(where)}")
                place = (f"{where}.{key}" if where else key) if isinstance(key, str) else f"{where}[{key}]"
                stack.append((item, depth + 1, place))


def _place(where: str) -> str:
    """A place in the JSON as a person reads it: "the request body" for the body itself."""
    return where if where and not where.startswith("[") else f"the request body{where}"


def _surrogate(where: str) -> NoReturn:
    shown = _SURROGATE.sub("\ufffd", where)
    msg = (f"{shown} holds a lone surrogate escape (such as \\ud800), which is not a character; "
           "send text as valid Unicode")
    raise Invalid(msg, [msg])


def number_problem(text: str, label: str, *, minimum: int = 0, maximum: int = INT32_MAX) -> str | None:
    """Why ``text`` is not a whole number from ``minimum`` to ``maximum`` in ASCII digits, or None.
    str.isdigit() and int() also take '²' or '١' (int('١') == 1): a number other than the one a
    person reads, or a 500 further on."""
    text = text.strip()
    if _ASCII_NUMBER.fullmatch(text) and len(text) <= 19 and minimum <= int(text) <= maximum:
        return None
    return f"{label}: a whole number from {minimum} to {maximum} in ASCII digits; got {text!r}"


def number(text: str | None, label: str, *, minimum: int = 0, maximum: int = INT32_MAX) -> int | None:
    """The number in a header or query value (None when absent or empty), or Invalid naming it."""
    if text is None or text.strip() == "":
        return None
    problem = number_problem(text, label, minimum=minimum, maximum=maximum)
    if problem is not None:
        raise Invalid(problem, [problem])
    return int(text.strip())


def _at_most(bound: int) -> str:
    """A regular expression for the decimal numbers from 0 to ``bound`` (leading zeros allowed)."""
    digits = str(bound)
    shorter = f"[0-9]{{1,{len(digits) - 1}}}" if len(digits) > 1 else None
    same_length = [digits]
    for i, d in enumerate(digits):
        if d != "0":
            rest = len(digits) - i - 1
            same_length.append(f"{digits[:i]}[0-{int(d) - 1}]" + (f"[0-9]{{{rest}}}" if rest else ""))
    return "0*(?:" + "|".join([*same_length, *([shorter] if shorter else [])]) + ")"


class AsciiIntConverter(IntegerConverter):
    """<int:...> in a route for ASCII digits only, up to a bigint: werkzeug's matches r"\\d+", which
    takes '١' as 1. Registered as the app's "int" converter before any blueprint.

    The bound is in the regular expression, not only in ``max``: werkzeug matches the path first
    and converts after, so a number that matched and failed conversion left the other methods'
    rules matched and turned DELETE /api/collections/9223372036854775808 into a 405. Out of range
    now matches no rule at all: 404, like any id that does not exist."""

    regex = _at_most(INT64_MAX)

    def __init__(self, url_map: Any, fixed_digits: int = 0, min: int | None = None,
                 max: int | None = INT64_MAX, signed: bool = False) -> None:
        super().__init__(url_map, fixed_digits=fixed_digits, min=min, max=max, signed=signed)


_RULE_PARAM = re.compile(r"<(?:([a-z_]+)(?:\([^)]*\))?:)?([A-Za-z_][A-Za-z0-9_]*)>")
_SHOWN_PATH = 200  # characters of a path a 404 quotes back


def unrouted(url_map: Map, method: str, path: str, document: str) -> str:
    """The sentence of a 404 that no route matched. Where the path has the shape of a route (its
    fixed parts) and only an id the int converter refused stands out (-1, '1.5', a number past a
    bigint), it names that id and the numbers that would work; otherwise it says there is no such
    route and where ``document`` (the OpenAPI document) lists them."""
    segments = path.split("/")
    for rule in url_map.iter_rules():
        parts = rule.rule.split("/")
        if len(parts) != len(segments):
            continue
        refused: tuple[str, str] | None = None
        for part, got in zip(parts, segments):
            param = _RULE_PARAM.fullmatch(part)
            if param is None or not got:
                if part != got:
                    break
            elif param.group(1) == "int" and refused is None and number_problem(
                    got, param.group(2), minimum=1, maximum=INT64_MAX) is not None:
                refused = (param.group(2), got)
        else:
            if refused is not None:
                name, got = refused
                shape = _RULE_PARAM.sub(lambda m: "{" + m.group(2) + "}", rule.rule)
                return (f"{name} in {shape} must be a whole number from 1 to {INT64_MAX} in ASCII digits; "
                        f"got {got[:_SHOWN_PATH]!r}")
    shown = path if len(path) <= _SHOWN_PATH else path[:_SHOWN_PATH] + "..."
    return f"no API route {method} {shown}; the routes are listed at {document}"


def header_int(name: str) -> int | None:
    """An id in a header (X-Run-Id)."""
    return number(request.headers.get(name), f"the {name} header", minimum=1, maximum=INT64_MAX)


def if_match_version(what: str) -> int | None:
    """The version an If-Match header names ("3", also W/"3"), or None without one: a write
    conditional on ``what`` (the task, the record) still being at that version (412 if not)."""
    value = request.headers.get("If-Match")
    if value is None or value.strip() == "*":
        return None  # (* matches whatever version is there: RFC 9110 13.1.1)
    text = value.strip().removeprefix("W/").strip('"')
    if number_problem(text, "If-Match") is not None:
        msg = (f"If-Match must be {what}'s version number, a whole number from 0 to {INT32_MAX} "
               f"such as \"3\"; got {value!r}")
        raise Invalid(msg, [msg])
    return int(text)

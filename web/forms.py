"""Fields every form of the web app sends alike, read with the sentence a wrong one gets; a field the
form left out; and the reading of every form and query string as strict UTF-8 (``register``)."""
from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any
from urllib.parse import unquote_to_bytes

from flask import Flask, Request, request
from werkzeug.exceptions import BadRequest, UnsupportedMediaType
from werkzeug.formparser import FormDataParser

from store.errors import Invalid


def form_id(name: str) -> int:
    """The id in form field ``name`` (ASCII digits, within bigint), else Invalid naming the field."""
    raw = request.form.get(name, "")
    if not (raw.isascii() and raw.isdigit() and 0 < len(raw) < 19):
        raise Invalid(f"{name} must be a whole number; got {raw!r}", [f"{name}: a whole number; got {raw!r}"])
    return int(raw)


def left_out(*names: str) -> list[str]:
    """The fields among ``names`` the form did not send at all. A browser sends every text input,
    textarea and select of a form, empty or not; a field missing altogether comes from a script or
    another client that left it out, and is never read as "empty it" (that erased a note, a task,
    a record's columns). (A checkbox is the exception: unticked, a browser leaves it out.)"""
    return [n for n in names if n not in request.form]


def left_out_sentence(missing: list[str], what_works: str) -> str:
    """The refusal of a form that left out ``missing``: nothing was saved, and what to send."""
    fields = " and ".join(missing) if len(missing) < 3 else ", ".join(missing[:-1]) + " and " + missing[-1]
    return (f"Nothing was saved: the form did not send the field{'' if len(missing) == 1 else 's'} {fields}. "
            f"{what_works}")


# The highest ?page= a paged list (a scope's notes, a table's records) reads; past the last page
# it says so, and a bigger number is no page number.
MAX_PAGE = 10**6


def page_arg(quoted: Callable[[str], str] = lambda raw: repr(raw[:40])) -> tuple[int, str | None]:
    """(the page the URL asks for, 1 without one; the problem when ``page`` is no page number,
    quoting what was sent with ``quoted``)."""
    raw = request.args.get("page", "").strip()
    if raw == "":
        return 1, None
    if raw.isascii() and raw.isdigit() and len(raw) <= len(str(MAX_PAGE)) and 1 <= int(raw) <= MAX_PAGE:
        return int(raw), None
    return 1, f"page: expected a whole number from 1 to {MAX_PAGE}; got {quoted(raw)}"


# The first word of a store's problem line that names a settings field ("name ...", "purpose is
# required: ...", "guild_id 7 is not a guild ..."), and the form field it belongs to.
_FIELD_WORDS = {"name": "name", "purpose": "purpose", "guild_id": "owner", "owner": "owner"}


def problem_ids(problems: list[str] | None, error: str | None, fields: tuple[str, ...]) -> dict[str, list[str]]:
    """For a refused form: field -> the ids of the sentences (in _flash.html's alert) that are
    about it, so its input is marked invalid and described by them (aria-describedby), each
    sentence shown once. A refusal that lists no problem but says a name is taken ("already
    exists") is the name's. The ids follow _flash.html: its error is #flash-error, and each
    problem that does not repeat the error is #problem-N in order."""
    out: dict[str, list[str]] = {}
    listed = 0
    for p in problems or []:
        repeats = p == error or p.partition(": ")[2] == error
        if not repeats:
            listed += 1
        field = _FIELD_WORDS.get(p.split(":", 1)[0].split(" ", 1)[0].strip().lower())
        if field in fields:
            out.setdefault(field, []).append("flash-error" if repeats else f"problem-{listed}")
    if error and not out and "name" in fields and "already exists" in error:
        out["name"] = ["flash-error"]
    return out


# --- text that is not UTF-8 ---------------------------------------------------------------------------
#
# Werkzeug (3.x: its encoding_errors option was removed in 3.0) reads a form's and a query
# string's percent-encoded bytes that are not UTF-8 back as the text "%FF" (errors
# "werkzeug.url_quote"), a multipart field's as U+FFFD, and an url-encoded body with raw bytes
# that are not UTF-8 as no form at all: a note saved from ``content=a%ff%fe`` held the text
# "a%FF%FE". The web app reads its forms with the parser below instead, which refuses such a form
# with a 400 naming the field (as the API and WebDAV refuse such a body), and ``register`` refuses
# such a query string; nothing is saved.

def _shown(raw: bytes) -> str:
    """A field's name as a sentence can quote it, whatever its bytes."""
    text = raw.decode("utf-8", "backslashreplace")
    return text if len(text) <= 60 else text[:57] + "..."


class NotUTF8(BadRequest):
    """400: a form field or query parameter whose bytes are not UTF-8 text."""

    def __init__(self, where: str, *, query: bool = False) -> None:
        if query:
            message = (f"The address's query string has bytes that are not UTF-8 text in {where}; percent-encode"
                       " the text as UTF-8.")
        else:
            message = (f"Nothing was saved: the form sent bytes that are not UTF-8 text in {where}; send the text"
                       " as UTF-8.")
        super().__init__(description=message)


def _pair_texts(raw: bytes, *, query: bool = False) -> list[tuple[str, str]]:
    """``name=value&...`` (an url-encoded body, a query string) as urllib's parse_qsl reads it with
    keep_blank_values, each name and value strictly UTF-8; NotUTF8 names the first that is not."""
    items = []
    for part in raw.split(b"&"):
        if not part:
            continue
        name, _, value = part.partition(b"=")
        name, value = unquote_to_bytes(name.replace(b"+", b" ")), unquote_to_bytes(value.replace(b"+", b" "))
        kind = "the parameter" if query else "the field"
        try:
            name_text = name.decode("utf-8")
        except UnicodeDecodeError:
            raise NotUTF8(f"the name of {kind} {_shown(name)}", query=query) from None
        try:
            items.append((name_text, value.decode("utf-8")))
        except UnicodeDecodeError:
            raise NotUTF8(f"{kind} {name_text}", query=query) from None
    return items


def check_query_string(raw: bytes) -> None:
    """NotUTF8 when a query parameter's name or value is not UTF-8 text."""
    if raw:
        _pair_texts(raw, query=True)


class _StrictFormDataParser(FormDataParser):
    def _parse_urlencoded(self, stream: IO[bytes], mimetype: str, content_length: int | None,
                          options: dict[str, str]) -> Any:
        return stream, self.cls(_pair_texts(stream.read())), self.cls()

    def _parse_multipart(self, stream: IO[bytes], mimetype: str, content_length: int | None,
                         options: dict[str, str]) -> Any:
        # Every form of the web app is url-encoded (none uploads a file), so a multipart one is
        # refused rather than read by a copy of werkzeug's multipart loop (werkzeug decodes its
        # fields with errors="replace" and offers no hook to make that strict).
        raise UnsupportedMediaType(description=(
            "Nothing was saved: the web app's forms are sent as application/x-www-form-urlencoded, as a "
            "browser sends them, not as multipart/form-data; send the fields that way, or use the HTTP API "
            "at /api/."))


class FormRequest(Request):
    """The web app's request: its form is read strictly as UTF-8 (NotUTF8, a 400, otherwise)."""

    form_data_parser_class = _StrictFormDataParser

    def _load_form_data(self) -> None:
        try:
            super()._load_form_data()
        except (NotUTF8, UnsupportedMediaType):
            # (read once: the error page, or anything after it, finds an empty form, not the refusal again)
            self.__dict__.update(form=self.parameter_storage_class(), files=self.parameter_storage_class())
            raise


def register(app: Flask) -> None:
    """Forms and query strings whose text is not UTF-8 are refused (400) before any view runs.
    After the session's hook (web.security), so the refusal's page has the signed-in header."""
    app.request_class = FormRequest

    @app.before_request
    def _only_utf8() -> None:
        check_query_string(request.query_string)
        if request.method in ("POST", "PUT", "PATCH", "DELETE"):
            request.form  # noqa: B018 - parsed now: NotUTF8 before any view reads a field

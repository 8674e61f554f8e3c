"""Request lines and headers that WsgiDAV reads leniently, checked before it sees them.

WsgiDAV takes an empty or unparsable Destination for another server (502), decodes a bad
percent-escape in it to U+FFFD (a note named "\ufffd.md"), ignores an If header it cannot parse
(so a client's condition silently does not apply), serves the tail of the file for "bytes=5-2" and
only the first part of a multi-range. Each check here answers what RFC 4918 / RFC 9110 ask for
instead: 400 with a sentence, or the whole file where a server may ignore Range.

Two more are read here before WsgiDAV reads them its own way: the dates of conditional requests
(normalize_dates: WsgiDAV's parser fails with a 500 on a date a datetime cannot hold, such as the
year 99999) and the tags of an If header (resolve_if_tags: WsgiDAV applies a tagged list only when
its tag is, as text, the resource's path below the mount, where clients send its URL).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timezone
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any
from urllib.parse import SplitResult, unquote_to_bytes, urljoin, urlsplit

from wsgidav import util
from wsgidav.dav_error import HTTP_BAD_GATEWAY, HTTP_BAD_REQUEST, HTTP_RANGE_NOT_SATISFIABLE, DAVError

_ENCODED_SLASH = re.compile(r"%2f", re.IGNORECASE)

# RFC 4918 10.4: If = ( 1*No-tag-list | 1*Tagged-list ); List = "(" 1*Condition ")";
# Condition = ["Not"] (State-token | "[" entity-tag "]"). One list (with its optional tag) per
# repetition, so the match is linear.
_CONDITION = r"(?:not\s*)?(?:<[^<>]*>|\[[^\[\]]*\])"
_IF_HEADER = re.compile(rf"\s*(?:(?:<[^<>]*>\s*)?\(\s*(?:{_CONDITION}\s*)+\)\s*)+", re.IGNORECASE)

_RANGE_SPEC = re.compile(r"\s*(?:(\d+)\s*-\s*(\d*)|-\s*(\d+))\s*")


def bad_request(sentence: str) -> DAVError:
    return DAVError(HTTP_BAD_REQUEST, context_info=sentence)


def check_path(environ: dict[str, Any]) -> None:
    """An encoded slash in a name: the server keeps '%2F' literally, so 'a%2Fb.md' would become a
    note whose key holds '%2F'. Names are flat; refuse it instead of storing a surprise."""
    raw = environ.get("REQUEST_URI") or environ.get("PATH_INFO", "")
    if _ENCODED_SLASH.search(raw.split("?", 1)[0]):
        raise bad_request("the path holds an encoded slash (%2F); a file name cannot contain '/' "
                          "(notes are flat: a note's key has no '/'); choose a name without it")


def check_destination(environ: dict[str, Any]) -> None:
    """COPY and MOVE: Destination must be a URL or absolute path, percent-encoded UTF-8, under the
    mount, with no encoded slash."""
    raw = environ.get("HTTP_DESTINATION")
    example = f"such as http://host{environ.get('SCRIPT_NAME', '')}/org/1/agents/2/new.md"
    if raw is None:
        raise bad_request(f"{environ.get('REQUEST_METHOD')} needs a Destination header: the URL of the new "
                          f"name, {example}")
    text = raw.strip()
    if not text:
        raise bad_request(f"the Destination header is empty; send the URL of the new name, {example}")
    try:
        parts = urlsplit(text)
    except ValueError:
        parts = urlsplit("")
    path = parts.path
    if not path.startswith("/"):
        raise bad_request(f"the Destination header {raw!r} is not a URL or an absolute path; "
                          f"send the URL of the new name, {example}")
    if _ENCODED_SLASH.search(path):
        raise bad_request("the Destination holds an encoded slash (%2F); a file name cannot contain '/' "
                          "(notes are flat: a note's key has no '/'); choose a name without it")
    try:
        decoded = unquote_to_bytes(path).decode("utf-8")
    except UnicodeDecodeError:
        raise bad_request(f"the Destination {raw!r} is not valid UTF-8 once percent-decoded; "
                          "percent-encode file names as UTF-8") from None
    mount = environ.get("SCRIPT_NAME", "").rstrip("/")
    if mount and decoded != mount and not decoded.startswith(mount + "/"):
        raise bad_request(f"the Destination {raw!r} is outside {mount}/; files move and copy within "
                          f"{mount}/, {example}")
    _check_destination_host(environ, parts)


_DEFAULT_PORTS = {"http": "80", "https": "443"}


def _host(netloc: str, scheme: str) -> str:
    """A Host header or URL authority in one spelling: lower case, without the scheme's default
    port ("Notes.example.com:443" over https is "notes.example.com")."""
    host = netloc.strip().lower().rpartition("@")[2]
    default = _DEFAULT_PORTS.get(scheme.lower())
    return host.removesuffix(f":{default}") if default else host


def _names_this_server(environ: dict[str, Any], parts: SplitResult) -> bool:
    """Whether a URL's host is the request's (or the proxy's X-Forwarded-Host), written either way;
    a URL without a host (a path) names this server."""
    if not parts.netloc:
        return True
    scheme = environ.get("wsgi.url_scheme", "http")
    ours = {_host(environ.get("HTTP_HOST", ""), scheme)}
    forwarded = environ.get("HTTP_X_FORWARDED_HOST", "").split(",")[0]
    if forwarded.strip():
        ours.add(_host(forwarded, environ.get("HTTP_X_FORWARDED_PROTO", scheme).split(",")[0].strip()))
    return _host(parts.netloc, parts.scheme or scheme) in ours


def _check_destination_host(environ: dict[str, Any], parts: SplitResult) -> None:
    """A Destination URL names this server when its host is the request's (or the proxy's
    X-Forwarded-Host) written either way: WsgiDAV compared them as text and answered 502 for a
    default port written out. Such a Destination is handed on as its path. Another host is still
    a 502 (RFC 4918 9.8.5), now with a sentence that says what to change."""
    if not parts.netloc:
        return
    if not _names_this_server(environ, parts):
        raise DAVError(HTTP_BAD_GATEWAY, context_info=(
            f"the Destination names the server {parts.netloc!r}, but this request came to "
            f"{environ.get('HTTP_HOST', '')!r}: files move and copy within one server; send a Destination "
            f"on this server (or just its path, {parts.path}). Behind a reverse proxy, have it pass the Host "
            "header on (nginx: proxy_set_header Host $host) or set X-Forwarded-Host"))
    environ["HTTP_DESTINATION"] = parts.path + (f"?{parts.query}" if parts.query else "")


def check_simple_headers(environ: dict[str, Any]) -> None:
    """Depth, Overwrite and UNLOCK's Lock-Token, which WsgiDAV refuses in words that do not say
    what would work ("Invalid Depth header: '2'.", "Missing lock token.")."""
    depth = environ.get("HTTP_DEPTH")
    if depth is not None and depth.strip().lower() not in ("0", "1", "infinity"):
        raise bad_request(f"the Depth header {depth[:40]!r} is not one of 0, 1 or infinity (RFC 4918 10.2); "
                          "list a folder with Depth: 1")
    overwrite = environ.get("HTTP_OVERWRITE")
    if overwrite is not None and overwrite.strip().upper() not in ("T", "F"):
        raise bad_request(f"the Overwrite header {overwrite[:40]!r} is neither T nor F (RFC 4918 10.6): "
                          "send T to replace a file at the destination, F to refuse to")
    if environ.get("REQUEST_METHOD") == "UNLOCK" and not environ.get("HTTP_LOCK_TOKEN", "").strip("<> "):
        raise bad_request("UNLOCK needs a Lock-Token header naming the lock to remove, as the LOCK's answer "
                          "gave it: Lock-Token: <opaquelocktoken:...>")


def check_if(environ: dict[str, Any]) -> None:
    """RFC 4918 10.4: a malformed If header is a 400, not a condition silently dropped."""
    raw = environ.get("HTTP_IF")
    if raw is not None and not _IF_HEADER.fullmatch(raw):
        raise bad_request(f"the If header {raw[:200]!r} is malformed; RFC 4918 10.4 expects one or more "
                          'lists in parentheses, such as (<opaquelocktoken:...>) or '
                          '<http://host/dav/path> (["etag"])')


# An If header's tags once resolved here (resolve_if_tags runs once per request).
_IF_TAGS_RESOLVED = "hostfinder.if_tags_resolved"


def resolve_if_tags(environ: dict[str, Any], ref_url: Callable[[str], str]) -> None:
    """Make each tagged list of the If header apply to the resource its tag names (RFC 4918 10.4.2).

    WsgiDAV parses the header into ``environ["wsgidav.conditions.if"]`` (util.parse_if_header_dict,
    a dict from tag to lists, "*" for untagged ones) and, for each resource it checks, takes the
    lists whose tag equals that resource's get_ref_url() as text, and succeeds when there are none
    (util.test_if_header_dict). A ref URL is the resource's quoted path below the mount
    ("/org/1/a.md"), while clients tag with the URL they use: "/dav/org/1/a.md" or
    "http://host/dav/org/1/a.md", percent-encoded or not. So a tagged list never applied and a
    stale write went through. WsgiDAV has no hook for this comparison, so the dict it parsed (and
    reads from ``environ`` from here on) is re-keyed by hand: a tag naming a resource under the
    mount on this server becomes ``ref_url(path)`` (the provider gives the ref URL WsgiDAV will
    compare, for the DAV path the tag names). Any other tag (another server, a URL outside the
    mount) is kept as the absolute URL it names, which no ref URL equals: its lists keep applying to
    that other resource alone, as before (and as RFC 4918 asks, never to this request's resource).
    Lists of one resource under several spellings are merged: either list may hold (10.4.3)."""
    if "HTTP_IF" not in environ or environ.get(_IF_TAGS_RESOLVED):
        return
    util.parse_if_header_dict(environ)
    environ[_IF_TAGS_RESOLVED] = True
    parsed = environ.get("wsgidav.conditions.if") or {}
    keyed: dict[str, list[Any]] = {}
    for tag, lists in parsed.items():
        if tag == "*":
            key = tag
        else:
            path = _dav_path(environ, tag)
            key = _absolute(environ, tag) if path is None else ref_url(path)
        keyed.setdefault(key, []).extend(lists)
    environ["wsgidav.conditions.if"] = keyed


def _absolute(environ: dict[str, Any], tag: str) -> str:
    """A tag that names no resource of the mount, as the absolute URL it names (never a path, so
    never equal to a ref URL)."""
    base = f"{environ.get('wsgi.url_scheme', 'http')}://{environ.get('HTTP_HOST') or 'localhost'}/"
    try:
        return urljoin(base, tag.strip())
    except ValueError:  # an unreadable authority ("//[x"): no resource of ours either
        return "unreadable:" + tag.strip()


def _dav_path(environ: dict[str, Any], tag: str) -> str | None:
    """The decoded, normalised DAV path (as WsgiDAV's PATH_INFO: "/org/1/a b.md") that a tag (RFC
    4918 10.4.2's Simple-ref: an absolute URL or an absolute path) names under the mount of this
    server, or None for anything else."""
    try:
        parts = urlsplit(tag.strip())
    except ValueError:
        return None
    if not parts.path.startswith("/") or not _names_this_server(environ, parts) \
            or _ENCODED_SLASH.search(parts.path):
        return None
    try:
        decoded = unquote_to_bytes(parts.path).decode("utf-8")
        path = util.normalize_path(decoded)
    except (UnicodeDecodeError, DAVError):
        return None
    mount = environ.get("SCRIPT_NAME", "").rstrip("/")
    if mount and path != mount and not path.startswith(mount + "/"):
        return None
    return path[len(mount):] or "/"


# The conditions whose value is a date (RFC 9110 13.1.3, 13.1.4).
_DATE_CONDITIONS = ("HTTP_IF_MODIFIED_SINCE", "HTTP_IF_UNMODIFIED_SINCE")
_ENTITY_TAG = re.compile(r'(?:W/)?"[^"]*"')


def http_date(value: str) -> str | None:
    """A date header's value as an IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT"), or None when it
    is not a date. Read as email.utils reads dates: the three HTTP-date forms and, as RFC 9110
    5.6.7 encourages, other RFC 5322 spellings (a numeric zone, honoured); a field out of range
    (day 32, hour 25, the year 99999) is no date."""
    try:
        when = parsedate_to_datetime(value.strip())
        if when.tzinfo is None:  # asctime-date, or "-0000": both UTC (RFC 9110 5.6.7, RFC 5322 3.3)
            when = when.replace(tzinfo=timezone.utc)
        when = when.astimezone(timezone.utc)
    except (TypeError, ValueError, OverflowError, IndexError):
        return None
    if when.year < 100:
        # (Only a date of the year 100 east of UTC gets here; email.utils reads a year below 100,
        # even written with 4 digits, as 19xx or 20xx, so this one could not be passed on as it is.)
        return None
    return format_datetime(when, usegmt=True)


def normalize_dates(environ: dict[str, Any]) -> None:
    """If-Modified-Since, If-Unmodified-Since and If-Range as WsgiDAV and the store can read them,
    for every method, before the fast paths (dav_provider.app.FastPaths).

    WsgiDAV's util.parse_time_string raises ValueError on a date a datetime cannot hold ("Mon, 01
    Jan 99999 00:00:00 GMT"): a 500 and a traceback for a header a client sent. RFC 9110 13.1.3 and
    13.1.4: a recipient MUST ignore If-Modified-Since / If-Unmodified-Since whose value is not a
    valid HTTP-date, so such a header is dropped here, as is If-Modified-Since on a method other
    than GET and HEAD (13.1.3). A date is passed on as an IMF-fixdate in
    GMT, the one form WsgiDAV (which ignored a numeric zone) and the store's commit (which failed,
    a 500 again, comparing an asctime-date, read without a zone) read alike. If-Range (13.1.5) that is
    neither a date nor an entity-tag WsgiDAV can compare makes the condition false: the whole
    file is sent, as if there were no Range."""
    if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
        # (13.1.3: If-Modified-Since is for GET and HEAD; WsgiDAV answered a PUT carrying a date
        # later than the note's change 304 and stored nothing.)
        environ.pop("HTTP_IF_MODIFIED_SINCE", None)
    for key in _DATE_CONDITIONS:
        value = environ.get(key)
        if value is None:
            continue
        date = http_date(value)
        if date is None:
            del environ[key]
        else:
            environ[key] = date
    if_range = environ.get("HTTP_IF_RANGE")
    if if_range is None:
        return
    if _ENTITY_TAG.fullmatch(if_range.strip()):
        validator = None if _unreadable_by_wsgidav(if_range) else if_range
    else:
        validator = http_date(if_range)
    if validator is None:
        del environ["HTTP_IF_RANGE"]
        environ.pop("HTTP_RANGE", None)
    else:
        environ["HTTP_IF_RANGE"] = validator


def _unreadable_by_wsgidav(value: str) -> bool:
    """WsgiDAV reads If-Range as a date first, even a quoted entity-tag, and fails on some (an
    entity-tag it cannot read is none of ours: the condition is false all the same)."""
    try:
        util.parse_time_string(value)
    except Exception:
        return True
    return False


def drop_overruled_conditions(environ: dict[str, Any]) -> None:
    """RFC 9110 13.2.2: If-Unmodified-Since is evaluated only when there is no If-Match, which
    says more (a write with the version it read and an old date is still that version's write)."""
    if "HTTP_IF_MATCH" in environ:
        environ.pop("HTTP_IF_UNMODIFIED_SINCE", None)


def normalize_range(environ: dict[str, Any], size: int | None) -> None:
    """GET/HEAD Range: keep one satisfiable byte range for WsgiDAV; drop anything else it would
    misread (RFC 9110 14.2 lets a server ignore Range: the client gets the whole file, 200), and
    refuse a suffix of 0 bytes (416) as RFC 9110 14.1.1 says."""
    raw = environ.get("HTTP_RANGE")
    if raw is None:
        return
    unit, sep, specs = raw.partition("=")
    parts = specs.split(",")
    match = _RANGE_SPEC.fullmatch(parts[0]) if len(parts) == 1 else None
    if not sep or unit.strip().lower() != "bytes" or match is None:
        del environ["HTTP_RANGE"]  # another unit, a malformed or a multi-range specifier
        return
    first, last, suffix = match.groups()
    if first is not None and last and int(last) < int(first):
        del environ["HTTP_RANGE"]  # an invalid range-spec: the specifier is ignored
        return
    if suffix is not None and int(suffix) == 0 and size is not None:
        raise DAVError(HTTP_RANGE_NOT_SATISFIABLE, context_info="a range of the last 0 bytes selects nothing",
                       add_headers=[("Content-Range", f"bytes */{size}")])
    environ["HTTP_RANGE"] = "bytes=" + parts[0].strip().replace(" ", "")

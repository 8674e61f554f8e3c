"""Log lines a client cannot forge.

A path, a method, a header or a store sentence quoting what a client sent may hold CR, LF, NUL or
other control characters; written as they are, ``%0a`` in a URL writes a line of the client's
choosing into the log. ``clean`` escapes them the way Python's repr does (``\\n``, ``\\x00``,
``\\u2028``); ``install`` applies it to every argument of every record the process logs, and to the
message itself when it was built before logging (an f-string).
A traceback is ours, not the client's, and keeps its lines.
"""
from __future__ import annotations

import logging
import re
from typing import Any

# C0 and C1 controls, DEL, and the Unicode line and paragraph separators.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(ch) or (
        f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}")


def clean(value: Any) -> str:
    """``value`` as text with every control character escaped: safe inside one log line."""
    text = value if isinstance(value, str) else str(value)
    return _CONTROL.sub(_escape, text)


def _clean_arg(value: Any) -> Any:
    # Numbers keep their type so that %d and %.1f still format them.
    return value if isinstance(value, (int, float)) or value is None else clean(value)


def escape_record(record: logging.LogRecord) -> logging.LogRecord:
    """Escape control characters in a record's message and arguments (not in its traceback)."""
    if record.args:
        if isinstance(record.args, dict):
            record.args = {k: _clean_arg(v) for k, v in record.args.items()}
        else:
            record.args = tuple(_clean_arg(a) for a in record.args)
    if isinstance(record.msg, str):
        record.msg = clean(record.msg)
    return record


_installed = False


def install() -> None:
    """Escape every record this process creates, whichever logger and handler it goes through: a
    record factory rather than a filter, since a filter on a logger misses its children's records
    and a filter on a handler misses handlers added later (pytest's, a deployment's)."""
    global _installed
    if _installed:
        return
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        return escape_record(previous(*args, **kwargs))

    logging.setLogRecordFactory(factory)
    _installed = True

"""The provenance strip under a file: its latest change and a paged History, for every page that
shows one (a note, the task, memory, a script, a record).

It reads the same store functions as /api/file-changes and /api/file-changes/latest, and pages
with their ``before`` cursor, so Older follows the whole change list back to the first change.
"""
from __future__ import annotations

from typing import Any

from flask import request

from store import files
from web.security import principal

HISTORY_PER_PAGE = 20


def _before(param: str) -> int | None:
    """The History cursor in the query string: a change id, or None for the newest page."""
    raw = request.args.get(param, "")
    return int(raw) if raw.isascii() and raw.isdigit() and 0 < len(raw) < 19 else None


def strip(conn: Any, display_path: str, *, param: str = "hbefore") -> dict[str, Any]:
    """The strip: the latest change and one page of History (newest first), from the same store
    functions as /api/file-changes and /api/file-changes/latest. ``param`` is the query parameter
    holding the History's cursor (the change id the page starts below, as the API's ``before``),
    so Older follows the whole list back to the first change; two strips on one page page apart."""
    org_ids = principal().org_ids
    before = _before(param)
    got = files.history(conn, org_ids, display_path, limit=HISTORY_PER_PAGE, before=before)
    rows = got["changes"]
    return {"latest": files.latest(conn, org_ids, [display_path]).get(display_path),
            "history": rows, "before": before,
            "older": rows[-1]["id"] if rows and got["has_more"] else None,
            "open": param in request.args}

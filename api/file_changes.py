"""Provenance routes (members only), restricted to the caller's organisations.

    GET  /api/file-changes?display_path=…[&limit=N][&before=ID]
         {"changes": [...], "has_more": bool, "next": link | null}: one page, newest first; next
         is the URL of the following (older) page, ``before`` the id of this page's last change
    GET  /api/file-changes/latest?display_paths=a,b     {"latest": {path: change | null}}
    POST /api/file-changes/latest  {"display_paths": [...]}   the same, for long lists
"""
from __future__ import annotations

import re
from urllib.parse import quote

from flask import Blueprint, jsonify, request

from api.auth import principal, requires
from api.context import INT64_MAX, db, json_body, number_problem
from store import files
from store.errors import Invalid, rejected

bp = Blueprint("file_changes", __name__)


@bp.get("/api/file-changes")
@requires("user")
def history():  # type: ignore[no-untyped-def]
    path = request.args.get("display_path", "")
    problems = []
    if not path.strip():
        problems.append("display_path: required, such as org/1/agents/2/plan.md")
    limit_text = request.args.get("limit", "100")
    if (problem := number_problem(limit_text, "limit", minimum=1, maximum=files.MAX_HISTORY)) is not None:
        problems.append(problem)
    before_text = request.args.get("before")
    if before_text is not None and number_problem(before_text, "before", minimum=1, maximum=INT64_MAX):
        problems.append("before: a change id (the id of the last change of the previous page) in ASCII digits; "
                        f"got {before_text.strip()!r}")
    if problems:
        raise rejected("file-changes query rejected", problems)
    limit = int(limit_text)
    with db().connection() as conn:
        page = files.history(conn, principal().org_ids, path, limit=limit,
                             before=int(before_text) if before_text is not None else None)
    page["next"] = None
    if page["has_more"]:
        page["next"] = (f"{request.script_root}{request.path}?display_path={quote(path.strip(), safe='/')}"
                        f"&limit={limit}&before={page['changes'][-1]['id']}")
    return jsonify(page)


# Every display path begins "org/" and a key holds no "/", so a comma before "org/" is the only one
# that starts the next path: a note named "a,b.md" is one path, not two. No display path ends in a
# comma (a name ends in .md, .py, digits or a table's name), so commas left over are separators.
_NEXT_PATH = re.compile(r",(?=\s*/?org/)")


def _latest(paths: object, problems: list[str] | None = None):  # type: ignore[no-untyped-def]
    """``problems``: the body's others (its unknown fields), refused together with the paths'."""
    problems = list(problems or [])
    if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and p.strip() for p in paths):
        problems.append("display_paths: send one or more display paths (a comma-separated list, or a JSON "
                        "array in a POST)")
    if len(problems) == 1:
        raise Invalid(problems[0], problems)
    if problems:
        raise rejected("file-changes query rejected", problems)
    with db().connection() as conn:
        result = files.latest(conn, principal().org_ids, paths)
    return jsonify({"latest": result})


@bp.get("/api/file-changes/latest")
@requires("user")
def latest_get():  # type: ignore[no-untyped-def]
    raw = request.args.get("display_paths", "")
    return _latest([p.strip().strip(",").strip() for p in _NEXT_PATH.split(raw) if p.strip().strip(",").strip()])


@bp.post("/api/file-changes/latest")
@requires("user")
def latest_post():  # type: ignore[no-untyped-def]
    body = json_body()
    if not isinstance(body, dict):
        return _latest(None)
    unknown = [f"{k}: unknown field; this route takes display_paths" for k in body if k != "display_paths"]
    return _latest(body.get("display_paths"), unknown)

"""A run's steps: what the provenance strip's Open step opens.

    /runs/<id>      the run (agent, kind, routine, status, when) and every change its tool calls
                    made, oldest first; /runs/<id>#call-<tool_call_id> marks that call's steps

The conversation itself lives in the platform's Chat tab (or Studio's History); Host Finder knows
a run by what it wrote, from the same store function behind the strips (store.files.run_steps).
A run of another organisation answers 404.
"""
from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template
from flask.typing import ResponseReturnValue

from store import files
from web.notes import gone_of, link_of, pages_of
from web.security import db, login_required, principal

bp = Blueprint("runs", __name__)


@bp.get("/runs/<int:run_id>")
@login_required
def run(run_id: int) -> ResponseReturnValue:
    with db().connection() as conn:
        got = files.run_steps(conn, principal().org_ids, run_id)
        paths = [ch["display_path"] for ch in got["changes"]]
        urls = pages_of(conn, paths)
        gone = gone_of(conn, paths, urls)  # a file deleted or moved since is text, not a link to a 404
    steps: list[dict[str, Any]] = [dict(ch, url=link_of(ch["display_path"], urls[ch["display_path"]],
                                                        gone.get(ch["display_path"])),
                                        gone=gone.get(ch["display_path"])) for ch in got["changes"]]
    return render_template("runs/run.html", nav="notes", run=got["run"], steps=steps, more=got["has_more"])

"""A run's steps: what the provenance strip's Open step opens.

    /runs/<id>      the run (agent, kind, routine, status, when) and every change its tool calls
                    made, oldest first; /runs/<id>#call-<tool_call_id> marks that call's steps

The conversation itself lives in the platform's Chat tab (or Studio's History); Host Finder knows
a run by what it wrote, from the same store function behind the strips (store.files.run_steps).
A run of another organisation answers 404.
"""
from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template, url_for
from flask.typing import ResponseReturnValue

from store import files
from store.errors import StoreError
from store.paths import parse
from web.security import db, login_required, principal

bp = Blueprint("runs", __name__)


def page_for(display_path: str) -> str | None:
    """The web app's page for a display path a run changed, or None (a record: its table is found
    by name, which may have been renamed or deleted since)."""
    try:
        target = parse(display_path)
    except StoreError:
        return None
    if target.family == "note":
        return url_for("notes.note", display_path=display_path)
    if target.family in ("task", "memory"):
        return url_for("agents.state", agent_id=target.owner_id) + f"#{target.family}"
    if target.family == "script":
        return url_for("agents.script", agent_id=target.owner_id, name=target.name)
    return None


@bp.get("/runs/<int:run_id>")
@login_required
def run(run_id: int) -> ResponseReturnValue:
    with db().connection() as conn:
        got = files.run_steps(conn, principal().org_ids, run_id)
    steps: list[dict[str, Any]] = [dict(ch, url=page_for(ch["display_path"])) for ch in got["changes"]]
    return render_template("runs/run.html", nav="notes", run=got["run"], steps=steps, more=got["has_more"])

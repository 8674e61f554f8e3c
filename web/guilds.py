"""A guild's page (State): its agents, its Files (the notes browser's guild scope) and its
Databases tab, where the guild's grants on the organisation's tables are edited (the spec's
"a guild's grants ... are edited from their State and Databases tabs").

    /guilds/<id>           the guild's agents, its own tables, and its grant on each organisation table
    /guilds/<id>/access    POST collection_id and mode (read, write, or empty to remove the grant)

All store calls: store.orgs for the guild and its agents, store.collections for the grants (the
same rules as PUT /api/guilds/<id>/collection-access). Another organisation's guild answers 404.
"""
from __future__ import annotations

from flask import Blueprint, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from store import collections as colls
from store import orgs
from store.errors import Invalid
from web.errors import status_of
from web.forms import form_id, left_out, left_out_sentence
from web.security import db, in_view, login_required, principal

bp = Blueprint("guilds", __name__)

DONE = {"access": "Access saved."}


@bp.get("/guilds/<int:guild_id>")
@login_required
def state(guild_id: int, *, error: str | None = None, problems: list[str] | None = None,
          status: int = 200) -> ResponseReturnValue:
    p = principal()
    with db().connection() as conn:
        guild = orgs.guild(conn, p, guild_id)
        in_view(guild["org_id"])
        agents = [a for a in orgs.directory(conn, p, guild["org_id"])["agents"] if a["guild_id"] == guild["id"]]
        tables = colls.guild_access(conn, p, guild["id"])["collections"]
    return render_template("guilds/state.html", nav="notes", guild=guild, agents=agents,
                           own=[t for t in tables if t["scope"] == "guild"],
                           shared=[t for t in tables if t["scope"] == "org"],
                           # (said in the Databases section the redirect opens, not at the page's top)
                           access_done=DONE.get(request.args.get("done", "")), error=error,
                           problems=problems or []), status


@bp.post("/guilds/<int:guild_id>/access")
@login_required
def save_access(guild_id: int) -> ResponseReturnValue:
    if left_out("mode"):
        # (A mode left out is no wish to remove the grant: a browser always sends the select.)
        msg = left_out_sentence(["mode"], "Send mode as read, write, or empty for no access.")
        return state(guild_id, error=msg, problems=["mode: missing from the form"], status=400)
    try:
        body = {"collection_id": form_id("collection_id"), "mode": request.form["mode"] or None}
        colls.set_guild_access(db(), principal(), guild_id, body)
    except Invalid as exc:
        return state(guild_id, error=exc.head, problems=exc.problems, status=status_of(exc))
    return redirect(url_for("guilds.state", guild_id=guild_id, done="access") + "#databases")

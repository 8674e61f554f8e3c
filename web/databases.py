"""The Databases page: the organisation's tables by owner, a table's records, a record's form, the
columns editor and who reaches a table. Every view is one or a few store calls; every rule is the
store's (store.collections, store.records), so the page and /api/ can never disagree."""
from __future__ import annotations

from typing import Any

from flask import Blueprint, render_template
from flask.typing import ResponseReturnValue

from store import collections as colls
from store import orgs
from web.security import db, login_required, principal, session

bp = Blueprint("databases", __name__)


def _by_owner(tables: list[dict[str, Any]], guilds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The organisation's tables first, then each guild's (guilds without tables too, so an
    operator sees where a table could go)."""
    groups = [{"title": "Organisation", "guild_id": None, "tables": [t for t in tables if t["guild_id"] is None]}]
    for g in guilds:
        groups.append({"title": g["name"], "guild_id": g["id"],
                       "tables": [t for t in tables if t["guild_id"] == g["id"]]})
    return groups


@bp.get("/databases")
@login_required
def index() -> ResponseReturnValue:
    org_id = session().org_id
    with db().connection() as conn:
        tables = colls.list_collections(conn, principal(), org_id)
        directory = orgs.directory(conn, principal(), org_id)
    return render_template("databases/index.html", nav="databases", groups=_by_owner(tables, directory["guilds"]),
                           total=len(tables))

"""The Databases page's collection and access routes: HTTP in, one store call, JSON out.

Every route is for organisation members acting as the operator; ids of another organisation answer
404 exactly like ids that do not exist (the store checks the principal's organisations).
"""
from __future__ import annotations

import json
from typing import Any

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue

from api.auth import principal, requires
from api.context import INT64_MAX, db, json_body, number
from store import collections as store
from store.access import Principal
from store.errors import Invalid

bp = Blueprint("collections", __name__)


def _org_id(p: Principal, body: dict[str, Any] | None = None) -> int:
    """The organisation a list or a create is for: org_id from the query or body, or the member's
    only organisation when it has exactly one."""
    in_body = body is not None and "org_id" in body
    raw: Any = body["org_id"] if in_body else request.args.get("org_id")  # type: ignore[index]
    if raw is None:
        if len(p.org_ids) == 1:
            return next(iter(p.org_ids))
        msg = "you belong to several organisations; send org_id to say which one"
        raise Invalid(msg, [msg])
    if in_body:
        # A JSON integer only: int() would take 1.9 and true as organisation 1.
        if not isinstance(raw, int) or isinstance(raw, bool) or not 1 <= raw <= INT64_MAX:
            msg = f"org_id must be an organisation's id, a JSON integer such as 1; got {json.dumps(raw)}"
            raise Invalid(msg, [msg])
        org_id = raw
    else:
        org_id = number(raw, "org_id", minimum=1, maximum=INT64_MAX)  # type: ignore[assignment]
        if org_id is None:
            msg = "org_id is empty; send an organisation's id, such as org_id=1"
            raise Invalid(msg, [msg])
    p.require_org(org_id)
    return org_id


def _object_body() -> dict[str, Any]:
    body = json_body()
    if not isinstance(body, dict):
        raise Invalid("the request body must be a JSON object", ["body: expected a JSON object"])
    return body


def _with_etag(described: dict[str, Any]) -> ResponseReturnValue:
    """The collection with its ETag, which a columns editor sends back as If-Match on PATCH."""
    resp = jsonify(described)
    resp.headers["ETag"] = described["etag"]
    return resp


@bp.get("/api/collections")
@requires("user")
def list_collections() -> ResponseReturnValue:
    """Every live collection of the organisation with its record count."""
    p = principal()
    with db().connection() as conn:
        return jsonify({"collections": store.list_collections(conn, p, _org_id(p))})


@bp.post("/api/collections")
@requires("user")
def create_collection() -> ResponseReturnValue:
    """{name, purpose, columns, guild_id?} -> the new collection (201)."""
    p = principal()
    body = _object_body()
    org_id = _org_id(p, body)
    c = store.create_collection(db(), p, org_id, {k: v for k, v in body.items() if k != "org_id"})
    return jsonify({**store.collection_json(c, count=0)}), 201


@bp.get("/api/collections/<int:collection_id>")
@requires("user")
def get_collection(collection_id: int) -> ResponseReturnValue:
    """The collection, its count and access_list (guilds, agents)."""
    with db().connection() as conn:
        return _with_etag(store.describe_collection(conn, principal(), collection_id))


@bp.patch("/api/collections/<int:collection_id>")
@requires("user")
def alter_collection(collection_id: int) -> ResponseReturnValue:
    """{name?, purpose?, columns?, guild_id?}; a renamed column carries rename_from. A new name while
    a live task embeds the table is 409 (the store's Embedded, naming each task)."""
    p = principal()
    store.alter_collection(db(), p, collection_id, _object_body(), if_match=request.headers.get("If-Match"))
    with db().connection() as conn:
        return _with_etag(store.describe_collection(conn, p, collection_id))


@bp.delete("/api/collections/<int:collection_id>")
@requires("user")
def delete_collection(collection_id: int) -> ResponseReturnValue:
    """Soft-delete the table and its records; its grants go. 409 while a live task embeds it."""
    return jsonify(store.delete_collection(db(), principal(), collection_id))


@bp.get("/api/guilds/<int:guild_id>/collection-access")
@requires("user")
def guild_access(guild_id: int) -> ResponseReturnValue:
    """The guild's own tables (write) and every organisation table with the guild's grant."""
    with db().connection() as conn:
        return jsonify(store.guild_access(conn, principal(), guild_id))


@bp.put("/api/guilds/<int:guild_id>/collection-access")
@requires("user")
def set_guild_access(guild_id: int) -> ResponseReturnValue:
    """{collection_id, mode}: read or write; null removes the guild's grant."""
    return jsonify(store.set_guild_access(db(), principal(), guild_id, json_body()))


@bp.get("/api/agents/<int:agent_id>/collection-access")
@requires("user")
def agent_access(agent_id: int) -> ResponseReturnValue:
    """Each reachable table with the guild's grant, the agent's row and the effective mode."""
    with db().connection() as conn:
        return jsonify(store.agent_access(conn, principal(), agent_id))


@bp.put("/api/agents/<int:agent_id>/collection-access")
@requires("user")
def set_agent_access(agent_id: int) -> ResponseReturnValue:
    """{collection_id, mode}: read, write or none; null removes the agent's row."""
    return jsonify(store.set_agent_access(db(), principal(), agent_id, json_body()))

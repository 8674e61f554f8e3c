"""The operator's task routes and State.

    GET  /api/agents/<id>/task             the standing task {display_path, task, version, updated_at, updated_by}
    PUT  /api/agents/<id>/task             body {"task": "..."} or the Markdown itself (text/markdown);
                                           optional If-Match: <version> refuses a stale save with 412
    GET  /api/agents/<id>/task/revisions   previous saves, newest first (at most 50)
    GET  /api/agents/<id>/state            State: the task with embeds expanded, memory, note grants,
                                           granted collections (members and the service token)

Task routes are for members; every route answers 404 for an agent of another organisation.
"""
from __future__ import annotations

from flask import Blueprint, jsonify, request

from api.auth import principal, requires
from api.context import db, if_match_version, json_body
from api.errors import Malformed
from store import state, tasks
from store.agents import load_agent

bp = Blueprint("agents", __name__)


def _task_text() -> str:
    mimetype = request.mimetype or ""
    if mimetype.startswith("text/"):
        raw = request.get_data(cache=True)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            # Bytes no route can read: 400, as a JSON body that is not UTF-8 is, and as WebDAV's
            # task.md answers the same bytes.
            msg = (f"the task is not UTF-8 text (byte {exc.start} is not valid UTF-8); the task is Markdown: "
                   "send it as UTF-8")
            raise Malformed(msg, [f"body: {msg}"]) from None
    return tasks.text_of(json_body())


@bp.get("/api/agents/<int:agent_id>/task")
@requires("user")
def get_task(agent_id: int):  # type: ignore[no-untyped-def]
    with db().connection() as conn:
        agent = load_agent(conn, agent_id, principal().org_ids)
        return jsonify(tasks.read_task(conn, agent.org_id, agent.id))


@bp.put("/api/agents/<int:agent_id>/task")
@requires("user")
def put_task(agent_id: int):  # type: ignore[no-untyped-def]
    text, if_version = _task_text(), if_match_version("the task")
    return jsonify(tasks.save_as_member(db(), principal(), agent_id, text, if_version=if_version))


@bp.get("/api/agents/<int:agent_id>/task/revisions")
@requires("user")
def get_task_revisions(agent_id: int):  # type: ignore[no-untyped-def]
    with db().connection() as conn:
        agent = load_agent(conn, agent_id, principal().org_ids)
        return jsonify({"revisions": tasks.task_revisions(conn, agent.org_id, agent.id)})


@bp.get("/api/agents/<int:agent_id>/state")
@requires("user", "service")
def get_state(agent_id: int):  # type: ignore[no-untyped-def]
    with db().connection() as conn:
        agent = load_agent(conn, agent_id, principal().org_ids)
        return jsonify(state.get_state(conn, agent))

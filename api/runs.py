"""The orchestrator's runs: open one for an agent and move it through its statuses, so that the
changes its tool calls make are run-owned in provenance (X-Run-Id on the tool route)."""
from __future__ import annotations

from flask import Blueprint, jsonify

from api.auth import principal, requires
from api.context import db, json_body
from store import admin
from store.errors import Invalid

bp = Blueprint("runs", __name__)

_CREATE_FIELDS = ("agent_id", "kind", "status", "routine")


@bp.post("/api/runs")
@requires("service")
def create_run():  # type: ignore[no-untyped-def]
    """{agent_id, kind, status?, routine?} -> the run, 201."""
    body = _object(json_body(), _CREATE_FIELDS)
    agent_id = body.get("agent_id")
    if not isinstance(agent_id, int) or isinstance(agent_id, bool) or agent_id < 1:
        raise Invalid("agent_id must be the id of one of your organisation's agents", ["agent_id: expected an id"])
    run = admin.create_run(db(), agent_id=agent_id, kind=body.get("kind"), status=body.get("status", "running"),
                           routine=body.get("routine"), within=principal().org_ids)
    return jsonify(run), 201


@bp.patch("/api/runs/<int:run_id>")
@requires("service")
def set_run(run_id: int):  # type: ignore[no-untyped-def]
    """{status} -> the run."""
    body = _object(json_body(), ("status",))
    return jsonify(admin.set_run(db(), run_id, status=body.get("status"), within=principal().org_ids))


def _object(body: object, fields: tuple[str, ...]) -> dict:
    if not isinstance(body, dict):
        raise Invalid(f"the body must be a JSON object with {', '.join(fields)}", ["body: expected a JSON object"])
    unknown = [k for k in body if k not in fields]
    if unknown:
        problems = [f"{k}: unknown field; a run takes {', '.join(fields)}" for k in unknown]
        raise Invalid("run rejected\n" + "\n".join(f"- {p}" for p in problems), problems)
    return body

"""The orchestrator's runs: open one for an agent and move it through its statuses, so that the
changes its tool calls make are run-owned in provenance (X-Run-Id on the tool route)."""
from __future__ import annotations

from flask import Blueprint, jsonify

from api.auth import principal, requires
from api.context import db, json_body
from store import admin
from store.errors import Invalid
from store.values import shown

bp = Blueprint("runs", __name__)

_CREATE_FIELDS = ("agent_id", "kind", "status", "routine")


@bp.post("/api/runs")
@requires("service")
def create_run():  # type: ignore[no-untyped-def]
    """{agent_id, kind, status?, routine?} -> the run, 201."""
    body = _object(json_body(), _CREATE_FIELDS)
    agent_id = body.get("agent_id")
    # Every problem of the body at once: its unknown fields, the agent and the run's own fields.
    problems = _unknown(body, _CREATE_FIELDS)
    if not isinstance(agent_id, int) or isinstance(agent_id, bool) or agent_id < 1:
        problems.append(f"agent_id: expected the id of one of your organisation's agents; got {shown(agent_id)}")
    problems += admin.run_problems(kind=body.get("kind"), status=body.get("status", "running"),
                                   routine=body.get("routine"))
    if problems:
        raise admin.run_rejected(problems)
    run = admin.create_run(db(), agent_id=agent_id, kind=body.get("kind"), status=body.get("status", "running"),
                           routine=body.get("routine"), within=principal().org_ids)
    return jsonify(run), 201


@bp.patch("/api/runs/<int:run_id>")
@requires("service")
def set_run(run_id: int):  # type: ignore[no-untyped-def]
    """{status} -> the run."""
    body = _object(json_body(), ("status",))
    if problems := _unknown(body, ("status",)) + admin.run_problems(status=body.get("status")):
        raise admin.run_rejected(problems)
    return jsonify(admin.set_run(db(), run_id, status=body.get("status"), within=principal().org_ids))


def _object(body: object, fields: tuple[str, ...]) -> dict:
    if not isinstance(body, dict):
        raise Invalid(f"the body must be a JSON object with {', '.join(fields)}", ["body: expected a JSON object"])
    return body


def _unknown(body: dict, fields: tuple[str, ...]) -> list[str]:
    return [f"{k}: unknown field; a run takes {', '.join(fields)}" for k in body if k not in fields]

"""POST /api/agents/<agent_id>/tools/<tool>: the agent tool route, for the orchestrator.

The body is the tool's arguments; X-Run-Id and X-Tool-Call-Id make the change run-owned."""
from __future__ import annotations

from flask import Blueprint, jsonify, request

from api.auth import principal, requires
from api.context import db, header_int, json_body
from store import tools

bp = Blueprint("tools", __name__)


@bp.post("/api/agents/<int:agent_id>/tools/<tool>")
@requires("service")
def call_tool(agent_id: int, tool: str):  # type: ignore[no-untyped-def]
    """Run one agent tool; the answer is the tool's result, or an error with its problems."""
    result = tools.call(db(), principal(), agent_id, tool, json_body(required=False),
                        run_id=header_int("X-Run-Id"),
                        tool_call_id=request.headers.get("X-Tool-Call-Id") or None)
    return jsonify(result)

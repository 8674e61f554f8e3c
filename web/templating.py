"""What every template can use: the session, its CSRF token, the navigation, and value formats."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import Flask, g
from markupsafe import Markup, escape

from web.forms import problem_ids
from web.security import CSRF_FIELD


def when(value: Any) -> str:
    """A timestamp as operators read it: UTC, to the second."""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S UTC")
    if isinstance(value, str) and "T" in value:
        return value.replace("T", " ")[:19] + " UTC"
    return "" if value is None else str(value)


def cell(value: Any, column: dict[str, Any]) -> Markup:
    """A record's value in a grid cell, shown by its column's type. Plain Python rather than a
    template macro: a page draws hundreds of cells, and a macro call costs ten times as much."""
    if value is None:
        return Markup('<span class="null">—</span>')
    kind = column.get("type")
    if kind == "boolean":
        return Markup('<span class="bool-true">Yes</span>' if value is True else '<span class="bool-false">No</span>')
    if kind == "array" and isinstance(value, list):
        return Markup(" ").join(Markup('<span class="tag">%s</span>') % item for item in value)
    if kind == "datetime" and isinstance(value, str):
        return Markup('<span class="mono">%s</span>') % value.replace("T", " ").removesuffix("Z")
    if kind == "text" and column.get("values"):
        return Markup('<span class="tag">%s</span>') % value
    return escape(value)


def register(app: Flask) -> None:
    app.jinja_env.filters["when"] = when
    app.jinja_env.filters["cell"] = cell
    app.jinja_env.globals["problem_ids"] = problem_ids

    @app.context_processor
    def _globals() -> dict[str, Any]:
        ws = g.get("web_session")
        return {"web_session": ws, "csrf_field": CSRF_FIELD, "csrf_token": ws.csrf_token if ws else "",
                "current_org": dict(ws.orgs).get(ws.org_id) if ws else None}

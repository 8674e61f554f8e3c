"""What every template can use: the session, its CSRF token, the navigation, and value formats."""
from __future__ import annotations

from datetime import datetime
from typing import Any

from flask import Flask, g

from web.security import CSRF_FIELD


def when(value: Any) -> str:
    """A timestamp as operators read it: UTC, to the second."""
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S UTC")
    if isinstance(value, str) and "T" in value:
        return value.replace("T", " ")[:19] + " UTC"
    return "" if value is None else str(value)


def register(app: Flask) -> None:
    app.jinja_env.filters["when"] = when

    @app.context_processor
    def _globals() -> dict[str, Any]:
        ws = g.get("web_session")
        return {"web_session": ws, "csrf_field": CSRF_FIELD, "csrf_token": ws.csrf_token if ws else "",
                "current_org": dict(ws.orgs).get(ws.org_id) if ws else None}

"""The HTTP API (Flask): the Databases page's routes, file changes, State and the agent tool route.
It translates HTTP to store calls and store errors back to HTTP; no rule lives here."""
from __future__ import annotations

from api.app import create_app

__all__ = ["create_app"]

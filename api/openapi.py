"""(to be written)"""
from __future__ import annotations

from flask import Blueprint

bp = Blueprint("openapi", __name__)

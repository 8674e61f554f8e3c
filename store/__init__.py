"""The artifact store: notes, memory, task, scripts, collections and records over PostgreSQL.

Plain Python over psycopg 3; knows nothing of HTTP, WebDAV or FUSE. Front ends call it with an
explicit caller and translate its errors (store.errors) into their protocol.
"""
from __future__ import annotations

from store.db import Database
from store.errors import StoreError

__all__ = ["Database", "StoreError"]

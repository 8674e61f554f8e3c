"""HostDAVProvider: resolves a request path to a resource over the Host tree.
(Foundation stub: an empty, authenticated root; the tree arrives with the WebDAV issue.)"""
from __future__ import annotations

from typing import Any

from wsgidav.dav_provider import DAVCollection, DAVProvider

from store.db import Database


class _EmptyRoot(DAVCollection):
    def get_member_names(self) -> list[str]:
        return []


class HostDAVProvider(DAVProvider):
    def __init__(self, db: Database) -> None:
        super().__init__()
        self.db = db

    def get_resource_inst(self, path: str, environ: dict[str, Any]) -> DAVCollection | None:
        if path in ("", "/"):
            return _EmptyRoot("/", environ)
        return None

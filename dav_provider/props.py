"""WsgiDAV's PropertyManager interface over store.properties (dead properties in PostgreSQL).

A PROPFIND allprop asks for the dead properties of every member of a folder; the first ask in a
request loads the whole folder's properties in one query and keeps them in the request's environ.
Which paths take properties, whose they are (a side file's are its user's, as the file is) and
the caps are store.properties' rules: each call names the request's user. A refusal becomes the
DAV status of dav_provider.errors (in a PROPPATCH, that property's status in the multistatus)."""
from __future__ import annotations

from typing import Any

from store import properties
from store.access import PRINCIPAL_KEY
from store.db import Database
from store.paths import parent_of

from dav_provider.locks import tree_path
from dav_provider.resources import store_call

_CACHE = "hostfinder.props"
_PENDING = "hostfinder.props.pending"


def _user(environ: dict[str, Any] | None) -> int | None:
    """The request's user (the domain controller's principal): whose side files' properties
    these are. None without one, which sees and sets no side file's."""
    principal = (environ or {}).get(PRINCIPAL_KEY)
    user_id = getattr(principal, "user_id", None)
    return int(user_id) if user_id else None


class PgPropertyManager:
    def __init__(self, db: Database) -> None:
        self.db = db

    def __repr__(self) -> str:
        return "PgPropertyManager"

    def _props(self, norm_url: str, environ: dict[str, Any] | None) -> dict[str, str]:
        path = tree_path(norm_url)
        if not properties.takes_properties(path):
            return {}  # the shared layout: whatever is there was never this organisation's
        cache: dict[str, dict[str, dict[str, str]]] | None = environ.setdefault(_CACHE, {}) if environ is not None else None
        folder = parent_of(path)
        if cache is not None and folder in cache:
            return cache[folder].get(path, {})
        with self.db.connection() as conn:
            loaded = properties.get_children(conn, folder, user_id=_user(environ))
        if cache is not None:
            cache[folder] = loaded
        return loaded.get(path, {})

    def _forget(self, environ: dict[str, Any] | None) -> None:
        if environ is not None:
            environ.pop(_CACHE, None)

    def get_properties(self, norm_url: str, environ: dict[str, Any] | None = None) -> list[str]:
        return list(self._props(norm_url, environ))

    def get_property(self, norm_url: str, name: str, environ: dict[str, Any] | None = None) -> str | None:
        return self._props(norm_url, environ).get(name)

    def write_property(self, norm_url: str, name: str, property_value: Any, dry_run: bool = False,
                       environ: dict[str, Any] | None = None) -> None:
        value = property_value.decode("utf-8") if isinstance(property_value, bytes) else str(property_value)
        path = tree_path(norm_url)
        if dry_run:
            # WsgiDAV checks every property of a PROPPATCH before writing any: count the names this
            # request adds so far, so that the caps refuse the request as a whole or not at all.
            pending = environ.setdefault(_PENDING, {}).setdefault(path, set()) if environ is not None else set()
            with self.db.connection() as conn:
                store_call(properties.check_set, conn, path, name, value, user_id=_user(environ), pending=pending)
            pending.add(name)
            return
        with self.db.transaction() as conn:
            store_call(properties.set, conn, path, name, value, user_id=_user(environ))
        self._forget(environ)

    def remove_property(self, norm_url: str, name: str, dry_run: bool = False,
                        environ: dict[str, Any] | None = None) -> None:
        path = tree_path(norm_url)
        store_call(properties.check_path, path)
        if dry_run:
            return
        with self.db.transaction() as conn:
            properties.remove(conn, path, name, user_id=_user(environ))
        self._forget(environ)

    def remove_properties(self, norm_url: str, environ: dict[str, Any] | None = None) -> None:
        with self.db.transaction() as conn:
            properties.clear(conn, tree_path(norm_url), user_id=_user(environ))
        self._forget(environ)

    def copy_properties(self, src_url: str, dest_url: str, environ: dict[str, Any] | None = None) -> None:
        with self.db.transaction() as conn:
            properties.copy(conn, tree_path(src_url), tree_path(dest_url), user_id=_user(environ))
        self._forget(environ)

    def move_properties(self, src_url: str, dest_url: str, with_children: bool,
                        environ: dict[str, Any] | None = None) -> None:
        with self.db.transaction() as conn:
            properties.move(conn, tree_path(src_url), tree_path(dest_url), user_id=_user(environ))
        self._forget(environ)

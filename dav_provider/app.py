"""Builds the WsgiDAV application for /dav/ over the store."""
from __future__ import annotations

from typing import Any

from wsgidav.wsgidav_app import WsgiDAVApp

from dav_provider.auth import StoreDomainController
from dav_provider.locks import HostLockManager, PgLockStorage
from dav_provider.props import PgPropertyManager
from dav_provider.provider import HostDAVProvider
from store.access import Door
from store.db import Database
from store.filecache import FileCache

MOUNT_PATH = "/dav"


def build_dav_app(db: Database, door: Door, *, cache: FileCache | None = None) -> WsgiDAVApp:
    config: dict[str, Any] = {
        "mount_path": MOUNT_PATH,
        "provider_mapping": {"/": HostDAVProvider(db, cache=cache)},
        "http_authenticator": {
            "domain_controller": StoreDomainController,
            "accept_basic": True,
            "accept_digest": False,
            "default_to_digest": False,
        },
        "hostfinder": {"door": door},
        "verbose": 1,
        "logging": {"enable": False, "enable_loggers": []},
        # The gateway writes its own access log line per request.
        "dir_browser": {"enable": True, "response_trailer": "Host Finder"},
        # Locks and dead properties in PostgreSQL, so that several gateway processes share them.
        "lock_storage": PgLockStorage(db),
        "property_manager": PgPropertyManager(db),
    }
    app = WsgiDAVApp(config)
    # WsgiDAV builds its own LockManager over the storage; ours adds RFC 4918's shared-lock rule.
    manager = HostLockManager(app.lock_manager.storage)
    app.lock_manager = manager
    for provider in app.provider_map.values():
        provider.set_lock_manager(manager)
    return app

"""The demo organisation created on an empty store, so a first run shows something."""
from __future__ import annotations

import logging
import os
import secrets
from typing import Any

from gateway.config import Config
from store import admin
from store.db import Database

log = logging.getLogger(__name__)

DEMO_EMAIL = "demo@hostfinder.local"


def ensure_demo(db: Database, config: Config) -> dict[str, Any] | None:
    """Create the demo organisation when the store has no organisation; return its login (the
    password is printed once and kept beside the embedded data, mode 0600)."""
    with db.connection() as conn:
        if conn.execute("SELECT 1 FROM organisations LIMIT 1").fetchone():
            return _remembered_login(config)
    password = secrets.token_urlsafe(9)
    seed(db, password)
    login = {"email": DEMO_EMAIL, "password": password}
    if not config.database_url:
        path = config.data_dir / "demo-login.txt"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"{DEMO_EMAIL} {password}\n")
    return login


def _remembered_login(config: Config) -> dict[str, Any] | None:
    path = config.data_dir / "demo-login.txt"
    if config.database_url or not path.is_file():
        return None
    email, _, password = path.read_text().strip().partition(" ")
    return {"email": email, "password": password}


def seed(db: Database, password: str) -> dict[str, Any]:
    org = admin.create_org(db, name="Demo Organisation")
    guild = admin.create_guild(db, org_id=org["id"], name="Research")
    scout = admin.create_agent(db, org_id=org["id"], guild_id=guild["id"], name="Scout",
                               task="Find new leads every morning and record them in the leads table.")
    admin.create_agent(db, org_id=org["id"], guild_id=guild["id"], name="Curator",
                       task="Keep the organisation's notes tidy.", write_org=True)
    admin.create_user(db, email=DEMO_EMAIL, password=password, name="Demo operator")
    admin.add_member(db, org_id=org["id"], email=DEMO_EMAIL)
    return {"org_id": org["id"], "guild_id": guild["id"], "agent_id": scout["id"]}

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
DEMO_LOGIN_FILE = "demo-login.txt"   # in the data directory: "EMAIL PASSWORD", mode 0600


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
        path = config.data_dir / DEMO_LOGIN_FILE
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(f"{DEMO_EMAIL} {password}\n")
    return login


def _remembered_login(config: Config) -> dict[str, Any] | None:
    path = config.data_dir / DEMO_LOGIN_FILE
    if config.database_url or not path.is_file():
        return None
    email, _, password = path.read_text().strip().partition(" ")
    return {"email": email, "password": password}


def seed(db: Database, password: str) -> dict[str, Any]:
    """A small organisation that shows every part of the tree: notes at each level, two agents with
    tasks (one embedding a guild note), a memory, a script, and a collection with a dozen records."""
    from store import collections, memory, notes, records, scripts, tasks
    from store.access import Actor, Principal

    org = admin.create_org(db, name="Demo Organisation")
    o = org["id"]
    guild = admin.create_guild(db, org_id=o, name="Research")
    g = guild["id"]
    scout = admin.create_agent(db, org_id=o, guild_id=g, name="Scout")
    curator = admin.create_agent(db, org_id=o, guild_id=g, name="Curator", write_org=True)
    user = admin.create_user(db, email=DEMO_EMAIL, password=password, name="Demo operator")
    admin.add_member(db, org_id=o, email=DEMO_EMAIL)
    operator = Actor("user", user["id"], DEMO_EMAIL)
    principal = Principal("user", user["id"], DEMO_EMAIL, frozenset({o}))

    with db.transaction() as conn:
        notes.write_note(conn, o, "org", None, "welcome.md", _WELCOME, operator)
        notes.write_note(conn, o, "org", None, "style-guide.md",
                         "# House style\n\n- Short sentences.\n- Dates as 2026-11-29.\n", operator)
        notes.write_note(conn, o, "guild", g, "playbook.md", _PLAYBOOK, operator)
        notes.write_note(conn, o, "guild", g, "sources.md",
                         "# Sources we trust\n\n- Company registers\n- Conference speaker lists\n", operator)
        notes.write_note(conn, o, "agent", scout["id"], "findings.md",
                         "# Findings\n\nLeads from the fintech conference reply faster on Tuesdays.\n",
                         Actor("agent", scout["id"], "Scout"))
        tasks.write_task(conn, o, scout["id"],
                         f"Find new leads every morning and record them in the leads table.\n\n"
                         f"Follow the playbook:\n\n![[org/{o}/guilds/{g}/playbook.md]]\n\n"
                         f"Record leads in ![[org/{o}/collections/leads]].\n", operator)
        tasks.write_task(conn, o, curator["id"],
                         "Keep the organisation's notes tidy: merge duplicates, keep `welcome.md` current.\n",
                         operator)
        memory.write_memory(conn, o, scout["id"],
                            "- The leads table's email column is unique: adding a known email merges.\n",
                            Actor("agent", scout["id"], "Scout"), source="agent")
        scripts.write_script(conn, o, scout["id"], "score_leads.py", _SCRIPT, operator)

    leads = collections.create_collection(db, principal, o, {
        "name": "leads", "purpose": "Sales leads found by the research guild, one per email address.",
        "guild_id": g,
        "columns": [
            {"name": "email", "type": "text", "description": "The lead's email address", "required": True,
             "unique": True},
            {"name": "company", "type": "text", "description": "Where the lead works"},
            {"name": "status", "type": "text", "description": "Where the lead is in the pipeline",
             "values": ["new", "contacted", "won", "lost"], "required": True},
            {"name": "score", "type": "number", "description": "0 to 100, higher is warmer"},
            {"name": "tags", "type": "array", "description": "Free tags"},
            {"name": "signed_up_at", "type": "datetime", "description": "When they signed up"},
        ]})
    with db.transaction() as conn:
        for i, (company, status, score) in enumerate(_LEADS, start=1):
            records.record_add(conn, leads, {
                "email": f"lead{i}@{company.lower().replace(' ', '')}.example", "company": company,
                "status": status, "score": score, "tags": ["fintech"] if i % 3 else ["retail", "emea"],
                "signed_up_at": f"2026-11-{i:02d}T09:30:00Z"}, Actor("agent", scout["id"], "Scout"))
    return {"org_id": o, "guild_id": g, "agent_id": scout["id"]}


_WELCOME = """# Welcome to Host Finder

This folder is your organisation's knowledge, as files. Everything here is stored in PostgreSQL;
edit it in any editor and save: the agents see the new version on their next run.

- Organisation notes sit here, guild notes under `guilds/`, each agent's under `agents/`.
- `agents/<id>/task.md` is an agent's standing task; `memory.md` its memory.
- `collections/` shows the typed tables, read-only (change them on the Databases page).
"""

_PLAYBOOK = """# Lead research playbook

1. Start from the sources in `sources.md`.
2. One record per email address in the leads table.
3. Mark a lead `contacted` only after a reply.
"""

_SCRIPT = '''"""Score leads by how recently they signed up."""


def score(days_since_signup: int) -> int:
    return max(0, 100 - 3 * days_since_signup)
'''

_LEADS = [("Acme", "new", 72), ("Globex", "contacted", 55), ("Initech", "won", 90), ("Umbrella", "lost", 10),
          ("Hooli", "new", 64), ("Stark Industries", "contacted", 81), ("Wayne Enterprises", "new", 47),
          ("Wonka", "won", 95), ("Soylent", "new", 33), ("Tyrell", "contacted", 58), ("Cyberdyne", "new", 70),
          ("Aperture", "lost", 22)]

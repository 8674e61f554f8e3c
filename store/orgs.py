"""An organisation's guilds and agents by name: what operator pages show as owners and grantees."""
from __future__ import annotations

from typing import Any

from store.access import Principal
from store.db import Conn
from store.errors import NotFound
from store.paths import is_id


def directory(conn: Conn, principal: Principal, org_id: int) -> dict[str, list[dict[str, Any]]]:
    """{guilds: [{id, name}], agents: [{id, name, guild_id}]} of ``org_id``, by name; NotFound for
    an organisation the principal is not in."""
    principal.require_org(org_id)
    guilds = conn.execute("SELECT id, name FROM guilds WHERE org_id = %s ORDER BY name, id", (org_id,)).fetchall()
    agents = conn.execute("SELECT id, name, guild_id FROM agents WHERE org_id = %s ORDER BY name, id",
                          (org_id,)).fetchall()
    return {"guilds": guilds, "agents": agents}


def guild(conn: Conn, principal: Principal, guild_id: object) -> dict[str, Any]:
    """{id, org_id, name} of a guild of the principal's organisations; NotFound for any other id
    (another organisation's reads the same as none)."""
    row = (conn.execute("SELECT id, org_id, name FROM guilds WHERE id = %s", (guild_id,)).fetchone()
           if is_id(guild_id) else None)
    if row is None or row["org_id"] not in principal.org_ids:
        raise NotFound(f"unknown guild {guild_id}")
    return row

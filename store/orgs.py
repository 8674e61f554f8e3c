"""An organisation's guilds and agents by name: what operator pages show as owners and grantees."""
from __future__ import annotations

from typing import Any

from store.access import Principal
from store.db import Conn


def directory(conn: Conn, principal: Principal, org_id: int) -> dict[str, list[dict[str, Any]]]:
    """{guilds: [{id, name}], agents: [{id, name, guild_id}]} of ``org_id``, by name; NotFound for
    an organisation the principal is not in."""
    principal.require_org(org_id)
    guilds = conn.execute("SELECT id, name FROM guilds WHERE org_id = %s ORDER BY name, id", (org_id,)).fetchall()
    agents = conn.execute("SELECT id, name, guild_id FROM agents WHERE org_id = %s ORDER BY name, id",
                          (org_id,)).fetchall()
    return {"guilds": guilds, "agents": agents}

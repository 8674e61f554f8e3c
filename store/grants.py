"""Collection access for agents: effective = agent row ?? guild base; write implies read.

A guild's own table (guild_id set) gives every agent of that guild write as its base and is out of
reach for every other guild. An agent row overrides the base, 'none' being the explicit refusal.
This module answers "what may this agent do with that collection" in one query, for the record
tools and for State; the operator routes that edit grants live in store.collections."""
from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from store.agents import Agent
from store.db import Conn
from store.errors import Forbidden, NotFound
from store.paths import collection_path

Mode = Literal["read", "write"]


@dataclass(frozen=True)
class Collection:
    id: int
    org_id: int
    guild_id: int | None
    name: str
    purpose: str
    columns: list[dict[str, Any]] = field(default_factory=list)
    next_id: int = 1
    created_at: datetime | None = None
    updated_at: datetime | None = None

    @property
    def scope(self) -> Literal["guild", "org"]:
        return "guild" if self.guild_id is not None else "org"

    @property
    def display_path(self) -> str:
        return collection_path(self.org_id, self.name)

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Collection:
        return cls(**{k: row[k] for k in ("id", "org_id", "guild_id", "name", "purpose", "columns",
                                          "next_id", "created_at", "updated_at")})


COLLECTION_COLUMNS = "c.id, c.org_id, c.guild_id, c.name, c.purpose, c.columns, c.next_id, c.created_at, c.updated_at"

# The effective mode of agent %(agent)s (of guild %(guild)s) on each live collection c of its
# organisation; null means no access. Joined once per query, never per collection.
_ACCESS_SQL = f"""
SELECT {COLLECTION_COLUMNS},
       CASE WHEN aa.mode IS NOT NULL THEN nullif(aa.mode, 'none')
            WHEN c.guild_id IS NOT NULL THEN 'write'
            ELSE ga.mode END AS access
  FROM artifact_collections c
  LEFT JOIN collection_access aa ON aa.collection_id = c.id AND aa.agent_id = %(agent)s
  LEFT JOIN collection_access ga ON ga.collection_id = c.id AND ga.guild_id = %(guild)s
 WHERE c.org_id = %(org)s AND c.deleted_at IS NULL
   AND (c.guild_id IS NULL OR c.guild_id = %(guild)s)
"""


def _params(agent: Agent) -> dict[str, int]:
    return {"agent": agent.id, "guild": agent.guild_id, "org": agent.org_id}


def granted_collections(conn: Conn, agent: Agent) -> list[tuple[Collection, Mode]]:
    """Every live collection the agent can read, with its mode, by name."""
    rows = conn.execute(_ACCESS_SQL + " ORDER BY c.name", _params(agent)).fetchall()
    return [(Collection.from_row(r), r["access"]) for r in rows if r["access"]]


def collection_for_agent(conn: Conn, agent: Agent, name: object, need: Mode, *,
                         lock: bool = False) -> Collection:
    """The collection ``name`` if the agent may ``need`` it. Unreadable reads exactly as unknown
    (404); a write with read access is Forbidden naming the collection. ``lock`` takes the
    collection row's lock (record ids are taken under it)."""
    if not isinstance(name, str):
        raise NotFound(f"unknown collection {name}")
    row = conn.execute(_ACCESS_SQL + " AND c.name = %(name)s" + (" FOR UPDATE OF c" if lock else ""),
                       {**_params(agent), "name": name}).fetchone()
    if row is None or not row["access"]:
        raise NotFound(f"unknown collection {name}")
    if need == "write" and row["access"] != "write":
        raise Forbidden(f"collection {name} is read-only for this agent: it has read access, and "
                        "record_add, record_update and record_remove need write; ask the operator for write access")
    return Collection.from_row(row)


def state_collections(conn: Conn, agent: Agent, *, cap: int = 50) -> list[dict[str, Any]]:
    """State's list: every granted collection (name, purpose, access, scope, display_path,
    columns), at most ``cap``; past the cap one more entry carries truncated: true."""
    granted = granted_collections(conn, agent)
    out: list[dict[str, Any]] = [
        {"name": c.name, "purpose": c.purpose, "access": mode, "scope": c.scope,
         "display_path": c.display_path, "columns": c.columns}
        for c, mode in granted[:cap]]
    if len(granted) > cap:
        out.append({"truncated": True, "omitted": len(granted) - cap})
    return out

"""Agents as the tools see them: identity, guild and the four note grant bindings."""
from __future__ import annotations

from dataclasses import dataclass

from store.access import Actor
from store.db import Conn
from store.errors import NotFound, Invalid

_COLUMNS = "id, org_id, guild_id, name, read_guild, write_guild, read_org, write_org"


@dataclass(frozen=True)
class Agent:
    id: int
    org_id: int
    guild_id: int
    name: str
    read_guild: bool = True
    write_guild: bool = True
    read_org: bool = True
    write_org: bool = False

    def grants(self) -> dict[str, bool]:
        return {"read_guild": self.read_guild, "write_guild": self.write_guild,
                "read_org": self.read_org, "write_org": self.write_org}


def load_agent(conn: Conn, agent_id: int, org_ids: frozenset[int] | set[int]) -> Agent:
    """The agent, or NotFound when it does not exist or belongs to an organisation the caller is
    not in (the two read the same)."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM agents WHERE id = %s", (agent_id,)).fetchone()
    if row is None or row["org_id"] not in org_ids:
        raise NotFound(f"unknown agent {agent_id}")
    return Agent(**row)


@dataclass(frozen=True)
class AgentCall:
    """One tool call: the agent it acts for and the actor provenance records. A call carrying a
    run id is run-owned; the run must be this agent's."""

    agent: Agent
    actor: Actor

    @classmethod
    def open(cls, conn: Conn, agent: Agent, *, tool: str, run_id: int | None = None,
             tool_call_id: str | None = None) -> AgentCall:
        if run_id is None:
            return cls(agent, Actor("agent", agent.id, agent.name, tool_call_id=tool_call_id, tool_name=tool))
        run = conn.execute("SELECT id FROM runs WHERE id = %s AND agent_id = %s", (run_id, agent.id)).fetchone()
        if run is None:
            msg = f"run {run_id} is not a run of agent {agent.id}; send the X-Run-Id of this agent's run, or none"
            raise Invalid(msg, [msg])
        return cls(agent, Actor("run", agent.id, agent.name, run_id=run_id, tool_call_id=tool_call_id,
                                tool_name=tool))

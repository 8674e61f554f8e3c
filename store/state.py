"""State: the read-only projection a run is created from.

    get_state(conn, agent) -> dict
        {agent: {id, name, org_id, guild_id}, task: {display_path, text, version, updated_at,
         updated_by}, memory: {display_path, content, version, updated_at, updated_by},
         note_grants: {read_guild, write_guild, read_org, write_org}, collections: [...]}

``task.text`` has its embeds expanded (store.embeds.expand_task); ``task.raw`` is the text as the
operator saved it. ``collections`` is store.grants.state_collections.
"""
from __future__ import annotations

from typing import Any

from store import embeds, grants
from store.agents import Agent
from store.db import Conn
from store.memory import read_memory
from store.notes import iso
from store.paths import memory_path
from store.tasks import read_task


def get_state(conn: Conn, agent: Agent) -> dict[str, Any]:
    task = read_task(conn, agent.org_id, agent.id)
    memory = read_memory(conn, agent.org_id, agent.id)
    return {
        "agent": {"id": agent.id, "name": agent.name, "org_id": agent.org_id, "guild_id": agent.guild_id},
        "task": {"display_path": task["display_path"], "text": embeds.expand_task(conn, agent, task["task"]),
                 "raw": task["task"], "version": task["version"], "updated_at": iso(task["updated_at"]),
                 "updated_by": task["updated_by"]},
        "memory": ({"display_path": memory["display_path"], "content": memory["content"],
                    "version": memory["version"], "updated_at": iso(memory["updated_at"]),
                    "updated_by": memory["updated_by"]} if memory else
                   {"display_path": memory_path(agent.org_id, agent.id), "content": "", "version": 0,
                    "updated_at": None, "updated_by": None}),
        "note_grants": agent.grants(),
        "collections": grants.state_collections(conn, agent),
    }

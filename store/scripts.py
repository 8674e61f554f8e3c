"""Scripts: agent-level sandbox Python (kind 'script'), at org/<org>/agents/<agent>/scripts/<name>.

The name rule is ``store.paths.SCRIPT_NAME``: one file name ending in .py, 1 to 128 characters of
letters, digits, '_', '.' and '-', not starting with '.' or '-' (so editors' side files such as
.x.py.swp or x.py~ never become scripts). Scripts share the 256 KB write cap and the per-agent cap
of 10 000 live artifacts with notes and memory. They never appear in note or record search (the
search column is null for kind 'script').

    get_script(conn, org_id, agent_id, name) -> dict | None          with content
    list_scripts(conn, org_id, agent_id) -> list[dict]                without content; size in bytes
    write_script(conn, org_id, agent_id, name, content, actor, *, if_version=None,
                 create_only=False) -> dict                            without content
    delete_script(conn, org_id, agent_id, name, actor) -> dict       {deleted: display_path}
    move_script(conn, org_id, agent_id, name, new_name, actor, *, replace) -> dict

Tools: script_list {}, script_get {name}, script_write {name, content}, script_delete {name}.
"""
from __future__ import annotations

from typing import Any

from store.access import Actor
from store.agents import AgentCall
from store.db import Conn, Database
from store.errors import AlreadyExists, Invalid, NotFound
from store.notes import iso
from store.storage import (NOTE_COLUMNS, check_content, refuse_new_name, relocate_artifact, save_artifact,
                           soft_delete_artifact)
from store.paths import SCRIPT_NAME, nfc, refuse_name, script_path, side_name_problem
from store.tools import Arg, tool


def check_name(name: object) -> str:
    """The NFC script name, or Invalid saying what a name may be."""
    if isinstance(name, str) and SCRIPT_NAME.fullmatch(nfc(name)):
        return nfc(name)
    msg = (f"the script name {name!r} is not allowed: a script is one file name ending in .py, made of "
           "letters, digits, '_', '.' and '-' (at most 128 characters, not starting with '.' or '-'), "
           "such as fetch_prices.py")
    raise Invalid(msg, [msg])


def get_script(conn: Conn, org_id: int, agent_id: int, name: str) -> dict | None:
    return conn.execute(f"SELECT {NOTE_COLUMNS}, content FROM artifacts WHERE display_path = %s"
                        " AND deleted_at IS NULL AND kind = 'script'",
                        (script_path(org_id, agent_id, nfc(name)),)).fetchone()


def list_scripts(conn: Conn, org_id: int, agent_id: int) -> list[dict]:
    return conn.execute(f"SELECT {NOTE_COLUMNS}, octet_length(content) AS size FROM artifacts"
                        " WHERE org_id = %s AND level = 'agent' AND agent_id = %s AND kind = 'script'"
                        " AND deleted_at IS NULL ORDER BY key", (org_id, agent_id)).fetchall()


def write_script(conn: Conn, org_id: int, agent_id: int, name: str, content: str, actor: Actor, *,
                 if_version: int | None = None, create_only: bool = False, hidden_for: int | None = None,
                 honour_leases: bool = False) -> dict:
    name = check_name(name)
    check_content(content, "the script")
    path = script_path(org_id, agent_id, name)
    refuse_new_name(conn, path, side_name_problem(name))
    row, _ = save_artifact(conn, kind="script", org_id=org_id, level="agent", owner_id=agent_id,
                                 key=name, display_path=path, content=content, actor=actor,
                                 if_version=if_version, create_only=create_only, hidden_for=hidden_for,
                                 honour_leases=honour_leases)
    return row


def delete_script(conn: Conn, org_id: int, agent_id: int, name: str, actor: Actor) -> dict:
    path = script_path(org_id, agent_id, nfc(name))
    if soft_delete_artifact(conn, org_id=org_id, path=path, kind="script", actor=actor) is None:
        raise NotFound(f"unknown script {path}; script_list lists this agent's scripts")
    return {"deleted": path}


def move_script(conn: Conn, org_id: int, agent_id: int, name: str, new_name: str, actor: Actor, *,
                replace: bool) -> dict:
    """Rename a script within its agent; the row keeps its id and its version goes up by one."""
    new_name = check_name(new_name)
    refuse_name(side_name_problem(new_name))
    src, dst = script_path(org_id, agent_id, nfc(name)), script_path(org_id, agent_id, new_name)
    rows = conn.execute("SELECT id, display_path FROM artifacts WHERE display_path = ANY(%s)"
                        " AND deleted_at IS NULL AND kind = 'script' ORDER BY id FOR UPDATE", ([src, dst],)).fetchall()
    by_path = {r["display_path"]: r for r in rows}
    if src not in by_path:
        raise NotFound(f"unknown script {src}")
    if src == dst:
        return get_script(conn, org_id, agent_id, name) or {}
    replaced = by_path.get(dst)
    if replaced is not None and not replace:
        raise AlreadyExists(f"cannot rename {src} to {dst}: {dst} already exists; allow overwriting, "
                            "or choose another name")
    return relocate_artifact(conn, by_path[src]["id"], org_id=org_id, src=src, dst=dst, key=new_name,
                             replaced_id=replaced["id"] if replaced else None, actor=actor)


# ---------------------------------------------------------------------------------------------
# Tools


def _result(row: dict, *, content: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"display_path": row["display_path"], "name": row["key"]}
    if content:
        out["content"] = row.get("content") or ""
    if "size" in row:
        out["size"] = row["size"] or 0
    out.update(version=row["version"], created_at=iso(row["created_at"]), updated_at=iso(row["updated_at"]),
               updated_by=row["updated_by"])
    return out


def _name_arg(value: str) -> str:
    return check_name(value)


@tool("script_list", "List this agent's scripts (name, size, version).")
def script_list(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    agent = call.agent
    with db.connection() as conn:
        rows = list_scripts(conn, agent.org_id, agent.id)
    return {"scripts": [_result(r, content=False) for r in rows]}


@tool("script_get", "Read one of this agent's scripts by name (such as fetch.py).",
      name=Arg("string", required=True))
def script_get(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    agent, name = call.agent, _name_arg(args["name"])
    with db.connection() as conn:
        row = get_script(conn, agent.org_id, agent.id, name)
    if row is None:
        raise NotFound(f"unknown script {script_path(agent.org_id, agent.id, name)}; "
                       "script_list lists this agent's scripts")
    return _result(row)


@tool("script_write", "Create or replace one of this agent's scripts (a .py file name).",
      name=Arg("string", required=True), content=Arg("string", required=True))
def script_write(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    agent = call.agent
    name = _name_arg(args["name"])
    with db.transaction() as conn:
        row = write_script(conn, agent.org_id, agent.id, name, args["content"], call.actor)
    return _result(row, content=False)


@tool("script_delete", "Delete one of this agent's scripts by name.", name=Arg("string", required=True))
def script_delete(db: Database, call: AgentCall, args: dict[str, Any]) -> dict[str, Any]:
    agent = call.agent
    name = _name_arg(args["name"])
    with db.transaction() as conn:
        return delete_script(conn, agent.org_id, agent.id, name, call.actor)

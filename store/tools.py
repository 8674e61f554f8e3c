"""The agent tools: one registry, one argument check, one way to call a tool.

Each family module (notes, memory, scripts, records) registers its tools with ``@tool``, declaring
its arguments. ``call`` checks the arguments' shape, reporting every problem at once, opens the
agent's call context and runs the tool. The HTTP route and Python callers both go through ``call``,
so both see the same results and the same refusals.
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from store.access import Principal
from store.agents import AgentCall, load_agent
from store.db import Database
from store.errors import Invalid, NotFound, rejected

ToolFn = Callable[[Database, AgentCall, dict[str, Any]], dict[str, Any]]

# JSON type names as a model reads them -> the Python types that satisfy them.
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "object": (dict,), "array": (list,), "string|object": (str, dict),
}


@dataclass(frozen=True)
class Arg:
    type: str
    required: bool = False
    description: str = ""
    # What is wrong with a value of the right type, or None: checked with the types, so that one
    # refusal lists a bad level beside a content of the wrong type.
    check: Callable[[Any], str | None] | None = None


@dataclass(frozen=True)
class Tool:
    name: str
    fn: ToolFn
    args: dict[str, Arg] = field(default_factory=dict)
    description: str = ""


TOOLS: dict[str, Tool] = {}
# Modules that register tools; imported on first use so that importing store stays cheap and free
# of cycles.
_FAMILIES = ("store.notes", "store.memory", "store.scripts", "store.records")


def tool(name: str, description: str = "", /, **args: Arg) -> Callable[[ToolFn], ToolFn]:
    def register(fn: ToolFn) -> ToolFn:
        TOOLS[name] = Tool(name, fn, args, description or (fn.__doc__ or "").strip().split("\n")[0])
        return fn
    return register


def registry() -> dict[str, Tool]:
    for module in _FAMILIES:
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
    return TOOLS


def check_args(spec: dict[str, Arg], args: object, tool_name: str) -> dict[str, Any]:
    """The arguments as a dict, or Invalid listing every problem (unknown, missing, wrong type)."""
    if not isinstance(args, dict):
        msg = f"{tool_name} takes a JSON object of arguments ({', '.join(spec) or 'none'})"
        raise Invalid(msg, [msg])
    problems = []
    for name in args:
        if name not in spec:
            problems.append(f"{name}: unknown argument; {tool_name} takes {', '.join(spec) or 'no arguments'}")
    for name, arg in spec.items():
        if name not in args or args[name] is None:
            if arg.required:
                problems.append(f"{name}: required ({arg.type})")
            continue
        value = args[name]
        ok = isinstance(value, _JSON_TYPES[arg.type])
        if ok and arg.type in ("integer", "number") and isinstance(value, bool):
            ok = False
        if not ok:
            problems.append(f"{name}: expected {arg.type}; got {_json_type(value)}")
        elif arg.check is not None and (problem := arg.check(value)):
            problems.append(f"{name}: {problem}")
    if problems:
        raise rejected(f"{tool_name} arguments rejected", problems)
    return {k: v for k, v in args.items() if v is not None}


def _json_type(value: object) -> str:
    for name, types in (("boolean", (bool,)), ("number", (int, float)), ("string", (str,)),
                        ("array", (list,)), ("object", (dict,))):
        if isinstance(value, types):
            return name
    return "null"


def call(db: Database, principal: Principal, agent_id: int, name: str, args: object, *,
         run_id: int | None = None, tool_call_id: str | None = None) -> dict[str, Any]:
    """Run tool ``name`` for agent ``agent_id`` on behalf of ``principal``."""
    with db.connection() as conn:
        agent = load_agent(conn, agent_id, principal.org_ids)
        spec = registry().get(name)
        if spec is None:
            raise NotFound(f"unknown tool {name}; the tools are {', '.join(sorted(registry()))}")
        clean = check_args(spec.args, args, name)
        ctx = AgentCall.open(conn, agent, tool=name, run_id=run_id, tool_call_id=tool_call_id)
    return spec.fn(db, ctx, clean)

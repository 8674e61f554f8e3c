"""GET /api/openapi.json: an OpenAPI 3 document of every /api/ route, built from the live url_map.

Each route is documented by one entry in ``OPERATIONS``, keyed by (path, method). Paths are matched
by shape (``/api/agents/{agent_id}/tools/{tool}`` matches the rule ``/api/agents/<int:id>/tools/<t>``),
and the document takes the parameter names and types from the live rule, so an entry never drifts
from the code it describes. A route with no entry is left out of the document, and
tests/test_openapi.py fails naming it: adding a route means adding one entry here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from flask import Blueprint, current_app, jsonify
from flask.typing import ResponseReturnValue
from werkzeug.routing import Rule

from api.context import INT64_MAX, MAX_JSON_DEPTH
from store import tools
from store.columns import MAX_COLUMNS, MAX_DESCRIPTION, MAX_VALUE_LENGTH, MAX_VALUES, RESERVED, TYPES
from store.files import MAX_HISTORY
from store.storage import MAX_CONTENT_BYTES
from store.record_query import DEFAULT_LIMIT, MAX_LIMIT, MAX_QUERY, MAX_WHERE

bp = Blueprint("openapi", __name__)

_JSON = "application/json"


@dataclass(frozen=True)
class Op:
    """One documented operation. ``body`` and ``ok`` are JSON Schemas (or $ref names)."""
    summary: str
    body: dict[str, Any] | str | None = None
    ok: dict[str, Any] | str | None = None
    status: int = 200
    query: tuple[tuple[str, str | dict[str, Any], str], ...] = ()  # (name, schema type or schema, description)
    required: tuple[str, ...] = ()  # query parameters and headers the route needs
    auth: tuple[str, ...] = ("user",)  # who may call: user (member), service (orchestrator token)
    tags: tuple[str, ...] = ()
    content_type: str = _JSON
    notes: str = ""
    extra: dict[int, str] = field(default_factory=dict)  # further statuses and what they mean
    headers: tuple[tuple[str, str | dict[str, Any], str], ...] = ()  # request headers, as query
    bodies: tuple[tuple[str, dict[str, Any]], ...] = ()  # further request media types and their schemas
    schemes: tuple[str, ...] | None = None  # security schemes; None: basic and bearer when auth is set
    # OpenAPI links from the success response: (name, (path, method) of the target, {its parameter:
    # the runtime expression that fills it}), so generated clients and schemathesis can chain calls.
    links: tuple[tuple[str, tuple[str, str], dict[str, str]], ...] = ()


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _obj(needed: tuple[str, ...] = (), /, **props: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props}
    if needed:
        out["required"] = list(needed)
    return out


def _body(needed: tuple[str, ...] = (), /, **props: Any) -> dict[str, Any]:
    """A request body: every route refuses fields it does not know, so the document says so."""
    return {**_obj(needed, **props), "additionalProperties": False}


_ID = {"type": "integer", "format": "int64", "minimum": 1, "maximum": INT64_MAX}
# PostgreSQL text holds no NUL, so no string the store keeps may contain one.
_NO_NUL = r"^[^\u0000]*$"
_STRING = {"type": "string", "pattern": _NO_NUL}
# Something other than spaces, as Python's str.strip() sees them (it also strips \x1c-\x1f and \x85).
_TEXT = {"type": "string", "pattern": r"^[^\u0000]*[^\s\x1c-\x1f\x85\u0000][^\u0000]*$"}
# A task or note is at most 256 KB of UTF-8, a limit in bytes JSON Schema cannot state: maxLength is
# the count of characters that always fits (4 bytes each at most), and the description gives the
# limit itself, so a client does not take the smaller number for the store's.
_TASK = {**_STRING, "maxLength": MAX_CONTENT_BYTES // 4,
         "description": (f"at most {MAX_CONTENT_BYTES:,} bytes of UTF-8 (413 past it); maxLength is the number "
                         "of characters that always fits, at 4 bytes each")}
_MODE_GUILD = {"type": ["string", "null"], "enum": ["read", "write", None]}
_MODE_AGENT = {"type": ["string", "null"], "enum": ["read", "write", "none", None]}
_RECORD_QUERY = (
    ("query", {**_STRING, "maxLength": MAX_QUERY},
     "text search (websearch_to_tsquery grammar); runs the search instead of a listing"),
    ("where", {"type": "string", "contentMediaType": _JSON,
               "contentSchema": {"type": "object", "maxProperties": MAX_WHERE}},
     "JSON object {column: term} naming the collection's columns"),
    ("since", {"type": "string", "format": "date-time"},
     "ISO 8601 timestamp: records created or updated at or after it (with query: narrows the hits)"),
    ("order", {"type": "string"}, 'JSON {"column", "direction"} or "column desc" (with query: sorts the hits by '
                                  "the column instead of rank)"),
    ("limit", {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT}, f"{DEFAULT_LIMIT} by default"),
    ("offset", {"type": "integer", "format": "int64", "minimum": 0, "maximum": INT64_MAX},
     "0 or more (with query: pages the ranked hits; total counts them all)"),
)

_RECORD_RESULT = _obj(record={"type": "object"}, merged={"type": ["integer", "null"]},
                      warnings={"type": "array", "items": {"type": "string"}})

# Every /api/ route, by path and method. Keep one entry per route; the test compares with url_map.
OPERATIONS: dict[tuple[str, str], Op] = {
    ("/api/health", "get"): Op("Store reachability and schema version", auth=(), tags=("meta",)),
    ("/api/openapi.json", "get"): Op("This document", auth=(), tags=("meta",)),

    # Collections (api/collections.py)
    ("/api/collections", "get"): Op(
        "Every live collection of the organisation with its record count",
        query=(("org_id", _ID, "needed only by a member of several organisations"),),
        ok=_obj(collections={"type": "array", "items": _ref("Collection")}), tags=("collections",),
        extra={422: "org_id is not an id in ASCII digits, or is needed (a member of several organisations)"}),
    ("/api/collections", "post"): Op(
        "Create a collection", body="CollectionCreate", ok="Collection", status=201, tags=("collections",),
        extra={409: "the name is taken at the organisation", 422: "every problem of the definition, or the cap"},
        links=tuple((name, (path, method), {"collection_id": "$response.body#/id"}) for name, path, method in (
            ("GetCollection", "/api/collections/{collection_id}", "get"),
            ("ChangeCollection", "/api/collections/{collection_id}", "patch"),
            ("ListRecords", "/api/collections/{collection_id}/records", "get"),
            ("AddRecord", "/api/collections/{collection_id}/records", "post"),
            ("ExportRecords", "/api/collections/{collection_id}/export", "get"),
            ("DeleteCollection", "/api/collections/{collection_id}", "delete")))),
    ("/api/collections/{collection_id}", "get"): Op(
        "The collection, its count and access_list (guilds, agents)", ok="CollectionDetail", tags=("collections",)),
    ("/api/collections/{collection_id}", "patch"): Op(
        "Change name, purpose, columns (a renamed column carries rename_from) or scope (guild_id; null moves "
        "the table to the organisation)", body="CollectionPatch", ok="CollectionDetail", tags=("collections",),
        extra={409: "a name taken, a column made unique while live records repeat a value, or a rename of a "
                    "table a live task embeds (remove the embed first)",
               412: "If-Match (the ETag of GET) no longer matches: someone changed the table since",
               422: "every problem of the change"}),
    ("/api/collections/{collection_id}", "delete"): Op(
        "Soft-delete the collection and its records; its grants go",
        ok=_obj(deleted=_ID, name={"type": "string"}, records={"type": "integer"}), tags=("collections",),
        extra={409: "a live task embeds the table (remove the embed first)"}),
    ("/api/guilds/{guild_id}/collection-access", "get"): Op(
        "The guild's own tables (scope guild, write) and every organisation table with the guild's grant",
        ok="GuildAccess", tags=("access",)),
    ("/api/guilds/{guild_id}/collection-access", "put"): Op(
        "Set a guild's grant on an organisation table; mode null removes it",
        body=_body(("collection_id", "mode"), collection_id=_ID, mode=_MODE_GUILD), tags=("access",),
        extra={422: "a guild's own table takes no guild grant, or a bad mode"}),
    ("/api/agents/{agent_id}/collection-access", "get"): Op(
        "The guild's own tables and every organisation table with the guild's grant, the agent's row and "
        "the effective mode", ok="AgentAccess", tags=("access",)),
    ("/api/agents/{agent_id}/collection-access", "put"): Op(
        "Set an agent's own row (read, write, none); mode null removes it",
        body=_body(("collection_id", "mode"), collection_id=_ID, mode=_MODE_AGENT), tags=("access",),
        extra={422: "an agent row on a guild's own table is for agents of that guild only, or a bad mode"}),

    # Records (api/records.py)
    ("/api/collections/{collection_id}/export", "get"): Op(
        "The live records as JSONL", content_type="application/x-ndjson", tags=("records",),
        query=(("format", {"type": "string", "enum": ["jsonl", "ndjson"]},
                "JSONL, the only format (optional; CSV is the web app's)"),),
        extra={422: "a format other than JSONL"}),
    ("/api/collections/{collection_id}/records", "get"): Op(
        "List or search the records: { total, records, columns }", query=_RECORD_QUERY, tags=("records",),
        extra={422: "the listing or search arguments, with every problem"}),
    ("/api/collections/{collection_id}/records", "post"): Op(
        "Add a record: { body } -> { record, merged }", body=_body(("body",), body={"type": "object"}),
        ok=_RECORD_RESULT, status=201, tags=("records",),
        links=tuple((name, (path, method), {"collection_id": "$request.path.collection_id",
                                             "record_id": "$response.body#/record/id"})
                    for name, path, method in (
            ("GetRecord", "/api/collections/{collection_id}/records/{record_id}", "get"),
            ("ChangeRecord", "/api/collections/{collection_id}/records/{record_id}", "patch"),
            ("RemoveRecord", "/api/collections/{collection_id}/records/{record_id}", "delete"))),
        extra={200: "the unique column matched a live record and the body was merged into it (merged is its id)",
               409: "a unique value is held by another record", 413: "the request body is over the gateway's size limit",
               422: "record rejected, with every problem (32 KB of value text included), or the collection's "
                    "record cap"}),
    ("/api/collections/{collection_id}/records", "delete"): Op(
        "Clear every live record; the table, grants and next_id stay", tags=("records",)),
    ("/api/collections/{collection_id}/records/{record_id}", "get"): Op("One record", tags=("records",)),
    ("/api/collections/{collection_id}/records/{record_id}", "patch"): Op(
        "Merge a patch into a record: { body } -> { record, warnings }; If-Match for a conditional change",
        body=_body(("body",), body={"type": "object", "minProperties": 1}), tags=("records",),
        headers=(("If-Match", {"type": "string", "pattern": "^[0-9]{1,9}$"},
                  ("the record's version (as GET returns it), such as \"3\": the change is refused "
                   "with 412 if the record changed since")),),
        extra={409: "a unique value is held by another record", 412: "the record changed since the version sent "
               "in If-Match", 413: "the request body is over the gateway's size limit",
               422: "the patch rejected, with every problem (32 KB of value text included)"}),
    ("/api/collections/{collection_id}/records/{record_id}", "delete"): Op(
        "Soft-delete one record", tags=("records",)),

    # Agents: tools and State (api/tools.py, api/agents.py)
    ("/api/agents/{agent_id}/tools/{tool}", "post"): Op(
        "Call one agent tool with its arguments (X-Run-Id and X-Tool-Call-Id headers for run-owned calls)",
        body={"type": "object"}, auth=("service",), schemes=("bearer",), tags=("tools",),
        headers=(("X-Run-Id", _ID, "the run this call belongs to: the change is run-owned"),
                 ("X-Tool-Call-Id", {**_STRING, "maxLength": 200},
                  "the model's tool call id, recorded with the change")),
        extra={400: "X-Run-Id longer than 32 or X-Tool-Call-Id longer than 200 characters (refused at the door)",
               403: "the agent lacks the grant the tool needs, or the target is read-only",
               404: "the agent is not one of the organisation's, the tool is unknown (the sentence lists the "
                    "tools), or what the tool names is unknown or out of the agent's reach",
               409: "the change contradicts the current state (a name taken, a unique value, an embedded note)",
               413: "a body over its size cap",
               422: "the tool's arguments, with every problem; an X-Run-Id that is not a run of this agent; "
                    "or a cap reached"}),
    ("/api/runs", "post"): Op(
        "Open a run of an agent (the orchestrator); its tool calls carry X-Run-Id to be run-owned",
        body=_body(("agent_id", "kind"), agent_id=_ID,
                   kind={"enum": ["chat", "schedule", "studio", "group", "manual"]},
                   status={"enum": ["queued", "running", "succeeded", "failed", "cancelled"]},
                   routine={**_STRING, "minLength": 1, "maxLength": 200,
                            "description": "the schedule's routine name"}),
        status=201, auth=("service",), schemes=("bearer",), tags=("runs",),
        links=(("SetRunStatus", ("/api/runs/{run_id}", "patch"), {"run_id": "$response.body#/id"}),),
        extra={404: "the agent is not one of the organisation's", 422: "the body, with every problem"}),
    ("/api/runs/{run_id}", "patch"): Op(
        "Move a run to another status",
        body=_body(("status",), status={"enum": ["queued", "running", "succeeded", "failed", "cancelled"]}),
        auth=("service",), schemes=("bearer",), tags=("runs",),
        extra={404: "the run is not one of the organisation's", 422: "the body, with every problem"}),
    ("/api/agents/{agent_id}/state", "get"): Op(
        "The agent's State: notes, memory, task, scripts and granted collections", auth=("service", "user"),
        tags=("agents",)),
    ("/api/agents/{agent_id}/task", "get"): Op("The agent's standing task (agents.task)", tags=("agents",)),
    ("/api/agents/{agent_id}/task", "put"): Op(
        "Save the agent's standing task: JSON {task} or the Markdown itself; If-Match for a conditional save",
        body=_body(("task",), task=_TASK), bodies=(("text/markdown", _TASK),),
        headers=(("If-Match", {"type": "string", "pattern": "^[0-9]{1,9}$"},
                  ("the task's version number (as GET returns it), such as \"3\": "
                   "the save is refused with 412 if the task changed since")),),
        tags=("agents",),
        extra={412: "the task changed since the version sent in If-Match", 413: "the task is over its size cap",
               422: "the body or If-Match, or an embed the task cannot hold"}),
    ("/api/agents/{agent_id}/task/revisions", "get"): Op(
        "Previous operator saves of the task, newest first (at most 50)", tags=("agents",)),

    # Provenance (api/file_changes.py)
    ("/api/file-changes", "get"): Op(
        "The newest-first history of one display path, a page at a time: follow next until has_more is false",
        query=(("display_path", _TEXT, "the file's display path"),
               ("limit", {"type": "integer", "minimum": 1, "maximum": MAX_HISTORY},
                "how many changes a page holds: 100 by default"),
               ("before", _ID, "a change id: only older changes (the id of the previous page's last change)")),
        ok=_obj(("changes", "has_more", "next"),
                changes={"type": "array", "items": {"type": "object", "properties": {"id": _ID}}},
                has_more={"type": "boolean", "description": "older changes remain beyond this page"},
                next={"type": ["string", "null"],
                      "description": "the URL of the next (older) page, or null on the last page"}),
        required=("display_path",), tags=("provenance",),
        extra={422: "display_path missing, or limit or before out of range, with every problem"}),
    ("/api/file-changes/latest", "get"): Op(
        "The newest change per path",
        query=(("display_paths", {"type": "string", "pattern": r"^[^\u0000]*[^,\s\x1c-\x1f\x85\u0000][^\u0000]*$"},
                "comma-separated display paths"),),
        required=("display_paths",), tags=("provenance",), extra={422: "no display path given"}),
    ("/api/file-changes/latest", "post"): Op(
        "The newest change per path (display_paths in the body)",
        body=_body(("display_paths",), display_paths={"type": "array", "minItems": 1, "items": _TEXT}),
        tags=("provenance",), extra={422: "no display path given"}),
}

_COLUMN = {
    **_body(("name", "type", "description"),
            name={"type": "string", "pattern": "^[a-z][a-z0-9_]{0,63}$", "not": {"enum": list(RESERVED)}},
            type={"type": "string", "enum": list(TYPES)},
            description={**_TEXT, "maxLength": MAX_DESCRIPTION},
            required={"type": "boolean", "default": False},
            unique={"type": "boolean", "default": False},
            values={"type": "array", "minItems": 1, "maxItems": MAX_VALUES, "uniqueItems": True,
                    "items": {**_STRING, "minLength": 1, "maxLength": MAX_VALUE_LENGTH}}),
    # unique applies to text and number columns, values to text and array columns.
    "allOf": [
        {"if": {"properties": {"unique": {"const": True}}, "required": ["unique"]},
         "then": {"properties": {"type": {"enum": ["text", "number"]}}}},
        {"if": {"required": ["values"]}, "then": {"properties": {"type": {"enum": ["text", "array"]}}}},
    ]}
_COLUMN_CHANGE = {**_COLUMN, "properties": {**_COLUMN["properties"],
                                            "rename_from": {**_STRING, "description": "the column's current name"}}}


def _column_list(item: str) -> dict[str, Any]:
    """A column list: at most MAX_COLUMNS, at most one of them unique (names must also differ)."""
    return {"type": "array", "maxItems": MAX_COLUMNS, "items": _ref(item),
            "contains": {"properties": {"unique": {"const": True}}, "required": ["unique"]},
            "minContains": 0, "maxContains": 1}


_COLLECTION = _obj(
    id=_ID, name={"type": "string"}, purpose={"type": "string"}, scope={"type": "string", "enum": ["guild", "org"]},
    guild_id={"type": ["integer", "null"]}, display_path={"type": "string"},
    columns={"type": "array", "items": _ref("Column")}, next_id={"type": "integer"},
    created_at={"type": "string", "format": "date-time"}, updated_at={"type": "string", "format": "date-time"},
    count={"type": "integer"})
_ACCESS_ENTRY = _obj(collection_id=_ID, name={"type": "string"}, purpose={"type": "string"},
                     scope={"type": "string", "enum": ["guild", "org"]})

SCHEMAS: dict[str, Any] = {
    "Error": _obj(("error", "problems", "status"), error={"type": "string"},
                  problems={"type": "array", "items": {"type": "string"}}, status={"type": "integer"}),
    "Column": _COLUMN,
    "ColumnChange": _COLUMN_CHANGE,
    "Collection": _COLLECTION,
    "CollectionDetail": {"allOf": [_ref("Collection"), _obj(access_list=_obj(
        guilds={"type": "array", "items": _obj(guild_id=_ID, name={"type": "string"}, mode={"type": "string"},
                                                own={"type": "boolean"})},
        agents={"type": "array", "items": _obj(agent_id=_ID, name={"type": "string"}, guild_id=_ID,
                                                mode={"type": "string"})}))]},
    "CollectionCreate": _body(
        ("name", "purpose", "columns"), name={"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,62}$"},
        purpose={**_TEXT, "maxLength": 400},
        columns=_column_list("Column"), guild_id={**_ID, "type": ["integer", "null"]}, org_id=_ID),
    "CollectionPatch": _body(
        name={"type": "string", "pattern": "^[a-z][a-z0-9_-]{0,62}$"},
        purpose={**_TEXT, "maxLength": 400},
        columns=_column_list("ColumnChange"), guild_id={**_ID, "type": ["integer", "null"]}),
    "GuildAccess": _obj(guild_id=_ID, collections={"type": "array", "items": {"allOf": [
        _ACCESS_ENTRY, _obj(mode={"type": ["string", "null"]})]}}),
    "AgentAccess": _obj(agent_id=_ID, guild_id=_ID, collections={"type": "array", "items": {"allOf": [
        _ACCESS_ENTRY, _obj(guild_mode={"type": ["string", "null"]}, agent_mode={"type": ["string", "null"]},
                            effective={"type": ["string", "null"], "enum": ["read", "write", None]})]}}),
}

_PARAM = re.compile(r"<(?:([a-z_]+)(?:\([^)]*\))?:)?([A-Za-z_][A-Za-z0-9_]*)>")
_BRACED = re.compile(r"\{[^}]*\}")
_ERRORS = {401: "no or wrong credentials", 404: "unknown, or another organisation's",
           429: "too many failed logins for this account or from this address; Retry-After says when to try again"}
# Every route reads the store; while it cannot be reached the gateway says so (with Retry-After).
_UNAVAILABLE = {503: "the store is unreachable for now; Retry-After says when to try again"}
_BAD_BODY = (f"the body is nested deeper than {MAX_JSON_DEPTH} levels, or breaks a rule, with every problem")
# A body that cannot be read at all (RFC 9110 keeps 422 for content that parses).
_UNREADABLE = "the body is not JSON, or not UTF-8: the sentence says where the reading stopped and why"
_TOO_LARGE = "the body is larger than the route takes"


def shape(path: str) -> str:
    """A path with every parameter blanked, so entries match rules whatever their names."""
    return _BRACED.sub("{}", _PARAM.sub("{}", path))


def openapi_path(rule: Rule) -> tuple[str, list[dict[str, Any]]]:
    """The rule as an OpenAPI path and its path parameters (names and types from the rule)."""
    params: list[dict[str, Any]] = []

    def sub(m: re.Match[str]) -> str:
        converter, name = m.group(1) or "default", m.group(2)
        # Ids are bigints from 1; a tool is one of the registered tools.
        schema: dict[str, Any] = dict(_ID) if converter == "int" else {"type": "string"}
        if name == "tool":
            schema["enum"] = sorted(tools.registry())
        params.append({"name": name, "in": "path", "required": True, "schema": schema})
        return "{" + name + "}"
    return _PARAM.sub(sub, rule.rule), params


def api_routes(url_map: Any) -> list[tuple[Rule, str]]:
    """Every (rule, method) under /api/ that a client can call (HEAD and OPTIONS are implied)."""
    return sorted(((rule, m.lower()) for rule in url_map.iter_rules() if rule.rule.startswith("/api/")
                   for m in (rule.methods or ()) if m not in ("HEAD", "OPTIONS")),
                  key=lambda rm: (rm[0].rule, rm[1]))


def _schema(value: dict[str, Any] | str) -> dict[str, Any]:
    return _ref(value) if isinstance(value, str) else value


def _param(where: str, name: str, schema: str | dict[str, Any], description: str, op: Op) -> dict[str, Any]:
    return {"name": name, "in": where, "required": name in op.required, "description": description,
            "schema": {"type": schema} if isinstance(schema, str) else schema}


def _operation(op: Op, params: list[dict[str, Any]], endpoint: str,
               operation_ids: dict[tuple[str, str], str]) -> dict[str, Any]:
    out: dict[str, Any] = {"summary": op.summary, "operationId": endpoint, "tags": list(op.tags)}
    query = [_param("query", n, t, d, op) for n, t, d in op.query]
    headers = [_param("header", n, t, d, op) for n, t, d in op.headers]
    if params or query or headers:
        out["parameters"] = params + query + headers
    if op.body is not None:
        content = {_JSON: {"schema": _schema(op.body)}}
        content.update({media: {"schema": schema} for media, schema in op.bodies})
        out["requestBody"] = {"required": True, "content": content}
    ok: dict[str, Any] = {"description": "OK" if op.status == 200 else "Created"}
    ok["content"] = {op.content_type: {"schema": _schema(op.ok) if op.ok is not None else {}}}
    links = {name: {"operationId": operation_ids[(shape(path), method)], "parameters": parameters}
             for name, (path, method), parameters in op.links if (shape(path), method) in operation_ids}
    if links:
        ok["links"] = links
    responses: dict[str, Any] = {str(op.status): ok}
    error = {_JSON: {"schema": _ref("Error")}}
    statuses = {**(_ERRORS if op.auth else {}), **_UNAVAILABLE,
                **({400: _UNREADABLE, 413: _TOO_LARGE, 422: _BAD_BODY} if op.body is not None else {}), **op.extra}
    if op.body is not None and 400 in op.extra:  # a route's own 400 (headers refused at the door) adds to it
        statuses[400] = f"{op.extra[400]}; or {_UNREADABLE}"
    for status, why in sorted(statuses.items()):
        # A further success (POST records: 200 when merged) has the operation's own schema.
        responses[str(status)] = {"description": why,
                                  "content": ok["content"] if status < 400 else error}
    out["responses"] = responses
    schemes = op.schemes if op.schemes is not None else (("basic", "bearer") if op.auth else ())
    out["security"] = [{scheme: []} for scheme in schemes]
    if op.auth:
        out["x-callers"] = list(op.auth)
    return out


def build_document(url_map: Any) -> dict[str, Any]:
    """The document for the live routes; a route with no entry in OPERATIONS is left out."""
    entries = {(shape(path), method): op for (path, method), op in OPERATIONS.items()}
    routes = [(rule, method) for rule, method in api_routes(url_map) if (shape(rule.rule), method) in entries]
    operation_ids = {(shape(rule.rule), method): rule.endpoint for rule, method in routes}
    paths: dict[str, dict[str, Any]] = {}
    for rule, method in routes:
        path, params = openapi_path(rule)
        paths.setdefault(path, {})[method] = _operation(entries[(shape(rule.rule), method)], params,
                                                        rule.endpoint, operation_ids)
    return {
        "openapi": "3.1.0",
        "info": {"title": "Host Finder API", "version": "1",
                 "description": "The Databases, provenance, tool and State routes of the Host Finder gateway. "
                                "Errors are {error, problems, status}."},
        "paths": paths,
        "components": {"schemas": SCHEMAS, "securitySchemes": {
            "basic": {"type": "http", "scheme": "basic"}, "bearer": {"type": "http", "scheme": "bearer"}}},
    }


@bp.get("/api/openapi.json")
def openapi_document() -> ResponseReturnValue:
    """The OpenAPI 3 document of every /api/ route; needs no credentials, like /api/health."""
    return jsonify(build_document(current_app.url_map))

"""What the orchestrator owns, created and changed by ``hostfinder admin``: organisations, guilds,
agents, users, memberships, tokens and runs. Each function returns the created row as a dict."""
from __future__ import annotations

import secrets
from typing import Any
from urllib.parse import unquote, urlsplit

from store import locks, sessions, tasks
from store.access import SYSTEM, hash_password, new_token
from store.db import Conn, Database, on_constraint
from store.errors import Conflict, Invalid, NotFound, rejected
from store.values import shown

GRANT_FLAGS = ("read_guild", "write_guild", "read_org", "write_org")
RUN_KINDS = ("chat", "schedule", "studio", "group", "manual")
RUN_STATUSES = ("queued", "running", "succeeded", "failed", "cancelled")

on_constraint("users_email", lambda d: Conflict("a user with that email already exists"))
on_constraint("memberships_pkey", lambda d: Conflict("that user is already a member of the organisation"))


def create_org(db: Database, *, name: str) -> dict[str, Any]:
    name = _name(name, "organisation")
    with db.transaction() as conn:
        return conn.execute("INSERT INTO organisations (name) VALUES (%s) RETURNING id, name, created_at",
                            (name,)).fetchone()


def create_guild(db: Database, *, org_id: int, name: str) -> dict[str, Any]:
    name = _name(name, "guild")
    with db.transaction() as conn:
        _require(conn, "organisations", org_id, "organisation")
        return conn.execute("INSERT INTO guilds (org_id, name) VALUES (%s, %s) RETURNING id, org_id, name",
                            (org_id, name)).fetchone()


def create_agent(db: Database, *, org_id: int, guild_id: int, name: str, task: str = "",
                 **grants: bool | None) -> dict[str, Any]:
    name = _name(name, "agent")
    flags = {k: v for k, v in grants.items() if v is not None}
    _check_flags(flags)
    with db.transaction() as conn:
        guild = conn.execute("SELECT org_id FROM guilds WHERE id = %s", (guild_id,)).fetchone()
        if guild is None or guild["org_id"] != org_id:
            raise NotFound(f"unknown guild {guild_id} in organisation {org_id}")
        cols = ["org_id", "guild_id", "name", *flags]
        vals = [org_id, guild_id, name, *flags.values()]
        agent = conn.execute(
            f"INSERT INTO agents ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(vals))})"
            " RETURNING id, org_id, guild_id, name, task, read_guild, write_guild, read_org, write_org",
            vals).fetchone()
        if task:
            # A task given at creation is its first save: checked, and recorded in provenance
            # with its change event, as every later save is (the spec's "every task mutation").
            agent["task"] = tasks.write_task(conn, org_id, agent["id"], task, SYSTEM)["task"]
        return agent


def set_agent(db: Database, agent_id: int, *, name: str | None = None, **grants: bool | None) -> dict[str, Any]:
    flags = {k: v for k, v in grants.items() if v is not None}
    _check_flags(flags)
    if name is not None:
        flags["name"] = _name(name, "agent")
    with db.transaction() as conn:
        _require(conn, "agents", agent_id, "agent")
        if flags:
            sets = ", ".join(f"{k} = %s" for k in flags)  # keys are checked names, values are bound
            conn.execute(f"UPDATE agents SET {sets} WHERE id = %s", [*flags.values(), agent_id])
        return conn.execute("SELECT id, org_id, guild_id, name, read_guild, write_guild, read_org, write_org"
                            " FROM agents WHERE id = %s", (agent_id,)).fetchone()


def create_user(db: Database, *, email: str, password: str, name: str = "") -> dict[str, Any]:
    _check_email(email)
    _check_password(password)
    with db.transaction() as conn:
        return conn.execute("INSERT INTO users (email, name, password_hash) VALUES (%s, %s, %s)"
                            " RETURNING id, email, name", (email, name or email.split("@")[0],
                                                           hash_password(password))).fetchone()


def add_member(db: Database, *, org_id: int, email: str) -> dict[str, Any]:
    with db.transaction() as conn:
        _require(conn, "organisations", org_id, "organisation")
        user = conn.execute("SELECT id FROM users WHERE lower(email) = lower(%s)", (email,)).fetchone()
        if user is None:
            raise NotFound(f"no user has the email {email}; create one with `hostfinder admin user create`")
        conn.execute("INSERT INTO memberships (org_id, user_id) VALUES (%s, %s)", (org_id, user["id"]))
        return {"org_id": org_id, "user_id": user["id"], "email": email}


def create_token(db: Database, *, org_id: int, member_email: str | None = None,
                 service: bool = False) -> dict[str, Any]:
    """A new token; the secret is in the result and is never shown again."""
    if service == (member_email is not None):
        raise Invalid("say either --member EMAIL or --service", ["give exactly one of member or service"])
    secret, digest, prefix = new_token()
    with db.transaction() as conn:
        _require(conn, "organisations", org_id, "organisation")
        user_id = None
        if member_email is not None:
            row = conn.execute("SELECT m.user_id FROM memberships m JOIN users u ON u.id = m.user_id"
                               " WHERE m.org_id = %s AND lower(u.email) = lower(%s)", (org_id, member_email)).fetchone()
            if row is None:
                raise NotFound(f"{member_email} is not a member of organisation {org_id}")
            user_id = row["user_id"]
        row = conn.execute("INSERT INTO api_tokens (org_id, kind, user_id, token_hash, prefix)"
                           " VALUES (%s, %s, %s, %s, %s) RETURNING id, org_id, kind, user_id, prefix",
                           (org_id, "service" if service else "member", user_id, digest, prefix)).fetchone()
    return {**row, "token": secret}


def list_tokens(db: Database, *, org_id: int | None = None, member_email: str | None = None) -> dict[str, Any]:
    """The tokens that can log in, newest first, without their secrets (only prefixes): what
    `token revoke ID` takes."""
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT t.id, t.org_id, t.kind, t.user_id, u.email, t.prefix, t.created_at"
            " FROM api_tokens t LEFT JOIN users u ON u.id = t.user_id"
            " WHERE t.revoked_at IS NULL AND (%s::bigint IS NULL OR t.org_id = %s)"
            " AND (%s::text IS NULL OR lower(u.email) = lower(%s)) ORDER BY t.id DESC",
            (org_id, org_id, member_email, member_email)).fetchall()
    return {"tokens": rows}


def revoke_token(db: Database, token_id: int) -> dict[str, Any]:
    """Delete the token: the next request that presents it, on any gateway, is refused (the door
    reads tokens on every request), and whatever references it (web sessions) goes with it."""
    with db.transaction() as conn:
        row = conn.execute("DELETE FROM api_tokens WHERE id = %s RETURNING id, org_id, kind, user_id, prefix",
                           (token_id,)).fetchone()
    if row is None:
        raise NotFound(f"unknown token {token_id}; `hostfinder admin token list` shows the tokens")
    return {"revoked": row}


def set_password(db: Database, *, email: str, password: str) -> dict[str, Any]:
    """Replace a user's password. The old one stops working at once on every gateway: the door
    checks a remembered login against the stored hash on each request, and the user's web
    sessions end with it."""
    _check_password(password)
    with db.transaction() as conn:
        row = conn.execute("UPDATE users SET password_hash = %s WHERE lower(email) = lower(%s) RETURNING id, email",
                           (hash_password(password), email)).fetchone()
        if row is not None:
            sessions.end_for_user(conn, row["id"])
    if row is None:
        raise NotFound(f"no user has the email {email}")
    return {**row, "password_changed": True}


def remove_member(db: Database, *, org_id: int, email: str) -> dict[str, Any]:
    """End a user's membership of an organisation, and with it their member tokens there (the
    tokens' foreign key cascades). The door reads memberships on every request, so the
    organisation disappears from the user's view at once on every gateway."""
    with db.transaction() as conn:
        user = conn.execute("SELECT id, email FROM users WHERE lower(email) = lower(%s)", (email,)).fetchone()
        if user is None:
            raise NotFound(f"no user has the email {email}")
        tokens = conn.execute("SELECT count(*) AS n FROM api_tokens WHERE org_id = %s AND user_id = %s",
                              (org_id, user["id"])).fetchone()["n"]
        gone = conn.execute("DELETE FROM memberships WHERE org_id = %s AND user_id = %s RETURNING org_id",
                            (org_id, user["id"])).fetchone()
        if gone is None:
            raise NotFound(f"{email} is not a member of organisation {org_id}")
    return {"org_id": org_id, "user_id": user["id"], "email": user["email"], "removed": True,
            "tokens_revoked": tokens}


def _tree_path(text: str) -> str:
    """A path as a person pastes it: org/1/x.md, /dav/org/1/x.md, or a WebDAV URL (its name
    percent-encoded) all name the tree path org/1/x.md, where the locks are kept."""
    text = text.strip()
    if "://" in text:
        text = unquote(urlsplit(text).path)
    path = text.strip("/")
    return path[len("dav/"):] if path.startswith("dav/") else "" if path == "dav" else path


def list_locks(db: Database, *, under: str = "") -> dict[str, Any]:
    """The WebDAV locks now held on ``under`` (a tree path such as org/1/guilds/2), below it, or
    on a folder above it with depth infinity (every lock for ""): who holds each, where and until
    when (never its token)."""
    with db.connection() as conn:
        held = locks.under(conn, _tree_path(under))
    return {"locks": [{"path": lease["path"], "holder": lease.get("principal"), "depth": lease.get("depth"),
                       "scope": lease.get("scope"), "until": lease["expires_at"]} for lease in held]}


def remove_locks(db: Database, *, path: str) -> dict[str, Any]:
    """End the WebDAV locks on ``path`` and below it: an abandoned lock (a client that crashed
    while it held one, a cadaver session's infinite lock) otherwise stops the mount and the web
    app from changing the note until it expires. Every gateway learns it at once (sql/060)."""
    path = _tree_path(path)
    if not path:
        raise Invalid("give the path of a locked file or folder, such as org/1/guilds/2/notes.md; "
                      "see `hostfinder admin lock list`")
    with db.transaction() as conn:
        removed = locks.clear(conn, path)
    return {"removed": removed, "path": path}


def create_run(db: Database, *, agent_id: int, kind: str, status: str = "running",
               routine: str | None = None, within: frozenset[int] | None = None) -> dict[str, Any]:
    """Open a run of ``agent_id``. ``within``: the organisations the caller may reach (an agent
    outside them is unknown); None for the administrator's command line."""
    _check_run_fields(kind=kind, status=status, routine=routine)
    with db.transaction() as conn:
        agent = conn.execute("SELECT org_id FROM agents WHERE id = %s", (agent_id,)).fetchone()
        if agent is None or (within is not None and agent["org_id"] not in within):
            raise NotFound(f"unknown agent {agent_id}")
        schedule_id = None
        if routine:
            schedule_id = conn.execute(
                "INSERT INTO schedules (org_id, agent_id, name) VALUES (%s, %s, %s)"
                " ON CONFLICT (agent_id, name) DO UPDATE SET name = EXCLUDED.name RETURNING id",
                (agent["org_id"], agent_id, routine)).fetchone()["id"]
        row = conn.execute("INSERT INTO runs (org_id, agent_id, kind, status, schedule_id)"
                           " VALUES (%s, %s, %s, %s, %s) RETURNING id, org_id, agent_id, kind, status, created_at",
                           (agent["org_id"], agent_id, kind, status, schedule_id)).fetchone()
    return {**row, "routine": routine}


def set_run(db: Database, run_id: int, *, status: str, within: frozenset[int] | None = None) -> dict[str, Any]:
    """Move a run to ``status``; the run as create_run returns it."""
    _check_run_fields(status=status)
    with db.transaction() as conn:
        row = conn.execute("UPDATE runs SET status = %s, updated_at = now() WHERE id = %s"
                           " AND (%s::bigint[] IS NULL OR org_id = ANY(%s::bigint[]))"
                           " RETURNING id, org_id, agent_id, kind, status, created_at,"
                           " (SELECT name FROM schedules s WHERE s.id = runs.schedule_id) AS routine",
                           (status, run_id, _ids(within), _ids(within))).fetchone()
        if row is None:
            raise NotFound(f"unknown run {run_id}")
        return row


def _ids(within: frozenset[int] | None) -> list[int] | None:
    return None if within is None else sorted(within)


def run_problems(*, kind: object = "chat", status: object = "running", routine: object = None) -> list[str]:
    """Every problem of a run's fields (they may come from an HTTP body, whose other problems
    api/runs.py lists beside these)."""
    problems = []
    if kind not in RUN_KINDS:
        problems.append(f"kind {shown(kind)} is not one of {', '.join(RUN_KINDS)}")
    if status not in RUN_STATUSES:
        problems.append(f"status {shown(status)} is not one of {', '.join(RUN_STATUSES)}")
    if routine is not None and not (isinstance(routine, str) and 1 <= len(routine) <= 200):
        problems.append("routine must be the schedule's name, 1 to 200 characters")
    return problems


def run_rejected(problems: list[str]) -> Invalid:
    return rejected("run rejected", problems)


def _check_run_fields(*, kind: object = "chat", status: object = "running", routine: object = None) -> None:
    if problems := run_problems(kind=kind, status=status, routine=routine):
        raise run_rejected(problems)


def bootstrap(db: Database, *, org_name: str = "Bootstrap", email: str | None = None,
              password: str | None = None) -> dict[str, Any]:
    """An organisation with a guild, an agent (default note grants), a member with a password, a
    member token and a service token: what tests and scripts start from."""
    # None: generate one; an empty string given on purpose is refused by create_user as any other.
    email = f"operator-{secrets.token_hex(4)}@example.com" if email is None else email
    password = secrets.token_urlsafe(12) if password is None else password
    org_name = _name(org_name, "organisation")
    _check_email(email)  # before anything is created: a refusal leaves no half-made organisation
    _check_password(password)
    org = create_org(db, name=org_name)
    guild = create_guild(db, org_id=org["id"], name="Research")
    agent = create_agent(db, org_id=org["id"], guild_id=guild["id"], name="Scout")
    user = create_user(db, email=email, password=password)
    add_member(db, org_id=org["id"], email=email)
    member = create_token(db, org_id=org["id"], member_email=email)
    service = create_token(db, org_id=org["id"], service=True)
    return {"org_id": org["id"], "guild_id": guild["id"], "agent_id": agent["id"], "user_id": user["id"],
            "email": email, "password": password, "member_token": member["token"],
            "service_token": service["token"]}


def _require(conn: Conn, table: str, row_id: int, what: str) -> None:
    # table names come from this module only
    if conn.execute(f"SELECT 1 FROM {table} WHERE id = %s", (row_id,)).fetchone() is None:
        raise NotFound(f"unknown {what} {row_id}")


def _name(name: str, what: str) -> str:
    """A name as a person gives it, trimmed: 1 to 200 characters (the tables' CHECK), refused with
    a sentence rather than PostgreSQL's constraint text."""
    name = name.strip()
    if not 1 <= len(name) <= 200:
        msg = f"give the {what} a name of 1 to 200 characters; got {len(name)}"
        raise Invalid(msg, [msg])
    return name


def _check_email(email: str) -> None:
    if "@" not in email[1:]:
        raise Invalid(f"{email!r} is not an email address", ["email: expected an address such as ada@example.com"])


def _check_password(password: str) -> None:
    if len(password) < 8:
        raise Invalid("the password is too short: use at least 8 characters", ["password: at least 8 characters"])


def _check_flags(flags: dict[str, Any]) -> None:
    bad = [k for k in flags if k not in GRANT_FLAGS]
    if bad:
        raise rejected("grant flags rejected", [f"{k}: unknown flag; the flags are {', '.join(GRANT_FLAGS)}"
                                                for k in bad])

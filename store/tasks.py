"""The standing task: agents.task, the operator's, exposed as task.md. No agent tool writes it.

    read_task(conn, org_id, agent_id) -> dict
        {display_path, task, version, updated_at, updated_by}; NotFound for an agent outside org_id.
    write_task(conn, org_id, agent_id, text, actor, *, if_version=None) -> dict
        Saves the text as sent (256 KB cap, one version up); a text that embeds a memory is
        refused (Invalid, every such embed named: memory is private), keeps the previous text in
        task_revisions (at most 50 per agent, the oldest dropped; not when it is the text saved
        now, so an editor saving unchanged text cannot push real earlier saves out) and records
        the change. The paths the new text embeds are locked shared (store.embeds) so that a note
        delete or move checking its embeds waits for this save and then sees it.
    task_revisions(conn, org_id, agent_id) -> list[dict]
        The kept previous saves, newest first: {version, task, saved_at, saved_by}.
    save_as_member(db, principal, agent_id, text, *, if_version=None) -> dict
        write_task in its own transaction, for a member of the agent's organisation (the task
        routes); text_of(body) is the task a JSON body {"task": "..."} sends.
"""
from __future__ import annotations

from store import embeds, locks
from store.access import Actor, Principal
from store.agents import load_agent
from store.db import Conn, Database
from store.errors import Invalid, NotFound, PreconditionFailed, rejected
from store.storage import check_content
from store.paths import task_path
from store.provenance import record_change
from store.values import shown

MAX_REVISIONS = 50

_SAVE = """
WITH cur AS (SELECT id, task, task_version, task_updated_at, task_updated_by FROM agents
              WHERE id = %(agent_id)s AND org_id = %(org_id)s FOR UPDATE),
     ok AS (SELECT * FROM cur WHERE %(if_version)s::int IS NULL OR task_version = %(if_version)s::int),
     kept AS (INSERT INTO task_revisions (agent_id, task, version, saved_at, saved_by)
              SELECT id, task, task_version, task_updated_at, task_updated_by FROM ok
               WHERE task_version > 0 AND task IS DISTINCT FROM %(text)s),
     upd AS (UPDATE agents a SET task = %(text)s, task_version = ok.task_version + 1,
                    task_updated_at = clock_timestamp(), task_updated_by = %(by)s
               FROM ok WHERE a.id = ok.id
             RETURNING a.task, a.task_version, a.task_updated_at, a.task_updated_by)
SELECT (SELECT task_version FROM cur) AS current_version, upd.*
  FROM (VALUES (1)) AS v LEFT JOIN upd ON true
"""


def _result(org_id: int, agent_id: int, row: dict) -> dict:
    return {"display_path": task_path(org_id, agent_id), "task": row["task"], "version": row["task_version"],
            "updated_at": row["task_updated_at"], "updated_by": row["task_updated_by"]}


def read_task(conn: Conn, org_id: int, agent_id: int) -> dict:
    row = conn.execute("SELECT task, task_version, task_updated_at, task_updated_by FROM agents"
                       " WHERE id = %s AND org_id = %s", (agent_id, org_id)).fetchone()
    if row is None:
        raise NotFound(f"unknown agent {agent_id}")
    return _result(org_id, agent_id, row)


def write_task(conn: Conn, org_id: int, agent_id: int, text: str, actor: Actor, *,
               if_version: int | None = None, honour_leases: bool = False) -> dict:
    """Save the standing task (one revision, its provenance row and event). ``honour_leases``: a
    caller holding no WebDAV lock token (the web app's task editor) is refused with Locked while
    task.md is locked by a WebDAV client, as notes.write_note refuses a note's."""
    if honour_leases:  # first: a locked task.md says so, whatever the text sent
        locks.refuse_if_leased(conn, task_path(org_id, agent_id))
    # Kept as sent (a client reading it back must find its bytes): an embed typed in NFD (macOS)
    # is still found by a note's delete, which compares NFC forms (store.embeds.embedding_tasks).
    text = check_content(text, "the task")
    embedded = embeds.find_embeds(text)
    problems = embeds.private_embed_problems(org_id, embedded) + embeds.reach_problems(conn, org_id, agent_id, embedded)
    if problems:
        raise rejected("task rejected", problems)
    embeds.lock_for_task(conn, embedded)
    row = conn.execute(_SAVE, {"agent_id": agent_id, "org_id": org_id, "if_version": if_version,
                               "text": text, "by": actor.name}).fetchone()
    current = row.pop("current_version")
    if current is None:
        raise NotFound(f"unknown agent {agent_id}")
    if row["task_version"] is None:
        raise PreconditionFailed(f"{task_path(org_id, agent_id)} is at version {current}, not {if_version}: "
                                 "it changed since it was read; read it again and reapply the change")
    if current > 0:
        conn.execute("""DELETE FROM task_revisions WHERE agent_id = %(a)s AND id NOT IN (
                            SELECT id FROM task_revisions WHERE agent_id = %(a)s ORDER BY id DESC LIMIT %(n)s)""",
                     {"a": agent_id, "n": MAX_REVISIONS})
    record_change(conn, org_id=org_id, display_path=task_path(org_id, agent_id),
                  operation="update" if current > 0 else "create", version=row["task_version"], actor=actor)
    return _result(org_id, agent_id, row)


def task_revisions(conn: Conn, org_id: int, agent_id: int) -> list[dict]:
    rows = conn.execute(
        """SELECT r.version, r.task, r.saved_at, r.saved_by FROM task_revisions r
             JOIN agents a ON a.id = r.agent_id
            WHERE r.agent_id = %s AND a.org_id = %s ORDER BY r.id DESC""", (agent_id, org_id)).fetchall()
    if not rows and conn.execute("SELECT 1 FROM agents WHERE id = %s AND org_id = %s",
                                 (agent_id, org_id)).fetchone() is None:
        raise NotFound(f"unknown agent {agent_id}")
    return rows


def text_of(body: object) -> str:
    """The task a JSON body sends: {"task": "..."} and nothing else."""
    how = 'send the task as JSON {"task": "..."} or as the Markdown itself with Content-Type: text/markdown'
    if not isinstance(body, dict):
        raise Invalid(how, ["task: required (string)"])
    problems = [f'{k}: unknown field; the body is {{"task": "..."}}' for k in sorted(set(body) - {"task"})]
    if "task" not in body:
        problems.insert(0, "task: required (string)")
    elif not isinstance(body["task"], str):
        problems.insert(0, f"task: expected a string of Markdown; got {shown(body['task'])}")
    if problems:
        raise rejected(how, problems)
    return body["task"]


def save_as_member(db: Database, principal: Principal, agent_id: int, text: str, *,
                   if_version: int | None = None) -> dict:
    """Save the task of an agent of the member's organisations (NotFound for any other agent), as
    that member, in one transaction. (The HTTP API is not a file client: WebDAV locks do not stop
    it, as the README says; the web app's task editor passes honour_leases.)"""
    with db.transaction() as conn:
        agent = load_agent(conn, agent_id, principal.org_ids)
        return write_task(conn, agent.org_id, agent.id, text, principal.actor, if_version=if_version)

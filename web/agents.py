"""The agent's page (State): what a run of this agent is created from, and the operator's task.

    /agents/<id>                              the task (embeds expanded as State expands them) with
                                              its editor, revisions, memory with its history-archive,
                                              scripts, note grants, the collections it reaches
    /agents/<id>/task/revisions/<version>     one earlier save, diffed against the current task
    /agents/<id>/memory/history/<name>        one archived memory version, diffed against the current
    /agents/<id>/scripts/<name>               one script (read), with its provenance strip
    /agents/<id>/access                       POST: the agent's own row on one table (its Databases tab)
    /agents/<id>/embeds?q=                    the task editor's Insert box: notes and tables to embed, JSON

All store calls: store.state.get_state (the same projection as GET /api/agents/<id>/state),
store.tasks for the editor and revisions, store.memory, store.scripts and store.grants. An agent of
another organisation answers 404 (store.agents.load_agent).
"""
from __future__ import annotations

from typing import Any

from flask import Blueprint, jsonify, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from store import collections as colls
from store import embeds, grants, memory, orgs, scripts, tasks
from store import state as state_view
from store.agents import Agent, load_agent
from store.errors import Invalid, Locked, NotFound, PreconditionFailed, TooLarge
from store.paths import nfc
from web.errors import status_of
from web.forms import form_id, left_out, left_out_sentence
from web.notes import (as_stored, as_typed, diff_lines, embed_list, provenance, render_markdown, same_text,
                       size_problems)
from web.security import db, in_view, login_required, principal

bp = Blueprint("agents", __name__)

DONE = {"saved": "Task saved; the previous text is kept in the revisions.",
        "first": "Task saved. It is the task's first version: Revisions lists earlier texts from the next save on.",
        "unchanged": "Nothing changed, so nothing was saved.", "access": "Access saved."}


# What an access form that left a field out is told to send.
MODE_WORKS = "Send mode as read, write, none, or empty to follow the guild's mode."

# Paths the task editor's Insert box offers at once: on the page, and in each answer of its
# find (GET /agents/<id>/embeds?q=), which the box asks as the person types. What a task may embed
# (the agent's own notes, its guild's, the organisation's, 10 000 each, and its tables) is the
# store's rule (store.embeds.embed_choices, may_embed): what the box offers is found, not listed whole.
EMBED_CHOICES = 50


def _tables(reach: list[tuple[Any, str]]) -> list[str]:
    """The display paths of the tables the agent reaches (store.grants.granted_collections)."""
    return [c.display_path for c, _mode in reach]


def _done(key: str, revisions: list[dict[str, Any]]) -> str | None:
    """The sentence for ?done=: a first save keeps no earlier text (there was none), so it does
    not say the previous text is in the revisions."""
    return DONE.get("first" if key == "saved" and not revisions else key)


def _agent(conn: Any, agent_id: int) -> Agent:
    agent = load_agent(conn, agent_id, principal().org_ids)
    in_view(agent.org_id)
    return agent


def _page(agent_id: int, *, status: int = 200, editor_text: str | None = None, editor_version: int | None = None,
          **extra: Any) -> ResponseReturnValue:
    with db().connection() as conn:
        agent = _agent(conn, agent_id)
        st = state_view.get_state(conn, agent)
        revisions = tasks.task_revisions(conn, agent.org_id, agent.id)
        history = memory.list_history(conn, agent.org_id, agent.id)
        script_rows = scripts.list_scripts(conn, agent.org_id, agent.id)
        reach = grants.granted_collections(conn, agent)
        access = colls.access_rows(conn, agent.org_id, agent.guild_id, agent.id)
        task_strip = provenance(conn, st["task"]["display_path"])
        memory_strip = provenance(conn, st["memory"]["display_path"], param="mbefore")
        task_embeds = embed_list(conn, agent.org_id, st["task"]["raw"])
        embed_problems = embeds.task_embed_problems(conn, agent, st["task"]["raw"])
        choices, more_choices = embeds.embed_choices(conn, agent, _tables(reach), limit=EMBED_CHOICES)
        guild = next((g for g in orgs.directory(conn, principal(), agent.org_id)["guilds"]
                      if g["id"] == agent.guild_id), None)
    task = st["task"]
    done = request.args.get("done", "")
    return render_template(
        "agents/state.html", nav="notes", agent=agent, guild=guild, st=st, task=task,
        task_html=render_markdown(task["text"]), task_embeds=task_embeds, embed_problems=embed_problems,
        memory_html=render_markdown(st["memory"]["content"]), revisions=revisions, history=history,
        scripts=script_rows, collections=reach, access=access, task_strip=task_strip, memory_strip=memory_strip,
        editor_text=task["raw"] if editor_text is None else editor_text, unsaved=editor_text is not None,
        editor_version=task["version"] if editor_version is None else editor_version,
        embed_choices=choices, embed_choices_cut=more_choices,
        task_page_url=lambda before: url_for("agents.state", agent_id=agent.id, hbefore=before),
        memory_page_url=lambda before: url_for("agents.state", agent_id=agent.id, mbefore=before),
        # Access saved is said in the Databases section the redirect opens (#collections): at the
        # top of the page it was out of sight.
        done=None if done == "access" else _done(done, revisions),
        access_done=DONE["access"] if done == "access" else None, **extra), status


@bp.get("/agents/<int:agent_id>")
@login_required
def state(agent_id: int) -> ResponseReturnValue:
    return _page(agent_id)


@bp.get("/agents/<int:agent_id>/embeds")
@login_required
def find_embeds(agent_id: int) -> ResponseReturnValue:
    """The Insert box's find, as JSON: {q, paths, more, exact}. ``paths``: at most EMBED_CHOICES
    notes and tables the task may embed whose display path holds q (any case), in
    store.embeds.embed_choices' order; ``more``: there are others (typing more narrows them); ``exact``: q itself is one of
    them, whether listed or not, so the box inserts a path typed whole."""
    find = nfc(request.args.get("q", "").strip())[:300]
    with db().connection() as conn:
        agent = _agent(conn, agent_id)
        tables = _tables(grants.granted_collections(conn, agent))
        paths, more = embeds.embed_choices(conn, agent, tables, find, limit=EMBED_CHOICES)
        exact = bool(find) and (find in paths or embeds.may_embed(conn, agent, tables, find))
    return jsonify({"q": find, "paths": paths, "more": more, "exact": exact})


@bp.post("/agents/<int:agent_id>/access")
@login_required
def save_access(agent_id: int) -> ResponseReturnValue:
    """The agent's own row on one table: read, write, none, or '' to inherit its guild's mode (the
    same rules as PUT /api/agents/<id>/collection-access)."""
    if missing := left_out("mode"):
        # (A mode left out is no wish to remove the agent's own row: a browser always sends the select.)
        return _page(agent_id, status=400, error=left_out_sentence(missing, MODE_WORKS),
                     problems=[f"{name}: missing from the form" for name in missing])
    try:
        body = {"collection_id": form_id("collection_id"), "mode": request.form["mode"] or None}
        colls.set_agent_access(db(), principal(), agent_id, body)
    except Invalid as exc:
        return _page(agent_id, status=status_of(exc), error=exc.head, problems=exc.problems)
    return redirect(url_for("agents.state", agent_id=agent_id, done="access") + "#collections")


def _version_field() -> int:
    raw = request.form.get("version", "").strip()
    if not (raw.isascii() and raw.isdigit() and len(raw) < 10):
        msg = "the form did not say which version of the task the editor started from; reload and try again"
        raise Invalid(msg, [f"version: a whole number; got {raw!r}"])
    return int(raw)


@bp.get("/agents/<int:agent_id>/task")
@login_required
def task_page(agent_id: int) -> ResponseReturnValue:
    """Where a refused save's page (served at the POST's URL) leads back to, as after a login:
    the State page's task editor."""
    return redirect(url_for("agents.state", agent_id=agent_id) + "#task")


@bp.post("/agents/<int:agent_id>/task")
@login_required
def save_task(agent_id: int) -> ResponseReturnValue:
    # The task is kept as sent (PUT /api/agents/<id>/task keeps CRLF): the editor's text, which the
    # browser sends with CRLF whatever the task had, is compared as the browser holds it and saved
    # with the stored task's line breaks and byte order mark (web.notes.as_stored).
    if missing := left_out("task"):  # (a version left out is _version_field's refusal)
        # (A form without its text is no wish to empty the task: a browser always sends the
        # textarea, empty or not. Nothing is saved, and the task is shown as it is.)
        msg = left_out_sentence(missing, "Send the task's whole text in task (empty to empty it) and, in version, the"
                                       " version it was edited from; reload the page and save again.")
        return _page(agent_id, status=400, error=msg, problems=[f"{name}: missing from the form" for name in missing])
    typed = request.form["task"]
    text = as_typed(typed)
    opened = _version_field()
    stored: str | None = None
    try:
        with db().transaction() as conn:
            agent = _agent(conn, agent_id)
            current = tasks.read_task(conn, agent.org_id, agent.id)
            stored = current["task"]
            if current["version"] == opened and same_text(typed, stored or ""):
                return redirect(url_for("agents.state", agent_id=agent_id, done="unchanged") + "#task")
            tasks.write_task(conn, agent.org_id, agent.id, as_stored(typed, stored), principal().actor,
                             if_version=opened, honour_leases=True)  # not while a WebDAV client holds it
    except PreconditionFailed:
        with db().connection() as conn:
            agent = _agent(conn, agent_id)
            theirs = tasks.read_task(conn, agent.org_id, agent.id)
        conflict = {"opened": opened, "mine": text, "theirs": theirs,
                    "diff": diff_lines(theirs["task"], text, old_name=f"current (v{theirs['version']})",
                                       new_name=f"yours (from v{opened})")}
        return _page(agent_id, status=409, editor_text=text, editor_version=theirs["version"], conflict=conflict)
    except (Invalid, TooLarge, Locked) as exc:
        problems = [*exc.problems, *size_problems(stored)] if isinstance(exc, TooLarge) else exc.problems
        return _page(agent_id, status=status_of(exc), editor_text=text, editor_version=opened,
                     error=exc.head, problems=problems)
    return redirect(url_for("agents.state", agent_id=agent_id, done="saved") + "#task")


@bp.get("/agents/<int:agent_id>/task/revisions/<int:version>")
@login_required
def task_revision(agent_id: int, version: int) -> ResponseReturnValue:
    with db().connection() as conn:
        agent = _agent(conn, agent_id)
        current = tasks.read_task(conn, agent.org_id, agent.id)
        revisions = tasks.task_revisions(conn, agent.org_id, agent.id)
    revision = next((r for r in revisions if r["version"] == version), None)
    if revision is None:
        raise NotFound(f"unknown revision {version} of {current['display_path']}: the task keeps its "
                       f"{tasks.MAX_REVISIONS} most recent earlier saves")
    lines = diff_lines(revision["task"], current["task"], old_name=f"revision v{version}",
                       new_name=f"current v{current['version']}")
    return render_template("agents/revision.html", nav="notes", agent=agent, revision=revision, current=current,
                           diff_rows=lines, revisions=revisions)


@bp.get("/agents/<int:agent_id>/memory/history/<name>")
@login_required
def memory_version(agent_id: int, name: str) -> ResponseReturnValue:
    with db().connection() as conn:
        agent = _agent(conn, agent_id)
        old = memory.read_history(conn, agent.org_id, agent.id, name)
        current = memory.read_memory(conn, agent.org_id, agent.id)
    current_text = current["content"] if current else ""
    lines = diff_lines(old["content"] or "", current_text, old_name=name,
                       new_name=f"memory.md (v{current['version'] if current else 0})")
    return render_template("agents/memory_version.html", nav="notes", agent=agent, old=old, current=current,
                           diff_rows=lines, html=render_markdown(old["content"] or ""))


@bp.get("/agents/<int:agent_id>/scripts/<name>")
@login_required
def script(agent_id: int, name: str) -> ResponseReturnValue:
    with db().connection() as conn:
        agent = _agent(conn, agent_id)
        row = scripts.get_script(conn, agent.org_id, agent.id, name)
        if row is None:
            raise NotFound(f"unknown script {name} of agent {agent.name}")
        strip = provenance(conn, row["display_path"])
    return render_template("agents/script.html", nav="notes", agent=agent, script=row, provenance=strip,
                           page_url=lambda before: url_for("agents.script", agent_id=agent.id, name=name, hbefore=before))

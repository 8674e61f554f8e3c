"""The notes browser: the organisation's scopes side by side (the organisation, each guild, each
agent), a note rendered with its embeds expanded as State expands them, its editor, new, rename
and delete, and the provenance strip with its paged History.

Every rule is the store's: reads through store.notes and store.files (the same functions the
/api/file-changes routes use), saves through store.notes.write_note with the version the editor
started from (so a save over a newer version is refused, never a silent overwrite), and renames
and deletes through the Host tree, exactly as a WebDAV client's (the embed refusal, dead
properties and locks follow the note). A note's URL is its display path: /notes/org/1/plan.md.
"""
from __future__ import annotations

import difflib
from datetime import datetime, timedelta, timezone
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote

from flask import Blueprint, abort, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.token import Token
from markdown_it.utils import EnvType, OptionsDict
from markupsafe import Markup

from store import collections as colls
from store import embeds, files, notes, orgs
from store.errors import (AlreadyExists, Embedded, Invalid, LimitReached, Locked, NotANote, NotFound,
                          PreconditionFailed, StoreError, TooLarge)
from store.host import HostTree
from store.paths import Target, check_note_key, new_note_problem, nfc, note_path, parse
from web.errors import status_of
from web.forms import left_out, left_out_sentence, page_arg
from web.provenance import strip as provenance
from web.security import db, in_view, login_required, principal, session

bp = Blueprint("notes", __name__)

SCOPE_PREVIEW = 100               # notes listed per scope on the overview
# Notes a page of one scope's list: the overview's preview, so the first page is the list the
# overview showed and its "all N notes" link goes on from there. About 55 KB of HTML and 1 100
# elements, 5 000 px on a desktop and 10 000 on a phone; a guild at the 10 000-note cap is 100
# pages, which the find box, not paging, is for.
PAGE_SIZE = SCOPE_PREVIEW
SORTS = {"name": "name", "changed": "last change, newest first"}  # ?sort= of one scope's list
NEW_WITHIN = timedelta(days=1)    # a note created this recently is marked new
REMOVED_WITHIN = timedelta(days=7)  # a note deleted or moved away this recently is listed as deleted
DONE = {"saved": "Saved.", "created": "Note created.", "renamed": "Renamed.", "deleted": "Note deleted.",
        "unchanged": "Nothing changed, so nothing was saved."}

# Raw HTML off: a note cannot inject markup into the operator's page. Tables as in GitHub Markdown.
_MD = MarkdownIt("commonmark", {"html": False}).enable("table")


def _image(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    """An image from this site or inline data as an image; one from elsewhere as a link to it.
    The page's policy (img-src 'self' data:) blocks other hosts' images, which would otherwise show
    as broken on every view, and loading them would tell those hosts who reads the note."""
    token = tokens[idx]
    src = token.attrGet("src") or ""
    if (src.startswith("/") and not src.startswith("//")) or src.startswith("data:image/"):
        return self.image(tokens, idx, options, env)
    alt = self.renderInlineAsText(token.children or [], options, env) or src
    return (f'<a class="outside-image" href="{escapeHtml(src)}" rel="noopener noreferrer">'
            f"image: {escapeHtml(alt)}</a>")


_MD.add_render_rule("image", _image)


def _link_open(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
    """A link to a display path (org/<id>/...: an embed that is shown as a link, a memory or an
    archived memory version, or one a note's author wrote) leads to that path's page; as written
    it was relative, and led to a 404 under the page's own path."""
    token = tokens[idx]
    href = token.attrGet("href") or ""
    if href.startswith("org/"):
        try:
            page = page_of(unquote(href))
        except RuntimeError:  # (rendered outside a request: no page addresses to give)
            page = None
        if page is not None:
            token.attrSet("href", page)
    return self.renderToken(tokens, idx, options, env)


_MD.add_render_rule("link_open", _link_open)


def render_markdown(text: str) -> Markup:
    """Markdown as safe HTML (raw HTML is shown as text; markdown-it refuses javascript: links).
    A byte order mark at the start (a Windows editor's) is not text: it would hide a first heading."""
    return Markup(_MD.render(text.removeprefix("\ufeff")))


def diff_lines(old: str, new: str, *, old_name: str, new_name: str) -> list[tuple[str, str]]:
    """A unified diff as (kind, line) pairs, kind one of head, hunk, add, del, same; the template
    escapes every line."""
    out: list[tuple[str, str]] = []
    for line in difflib.unified_diff(old.splitlines(), new.splitlines(), old_name, new_name, lineterm=""):
        if line.startswith(("---", "+++")):
            kind = "head"
        elif line.startswith("@@"):
            kind = "hunk"
        elif line.startswith("+"):
            kind = "add"
        elif line.startswith("-"):
            kind = "del"
        else:
            kind = "same"
        out.append((kind, line))
    return out


def human_size(size: int | None) -> str:
    size = int(size or 0)
    if size < 1024:
        return f"{size} B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f} KB"
    return f"{size / 1024 / 1024:.1f} MB"


@bp.app_template_filter("short_when")
def _short_when(value: Any) -> Markup:
    """A listing's timestamp in the format of every other time in the app (2026-12-01 00:53:04 UTC),
    to the minute; the seconds are in the cell's title. A narrow column wraps it between the date
    and the clock, nowhere else (a bare "00:53" said neither the day nor the zone)."""
    if not isinstance(value, datetime):
        return Markup("")
    value = value.astimezone(timezone.utc)
    return Markup('<time datetime="{}"><span class="day">{}</span> <span class="clock">{} UTC</span></time>').format(
        value.strftime("%Y-%m-%dT%H:%M:%SZ"), value.strftime("%Y-%m-%d"), value.strftime("%H:%M"))


@bp.app_template_filter("filesize")
def _size_filter(size: int | None) -> str:
    return human_size(size)


# --- text as the browser's editor holds it ---------------------------------------------------------

BOM = "\ufeff"


def as_typed(text: str) -> str:
    """Text as a browser's textarea holds it: every line break LF (a form sends CRLF, and a
    textarea turns the stored CRLF or lone CR into LF)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def line_ending(text: str) -> str:
    """The line break a text mostly uses: CRLF, CR or LF (LF when it has none, or as many of each)."""
    crlf = text.count("\r\n")
    cr, lf = text.count("\r") - crlf, text.count("\n") - crlf
    if crlf > lf and crlf >= cr:
        return "\r\n"
    return "\r" if cr > lf and cr > crlf else "\n"


def same_text(typed: str, stored: str) -> bool:
    """Whether what an editor sent is the stored text, compared as the browser can represent it:
    line breaks and a byte order mark at the start (invisible in a textarea) do not count."""
    return as_typed(typed).removeprefix(BOM) == as_typed(stored).removeprefix(BOM)


def as_stored(typed: str, stored: str | None) -> str:
    """What an editor's text is saved as over ``stored`` (None: a new file): with the stored
    text's line breaks (a file written with CRLF by a Windows editor keeps CRLF, LF stays LF) and
    its byte order mark if it had one; a new file's lines end with LF."""
    text = as_typed(typed)
    if stored is None:
        return text
    eol = line_ending(stored)
    if eol != "\n":
        text = text.replace("\n", eol)
    if stored.startswith(BOM) and not text.startswith(BOM):
        text = BOM + text
    return text


def size_problems(stored: str | None) -> list[str]:
    """Why a text the editor shows is larger once stored: the file's CRLF line breaks, its BOM."""
    out = []
    if stored is not None and line_ending(stored) == "\r\n":
        out.append("This file keeps the Windows line breaks (CRLF) it was written with, so each line break "
                   "counts two bytes; the size above is the size it would be stored at.")
    if stored is not None and stored.startswith(BOM):
        out.append("This file starts with a byte order mark, which it keeps; it counts three bytes.")
    return out


# --- where a URL points -----------------------------------------------------------------------------

def note_target(display_path: str) -> Target:
    """The note a URL names, or NotFound (another organisation's path reads as unknown). The
    standing task, memory, a script and an archived memory version live on the agent's pages, and
    a table and a record on the Databases page, so their paths go there (as a display path typed
    after /notes/ would otherwise end in a 404)."""
    target = parse(display_path)
    principal().require_org(target.org_id, f"note {display_path}")
    in_view(target.org_id)
    if target.family in ("task", "memory", "script", "history"):
        abort(redirect(page_of(target.path) or url_for("agents.state", agent_id=target.owner_id)))
    if target.family in ("collection", "record"):  # the Databases page's, while the table is there
        with db().connection() as conn:
            url = pages_of(conn, [target.path])[target.path]
        if url is not None:
            abort(redirect(url))
    if target.family != "note":
        raise NotFound(f"unknown note {display_path}: the notes browser shows notes; scripts and memory are on "
                       "the agent's page, records on the Databases page")
    return target


def note_url(display_path: str, **args: Any) -> str:
    return url_for("notes.note", display_path=display_path, **args)


def task_links(task_paths: list[str]) -> list[dict[str, Any]]:
    """Each embedding task as a link to its agent's page (the task editor)."""
    out = []
    for path in task_paths:
        try:
            agent_id = parse(path).owner_id
        except StoreError:
            continue
        out.append({"path": path, "url": url_for("agents.state", agent_id=agent_id) + "#task"})
    return out


# --- scopes -----------------------------------------------------------------------------------------

def _scope_key(level: str, owner_id: int | None) -> str:
    return "org" if level == "org" else f"{level}-{owner_id}"


def parse_scope(raw: str, directory: dict[str, list[dict[str, Any]]]) -> tuple[str, int | None]:
    """(level, owner_id) from a scope key (org, guild-<id>, agent-<id>) of this organisation, or
    Invalid saying what a scope is."""
    raw = (raw or "").strip()
    if raw == "org":
        return "org", None
    level, _, ident = raw.partition("-")
    known = {"guild": {g["id"] for g in directory["guilds"]}, "agent": {a["id"] for a in directory["agents"]}}
    if level in known and ident.isascii() and ident.isdigit() and len(ident) < 19 and int(ident) in known[level]:
        return level, int(ident)
    msg = f"scope {raw!r} is not one of this organisation's scopes: choose the organisation, a guild or an agent"
    raise Invalid(msg, [f"scope: {msg}"])


def _scope_list(org_id: int, directory: dict[str, Any]) -> list[dict[str, Any]]:
    """The organisation's scopes in order (organisation, guilds, agents), without their notes."""
    guild_names = {g["id"]: g["name"] for g in directory["guilds"]}
    out = [{"key": "org", "level": "org", "owner_id": None, "title": "Organisation", "agent_id": None,
            "prefix": f"org/{org_id}/", "subtitle": "shared with every agent that reads organisation notes"}]
    for g in directory["guilds"]:
        out.append({"key": f"guild-{g['id']}", "level": "guild", "owner_id": g["id"], "title": g["name"],
                    "agent_id": None, "prefix": f"org/{org_id}/guilds/{g['id']}/", "subtitle": "guild"})
    for a in directory["agents"]:
        out.append({"key": f"agent-{a['id']}", "level": "agent", "owner_id": a["id"], "title": a["name"],
                    "agent_id": a["id"], "prefix": f"org/{org_id}/agents/{a['id']}/",
                    "subtitle": f"agent of {guild_names.get(a['guild_id'], 'guild ' + str(a['guild_id']))}"})
    for s in out:
        s["notes"], s["removed"], s["count"] = [], [], 0
    return out


def _marked(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Live notes, each marked new when created within NEW_WITHIN."""
    now = datetime.now(timezone.utc)
    return [{**n, "new": now - n["created_at"] < NEW_WITHIN} for n in rows]


def _removed(conn: Any, org_id: int) -> list[dict[str, Any]]:
    """The organisation's notes deleted or moved away within REMOVED_WITHIN (a bounded query)."""
    return files.removed_notes(conn, principal().org_ids, org_id,
                               since=datetime.now(timezone.utc) - REMOVED_WITHIN)


def _place_removed(all_scopes: list[dict[str, Any]], removed: list[dict[str, Any]]) -> None:
    by_key = {s["key"]: s for s in all_scopes}
    for r in removed:
        scope = by_key.get(_scope_key(r["level"], r["owner_id"]))
        if scope is not None:
            scope["removed"].append(r)


def scopes(conn: Any, org_id: int) -> list[dict[str, Any]]:
    """The overview: the organisation's scopes in order, each with its count of live notes, its
    first SCOPE_PREVIEW of them by name and its recently removed ones. Three queries whatever the
    number of notes, scopes or agents, each reading only what the page shows."""
    directory = orgs.directory(conn, principal(), org_id)
    out = _scope_list(org_id, directory)
    by_key = {s["key"]: s for s in out}
    for owner in notes.first_notes(conn, org_id, guild_ids=[g["id"] for g in directory["guilds"]],
                                   agent_ids=[a["id"] for a in directory["agents"]], limit=SCOPE_PREVIEW):
        scope = by_key[_scope_key(owner["level"], owner["owner_id"])]
        scope["notes"], scope["count"] = _marked(owner["notes"]), owner["count"]
    _place_removed(out, _removed(conn, org_id))
    return out


def _list_url(**changes: Any) -> str:
    """This list's URL with some parameters changed (None drops one; an empty find and the
    default sort are left out, so the first page of a plain list is /notes?scope=...)."""
    args = {k: request.args.get(k, "").strip() for k in ("scope", "q", "sort", "page")}
    args.update(changes)
    return url_for("notes.index", **{k: v for k, v in args.items()
                                     if v not in (None, "") and not (k == "sort" and v == "name")})


def _one_scope(org_id: int, key: str) -> ResponseReturnValue:
    """One scope's list: a page of PAGE_SIZE notes, found by name (?q=, any case, anywhere in the
    name) and sorted by name or last change (?sort=changed), with its notes removed lately above
    it. Bounded queries: the count and one page on the owner's range of artifacts_live_owner."""
    find = nfc(request.args.get("q", "").strip())
    sort = request.args.get("sort", "").strip() or "name"
    page, page_problem = page_arg()
    problems = [page_problem] if page_problem else []
    if sort not in SORTS:
        problems.append(f"sort: expected name or changed; got {sort[:40]!r}")
        sort = "name"
    with db().connection() as conn:
        directory = orgs.directory(conn, principal(), org_id)
        scope = next((s for s in _scope_list(org_id, directory) if s["key"] == key), None)
        if scope is None:
            raise NotFound(f"unknown scope {key}: choose the organisation, one of its guilds or one of its agents")
        level, owner = scope["level"], scope["owner_id"]
        scope["count"] = notes.count_notes(conn, org_id, level, owner)
        matched = notes.count_notes(conn, org_id, level, owner, find=find) if find else scope["count"]
        pages = max(1, -(-matched // PAGE_SIZE))
        if not problems and page <= pages:
            scope["notes"] = _marked(notes.page_notes(conn, org_id, level, owner, find=find, order=sort,
                                                      limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE,
                                                      total=matched))
        removed = _removed(conn, org_id)
    _place_removed([scope], removed)
    folded = find.casefold()
    scope["removed"] = [r for r in scope["removed"] if folded in r["key"].casefold()]
    error = None
    if problems:
        # Not the first page in its place: the person would take it for the one they asked for.
        error = ("This address asks for a page or an order this list does not have: pages are numbered 1, 2, 3 "
                 "and so on, and a list is sorted by name or by last change (sort=changed).")
    html = render_template(
        "notes/index.html", nav="notes", scopes=[scope], single=True, total=scope["count"],
        done=_deleted_done([scope]), error=error, problems=problems, find=find, sort=sort, sorts=SORTS,
        page=page, pages=pages, matched=matched, page_size=PAGE_SIZE, list_url=_list_url,
        past_the_end=not problems and matched > 0 and page > pages)
    return html, 400 if problems else 200


@bp.get("/notes")
@login_required
def index() -> ResponseReturnValue:
    org_id = session().org_id
    only = request.args.get("scope", "").strip()
    if only:
        return _one_scope(org_id, only)
    with db().connection() as conn:
        all_scopes = scopes(conn, org_id)
    return render_template("notes/index.html", nav="notes", scopes=all_scopes, single=False,
                           total=sum(s["count"] for s in all_scopes),
                           done=_deleted_done(all_scopes))


def _deleted_done(all_scopes: list[dict[str, Any]]) -> str | None:
    """The sentence for ?done=: after a delete, the note it removed (?path=) named, when the list
    shows that path as deleted; else the plain sentence, which names no note."""
    done, path = request.args.get("done", ""), request.args.get("path", "")
    if done == "deleted":
        for s in all_scopes:
            for r in s["removed"]:
                if r["display_path"] == path and r["operation"] == "delete":
                    return f"Note {r['key']} deleted from {scope_phrase(s['level'], s['title'])}."
    return DONE.get(done)


# --- new note ---------------------------------------------------------------------------------------

def _key_from(raw: str) -> str:
    """The note key for what was typed: the name as given, with .md added when it does not end
    in .md, as the form promises. A dot elsewhere is part of the name ("Release 1.2", "Dr. Smith"),
    not an extension; a name ending in .MD is left as typed, for the store's key rule to judge.
    Blanks at either end are dropped: in a form field they are typing accidents (a phone keyboard
    adds a space after a word it completes), and the page then names the note it saved. WebDAV and
    the mount refuse such names instead, since a client there must find its file under the exact
    name it sent."""
    name = nfc(raw.strip())
    return name if not name or name.lower().endswith(".md") else name + ".md"


def _scope_choices(conn: Any, org_id: int, directory: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    directory = directory or orgs.directory(conn, principal(), org_id)
    return ([("org", "The organisation")] + [(f"guild-{g['id']}", f"Guild: {g['name']}") for g in directory["guilds"]]
            + [(f"agent-{a['id']}", f"Agent: {a['name']}") for a in directory["agents"]])


@bp.get("/notes/new")
@login_required
def new_note() -> ResponseReturnValue:
    with db().connection() as conn:
        choices = _scope_choices(conn, session().org_id)
    form = {"scope": request.args.get("scope", "org"), "name": "", "content": ""}
    return render_template("notes/new.html", nav="notes", form=form, choices=choices, error=None, problems=[])


@bp.post("/notes/new")
@login_required
def create_note() -> ResponseReturnValue:
    org_id = session().org_id
    form = {k: request.form.get(k, "") for k in ("scope", "name", "content")}
    content = form["content"].replace("\r\n", "\n")
    try:
        with db().transaction() as conn:
            level, owner_id = parse_scope(form["scope"], orgs.directory(conn, principal(), org_id))
            row = notes.write_note(conn, org_id, level, owner_id, _key_from(form["name"]), content,
                                   principal().actor, create_only=True, honour_leases=True)
    except (Invalid, AlreadyExists, TooLarge, Locked, LimitReached) as exc:  # the form again, as typed
        with db().connection() as conn:
            choices = _scope_choices(conn, org_id)
        error = exc.head
        if isinstance(exc, AlreadyExists):
            # (The store's sentence speaks to a tool call: "write without create-only".)
            error = (f"A note named {_key_from(form['name'])} already exists in this scope; choose another "
                     "name, or open that note to change it.")
        # (the field the refusal is about, for the form to show it there: most are the name's)
        field = ("content" if isinstance(exc, TooLarge) else "scope" if error.startswith("scope ")
                 else None if isinstance(exc, (Locked, LimitReached)) else "name")
        return render_template("notes/new.html", nav="notes", form=form, choices=choices,
                               error=error, problems=exc.problems, error_field=field), status_of(exc)
    return redirect(note_url(row["display_path"], done="created"))


# --- a note -----------------------------------------------------------------------------------------

def page_of(display_path: str) -> str | None:
    """The web app's page for a note, a task, a memory, a script or an archived memory version, or
    None (a table or record is found by its name, which a caller with a connection looks up)."""
    try:
        target = parse(display_path)
    except StoreError:
        return None
    if target.family == "note":
        return note_url(display_path)
    if target.family in ("task", "memory"):
        return url_for("agents.state", agent_id=target.owner_id) + f"#{target.family}"
    if target.family == "script":
        return url_for("agents.script", agent_id=target.owner_id, name=target.name)
    if target.family == "history":
        return url_for("agents.memory_version", agent_id=target.owner_id, name=target.name)
    return None


def pages_of(conn: Any, paths: Sequence[str]) -> dict[str, str | None]:
    """The web app's page of each display path: page_of's, and a table's or a record's (tables
    are found by name, one query per organisation); None for anything else (a table since
    removed, another organisation's)."""
    out: dict[str, str | None] = {}
    tables: dict[int, dict[str, int]] = {}
    for path in paths:
        url = page_of(path)
        if url is None:
            try:
                target: Target | None = parse(path)
            except StoreError:
                target = None
            if (target is not None and target.family in ("collection", "record")
                    and target.org_id in principal().org_ids):
                if target.org_id not in tables:
                    tables[target.org_id] = {c["name"]: c["id"]
                                             for c in colls.list_collections(conn, principal(), target.org_id)}
                cid = tables[target.org_id].get(target.name)
                if cid is not None and target.family == "collection":
                    url = url_for("databases.table", collection_id=cid)
                elif cid is not None:
                    url = url_for("databases.record", collection_id=cid, record_id=target.record_id)
        out[path] = url
    return out


GONE = {"delete": "deleted", "move": "moved away"}
# Families whose live file is a row files.latest falls back to: with no change and no row, the
# path names nothing. (A task or memory not written yet is still shown, empty, on its agent's page.)
_ROW_FAMILIES = ("note", "record", "script")


def gone_of(conn: Any, paths: Sequence[str], urls: dict[str, str | None]) -> dict[str, str]:
    """Which of ``paths`` name nothing now, as path -> "deleted", "moved away" or "missing", so
    a page shows them as text rather than as links to a 404. From files.latest (the newest
    change of each path, or its live row): one call per MAX_PATHS paths, not one per path.
    ``urls`` is pages_of's answer, which already knows whether a table's name is live."""
    org_ids = principal().org_ids
    ours = sorted({p for p in paths if files.path_org(p) in org_ids})
    latest: dict[str, dict | None] = {}
    for start in range(0, len(ours), files.MAX_PATHS):
        latest.update(files.latest(conn, org_ids, ours[start:start + files.MAX_PATHS]))
    out: dict[str, str] = {}
    for path, change in latest.items():
        try:
            family = parse(path).family
        except StoreError:
            continue
        if change is not None and change["operation"] in GONE:
            out[path] = GONE[change["operation"]]
        elif change is None and (family in _ROW_FAMILIES or (family == "collection" and urls.get(path) is None)):
            out[path] = "missing"
    return out


def link_of(path: str, url: str | None, gone: str | None) -> str | None:
    """Where a listed path links: its page; for a note deleted or moved away, the page of its old
    path, which says where it went and shows its History; for anything else gone, nowhere."""
    if gone is None:
        return url
    if gone in ("deleted", "moved away") and path.endswith(".md"):
        try:
            if parse(path).family == "note":
                return note_url(path)
        except StoreError:
            pass
    return None


def embed_list(conn: Any, org_id: int, text: str) -> list[dict[str, Any]]:
    """The paths a text embeds, each with a link to its page when it is a note, a task, a memory
    or a table of this organisation that is there now; one deleted, moved away or never written
    is marked so (a note gone links to what became of it)."""
    paths = embeds.find_embeds(text)
    urls = pages_of(conn, [p for p in paths if files.path_org(p) == org_id])
    gone = gone_of(conn, list(urls), urls)
    return [{"path": p, "url": link_of(p, urls.get(p), gone.get(p)), "gone": gone.get(p)} for p in paths]


def scope_phrase(level: str, name: str) -> str:
    """A scope in a sentence: the organisation, guild Research, agent Scout."""
    return "the organisation" if level == "org" else f"{level} {name}"


def _scope_phrase(target: Target, directory: dict[str, Any]) -> str:
    """``target``'s scope in a sentence, its owner named from ``directory``."""
    if target.level == "org":
        return scope_phrase("org", "")
    group = directory["guilds"] if target.level == "guild" else directory["agents"]
    return scope_phrase(target.level, next((x["name"] for x in group if x["id"] == target.owner_id),
                                           str(target.owner_id)))


def _note_done(key: str, target: Target, latest: dict[str, Any] | None, directory: dict[str, Any]) -> str | None:
    """The sentence for ?done=. After a rename it says from what, and after a move to another
    scope that it moved and where, read from the note's latest change (the move's arrival), so it
    is true even when the URL is reloaded or shared."""
    moved_from = latest.get("moved_from") if latest and key == "renamed" else None
    try:
        old = parse(moved_from) if moved_from else None
    except StoreError:
        old = None
    if old is None or old.family != "note":
        return DONE.get(key)
    if (old.level, old.owner_id) == (target.level, target.owner_id):
        return f"Renamed from {old.name}."
    renamed = f", renamed from {old.name}" if old.name != target.name else ""
    return f"Moved from {_scope_phrase(old, directory)} to {_scope_phrase(target, directory)}{renamed}."


def _scope_title(target: Target, directory: dict[str, Any]) -> tuple[str, str]:
    """(title, scope key) of the note's scope, for the breadcrumb; NotFound for an owner that is
    not of the organisation."""
    if target.level == "org":
        return "Organisation", "org"
    group = directory["guilds"] if target.level == "guild" else directory["agents"]
    name = next((x["name"] for x in group if x["id"] == target.owner_id), None)
    if name is None:
        raise NotFound(f"unknown {target.level} {target.owner_id}")
    return name, _scope_key(target.level, target.owner_id)


def _gone_page(conn: Any, target: Target, title: str, scope_key: str) -> ResponseReturnValue:
    """A 404 for a path where no note lives now. One that lived there (deleted, or moved away,
    which a History's "moved here from" links to) shows where it went and its History, back to
    its first change: a renamed note's earlier changes stay on its old path."""
    strip = provenance(conn, target.path)
    if strip["latest"] is None:
        raise NotFound(f"unknown note {target.path}: there is no note with that display path, and none was "
                       "ever recorded there")
    strip["open"] = True
    moved = files.moved_to(conn, principal().org_ids, target.path)
    return render_template(
        "notes/gone.html", nav="notes", target=target, provenance=strip, scope_title=title,
        scope_key=scope_key, moved_to=moved, moved_url=page_of(moved) if moved else None,
        page_url=lambda before: note_url(target.path, hbefore=before)), 404


def _note_page(target: Target, *, status: int = 200, editor_text: str | None = None,
               editor_version: int | None = None, **extra: Any) -> ResponseReturnValue:
    """The note page: rendered view, editor, strip. ``editor_text`` keeps what the person typed
    after a refusal; ``extra`` carries the refusal (error, conflict, embedded)."""
    with db().connection() as conn:
        directory = orgs.directory(conn, principal(), target.org_id)
        title, scope_key = _scope_title(target, directory)
        row = notes.get_note(conn, target.org_id, target.level, target.owner_id, target.name)
        if row is None and not extra.get("conflict") and editor_text is None:  # (a refused save keeps its text)
            return _gone_page(conn, target, title, scope_key)
        content = row["content"] or "" if row else ""
        rendered = render_markdown(embeds.expand_embeds(conn, target.org_id, content))
        links = embed_list(conn, target.org_id, content)
        strip = provenance(conn, target.path)
        used_by = task_links(embeds.embedding_tasks(conn, target.path)) if row else []
        choices = _scope_choices(conn, target.org_id, directory)
    return render_template(
        "notes/note.html", nav="notes", target=target, note=row, rendered=rendered, embed_links=links,
        provenance=strip, scope_title=title, scope_key=scope_key, used_by=used_by, choices=choices,
        editor_text=content if editor_text is None else editor_text, unsaved=editor_text is not None,
        editor_version=(row["version"] if row else 0) if editor_version is None else editor_version,
        page_url=lambda before: note_url(target.path, hbefore=before),
        done=_note_done(request.args.get("done", ""), target, strip["latest"], directory), **extra), status


@bp.get("/notes/<path:display_path>")
@login_required
def note(display_path: str) -> ResponseReturnValue:
    return _note_page(note_target(display_path))


def _version_field() -> int:
    raw = request.form.get("version", "").strip()
    if not (raw.isascii() and raw.isdigit() and len(raw) < 10):
        msg = ("the form did not say which version the editor started from (field version); "
               "reload the note and make the change again")
        raise Invalid(msg, [f"version: a whole number; got {raw!r}"])
    return int(raw)


@bp.post("/notes/<path:display_path>")
@login_required
def save(display_path: str) -> ResponseReturnValue:
    target = note_target(display_path)
    # Browsers send a textarea's lines with CRLF whatever the file had (and show a stored CRLF as
    # LF): the text is compared as the browser holds it, and saved with the note's own line breaks
    # and byte order mark, so the size the cap judges is the size stored.
    if missing := left_out("content"):  # (a version left out is _version_field's refusal)
        # (A form without its text is no wish to empty the note: a browser always sends the
        # textarea, empty or not. Nothing is saved, and the note is shown as it is.)
        with db().connection() as conn:
            row = notes.get_note(conn, target.org_id, target.level, target.owner_id, target.name)
        msg = left_out_sentence(missing, "Send the note's whole text in content (empty to empty the note) and, in "
                                       "version, the version it was edited from; reload the note and save again.")
        return _note_page(target, status=400, editor_text=None if row is not None else "",
                          error=msg, problems=[f"{name}: missing from the form" for name in missing])
    typed = request.form["content"]
    text = as_typed(typed)
    opened = _version_field()
    stored: str | None = None
    try:
        with db().transaction() as conn:
            current = notes.get_note(conn, target.org_id, target.level, target.owner_id, target.name)
            stored = (current["content"] or "") if current is not None else None
            if current is not None and current["version"] == opened and same_text(typed, stored or ""):
                return redirect(note_url(target.path, done="unchanged"))
            notes.write_note(conn, target.org_id, target.level, target.owner_id, target.name,
                             as_stored(typed, stored), principal().actor, if_version=opened, honour_leases=True)
    except PreconditionFailed:
        # Somebody saved meanwhile (or moved or deleted the note): nothing was written. Show both
        # versions and keep what was typed, based on the newest version, so a second Save is a
        # choice. A note moved meanwhile is shown where it is now, so that Save goes there and
        # does not create a second note at the old name.
        moved_from = None
        with db().connection() as conn:
            theirs = notes.get_note(conn, target.org_id, target.level, target.owner_id, target.name)
            moved = files.moved_to(conn, principal().org_ids, target.path) if theirs is None else None
            moved_target = parse(moved) if moved is not None else None
            if moved_target is not None and moved_target.family == "note":
                theirs = notes.get_note(conn, moved_target.org_id, moved_target.level,
                                        moved_target.owner_id, moved_target.name)
                if theirs is not None:
                    moved_from, target = target.path, moved_target
        theirs_text = (theirs["content"] or "") if theirs else ""
        conflict = {"opened": opened, "mine": text, "theirs": theirs, "moved_from": moved_from,
                    "diff": diff_lines(theirs_text, text, old_name=f"current (v{theirs['version'] if theirs else 0})",
                                       new_name=f"yours (from v{opened})")}
        return _note_page(target, status=409, editor_text=text,
                          editor_version=theirs["version"] if theirs else 0, conflict=conflict)
    except (Invalid, TooLarge, Locked) as exc:
        problems = [*exc.problems, *size_problems(stored)] if isinstance(exc, TooLarge) else exc.problems
        return _note_page(target, status=status_of(exc), editor_text=text, editor_version=opened,
                          error=exc.head, problems=problems)
    return redirect(note_url(target.path, done="saved"))


# --- rename and delete (through the Host tree, as a WebDAV client's MOVE and DELETE) ----------------------

def _tree() -> HostTree:
    return HostTree(db(), principal())


@bp.post("/notes/rename/<path:display_path>")
@login_required
def rename(display_path: str) -> ResponseReturnValue:
    target = note_target(display_path)
    raw_name = request.form.get("name", "")
    try:
        with db().connection() as conn:
            level, owner_id = parse_scope(request.form.get("scope", _scope_key(target.level, target.owner_id)),
                                          orgs.directory(conn, principal(), target.org_id))
        key = _key_from(raw_name)
        if not key:
            msg = "type the note's new name, such as plan.md"
            raise Invalid(msg, [f"name: {msg}"])
        # The store's key rule before the path is built: "a/b.md" would otherwise name a folder
        # that does not exist, and be answered as one.
        key = check_note_key(key, level)  # type: ignore[arg-type]
        # The Host tree takes a move to a side file's name for an editor's rename-away save (the
        # note stays, hidden from this user a while); asked for by name here, it is a rename.
        if (problem := new_note_problem(key, level)) is not None:  # type: ignore[arg-type]
            raise Invalid(problem, [f"name: {problem}"])
        new_path = note_path(target.org_id, level, owner_id, key)  # type: ignore[arg-type]
        if new_path == target.path:
            return redirect(note_url(target.path, done="unchanged"))
        _tree().move(target.path, new_path, overwrite=False)
    except Embedded as exc:
        return _note_page(target, status=409, embedded={"message": exc.message, "tasks": task_links(exc.tasks)},
                          rename_name=raw_name)
    except AlreadyExists as exc:
        # (The store's sentence speaks to a WebDAV client: "Overwrite is off".)
        return _note_page(target, status=status_of(exc), rename_name=raw_name,
                          error=f"A note named {_key_from(raw_name)} already exists there; choose another name, "
                                "or delete that note first.")
    except (Invalid, NotANote, LimitReached, Locked) as exc:
        # (Locked: a WebDAV client holds the note or the name; LimitReached: the other scope is full.)
        return _note_page(target, status=status_of(exc), error=exc.head, problems=exc.problems,
                          rename_name=raw_name)
    return redirect(note_url(new_path, done="renamed"))


@bp.get("/notes/delete/<path:display_path>")
@login_required
def confirm_delete(display_path: str) -> ResponseReturnValue:
    target = note_target(display_path)
    with db().connection() as conn:
        row = notes.get_note(conn, target.org_id, target.level, target.owner_id, target.name)
        if row is None:
            raise NotFound(f"unknown note {target.path}: there is no live note with that display path")
        used_by = task_links(embeds.embedding_tasks(conn, target.path))
    return render_template("notes/delete.html", nav="notes", target=target, note=row, used_by=used_by,
                           embedded=None)


@bp.post("/notes/delete/<path:display_path>")
@login_required
def delete(display_path: str) -> ResponseReturnValue:
    target = note_target(display_path)
    try:
        _tree().delete(target.path)
    except Embedded as exc:
        with db().connection() as conn:
            row = notes.get_note(conn, target.org_id, target.level, target.owner_id, target.name)
        return render_template("notes/delete.html", nav="notes", target=target, note=row, used_by=[],
                               embedded={"message": exc.message, "tasks": task_links(exc.tasks)}), 409
    except (Locked, LimitReached) as exc:  # a WebDAV client holds the note: it stays, and says so
        return _note_page(target, status=status_of(exc), error=exc.head, problems=exc.problems)
    scope = _scope_key(target.level, target.owner_id)
    return redirect(url_for("notes.index", done="deleted", path=target.path) + f"#scope-{scope}")

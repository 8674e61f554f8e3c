"""The Databases page: the organisation's tables by owner, a table's records, a record's form, the
columns editor and who reaches a table. Every view is one or a few store calls; every rule is the
store's (store.collections, store.records), so the page and /api/ can never disagree.

A table page's state is its URL (q, f.<column>[.gte|.lte], sort, dir, page), so a view can be
bookmarked and the back button works; the same query goes to the store as the records route's
``query``, ``where`` and ``order``.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode

from flask import Blueprint, Response, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue

from store import collections as colls
from store import embeds, files, member_records, orgs, records
from store.collections import collection_for_member
from store.errors import (Conflict, Embedded, Invalid, LimitReached, NotFound, PreconditionFailed, StoreError,
                          TooLarge)
from store.paths import COLLECTION_NAME, collection_path, record_path
from store.values import shown
from web import columns_form, export, live, record_form
from web.errors import status_of, store_error_page
from web.forms import form_id, left_out, left_out_sentence, page_arg
from web.notes import task_links
from web.provenance import strip as provenance_strip
from web.security import db, in_view, login_required, principal, session

bp = Blueprint("databases", __name__)

PER_PAGE = 50
DONE = {"created": "Table created.", "saved": "Saved.", "added": "Record added.", "deleted": "Record deleted.",
        "cleared": "Every record was removed.", "columns": "Columns saved.", "access": "Access saved.",
        "merged": "A record with that unique value already existed: your values were merged into it.",
        "table-deleted": "Table deleted.", "unchanged": "Nothing changed, so nothing was saved."}


def _collection(conn: Any, collection_id: int, **kwargs: Any) -> Any:
    """The member's collection (store.member_records), whose organisation the page then shows."""
    c = collection_for_member(conn, principal(), collection_id, **kwargs)
    in_view(c.org_id)
    return c


@bp.errorhandler(NotFound)
def _not_found(exc: NotFound) -> ResponseReturnValue:
    """A table or record address that leads nowhere, said for an operator (the store's sentence is
    written for agents: "unknown collection 7", "record_list or record_search find ids")."""
    args = request.view_args or {}
    collection_id = args.get("collection_id")
    if collection_id is None:
        return store_error_page(exc)
    with db().connection() as conn:
        try:
            c = _collection(conn, collection_id)
        except NotFound:
            c, gone = None, colls.deleted_collection(conn, principal(), collection_id)
    if c is None:  # (another organisation's table reads as never made: ids reveal nothing)
        deletion = gone and {"actor_name": gone["actor_name"], "created_at": gone["deleted_at"]}
        return render_template("databases/gone.html", nav="databases", visited=True, collection_id=collection_id,
                               name=gone and gone["name"], deletion=deletion), 404
    record_id = args.get("record_id")
    if record_id is None or request.endpoint not in _RECORD_PAGES:
        return store_error_page(exc)
    with db().connection() as conn:
        deletion = _deletion(conn, record_path(c.org_id, c.name, record_id))
    return render_template("databases/gone.html", nav="databases", visited=True, c=c, record_id=record_id,
                           deletion=deletion, view=_view()), 404


# The record routes whose NotFound is the record's: its page, its delete's confirmation and the
# delete (the form's own saves say a deletion meanwhile themselves).
_RECORD_PAGES = ("databases.record", "databases.confirm_delete_record", "databases.delete_record")


# --- the list of tables ---------------------------------------------------------------------------


def _by_owner(tables: list[dict[str, Any]], guilds: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The organisation's tables first, then each guild's (guilds without tables too, so an
    operator sees where a table could go)."""
    groups = [{"title": "Organisation", "guild_id": None, "tables": [t for t in tables if t["guild_id"] is None]}]
    for g in guilds:
        groups.append({"title": g["name"], "guild_id": g["id"],
                       "tables": [t for t in tables if t["guild_id"] == g["id"]]})
    return groups


@bp.get("/databases")
@login_required
def index() -> ResponseReturnValue:
    org_id = session().org_id
    with db().connection() as conn:
        tables = colls.list_collections(conn, principal(), org_id)
        directory = orgs.directory(conn, principal(), org_id)
    return render_template("databases/index.html", nav="databases", groups=_by_owner(tables, directory["guilds"]),
                           total=len(tables), done=DONE.get(request.args.get("done", "")))


def _owner_choices(directory: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    """The owner select's choices, from ``directory`` when the caller has read it already."""
    if directory is None:
        with db().connection() as conn:
            directory = orgs.directory(conn, principal(), session().org_id)
    return [("", "The organisation")] + [(str(g["id"]), f"Guild: {g['name']}") for g in directory["guilds"]]


def _guild_id(raw: str) -> Any:
    """The owner select's value as the store's guild_id (None: the organisation)."""
    raw = raw.strip()
    return None if raw == "" else int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 19 else raw


@bp.get("/databases/new")
@login_required
def new_table() -> ResponseReturnValue:
    owner = request.args.get("owner", "")
    return render_template("databases/new.html", nav="databases", form={"name": "", "purpose": "", "owner": owner},
                           rows=columns_form.rows_of([], blank=columns_form.NEW_TABLE_BLANK_ROWS),
                           owners=_owner_choices(), types=columns_form.types(), problems=[], error=None)


@bp.post("/databases/new")
@login_required
def create_table() -> ResponseReturnValue:
    form = {k: request.form.get(k, "") for k in ("name", "purpose", "owner")}
    columns, rows = columns_form.parse(request.form)
    body: dict[str, Any] = {"name": form["name"].strip(), "purpose": form["purpose"].strip(), "columns": columns}
    if form["owner"]:
        body["guild_id"] = _guild_id(form["owner"])
    try:
        c = colls.create_collection(db(), principal(), session().org_id, body)
    except (Invalid, Conflict, LimitReached, NotFound) as exc:  # the form again, as it was typed
        return render_template("databases/new.html", nav="databases", form=form,
                               rows=columns_form.editor_rows(rows, exc.problems,
                                                             blank=columns_form.NEW_TABLE_BLANK_ROWS),
                               owners=_owner_choices(), types=columns_form.types(), error=exc.head,
                               problems=exc.problems), status_of(exc)
    return redirect(url_for("databases.table", collection_id=c.id, done="created"))


# --- a table --------------------------------------------------------------------------------------

def _filters(columns: list[dict[str, Any]]) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """(the store's where, the filter inputs as sent, the problems of f. parameters this table's
    page cannot make) from f.<column>[.gte|.lte] parameters. A bookmarked view's filter on a column
    renamed or removed since, or one in a form the page does not make (an exact number), is named
    with what would work instead of being dropped: dropped, the view would look filtered and list
    every record."""
    where: dict[str, Any] = {}
    sent: dict[str, str] = {}
    by_name = {c["name"]: c for c in columns}
    for c in columns:
        name, kind = c["name"], c["type"]
        if kind in ("number", "datetime"):
            bounds: dict[str, Any] = {}
            for op in ("gte", "lte"):
                raw = request.args.get(f"f.{name}.{op}", "").strip()
                if raw:
                    sent[f"{name}.{op}"] = raw
                    bounds[op] = _bound(kind, op, raw)
            if bounds:
                where[name] = bounds
            continue
        raw = request.args.get(f"f.{name}", "").strip()
        if not raw:
            continue
        sent[name] = raw
        if kind == "boolean":
            where[name] = {"true": True, "false": False, "empty": None}.get(raw, raw)
        elif raw == "(empty)":
            where[name] = None
        else:
            where[name] = raw
    return where, sent, _filter_problems(by_name)


def _filter_problems(by_name: dict[str, dict[str, Any]]) -> list[str]:
    """Each f. parameter with a value that ``_filters`` did not take, and what would work."""
    problems = []
    for key in dict.fromkeys(request.args):
        raw = request.args.get(key, "").strip()
        if not key.startswith("f.") or not raw:
            continue
        rest = key[2:]
        column, op = (rest[:-4], rest[-3:]) if rest.endswith((".gte", ".lte")) else (rest, "")
        col = by_name.get(column)
        asked, value = f"{_cut(key)}={_cut(raw)}", _cut(raw)
        if col is None:
            known = ", ".join(by_name)
            problems.append(f"{asked}: this table has no column {_cut(column)} (it may have been renamed or removed"
                            f" since this view was saved); " + (f"its columns are {known}" if known else
                                                                "it has no columns"))
        elif col["type"] in ("number", "datetime") and not op:
            problems.append(f"{asked}: {column} is a {col['type']} column, which this page filters by a range"
                            f" (from, to): f.{column}.gte={value}&f.{column}.lte={value} for exactly {value}")
        elif col["type"] not in ("number", "datetime") and op:
            problems.append(f"{asked}: {column} is a {col['type']} column, which has no range: filter it with"
                            f" f.{column}={value}")
    return problems


def _cut(text: str, limit: int = 60) -> str:
    """Part of an address as typed, shortened so that a long one cannot flood the notice."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _bound(kind: str, op: str, raw: str) -> Any:
    """A range bound as the store takes it: a number, or a date widened to the whole UTC day."""
    if kind == "number":
        value = record_form.value_of({"type": "number"}, raw)
        return value
    if len(raw) == 10 and raw[4] == "-" and raw[7] == "-":
        return raw + ("T00:00:00Z" if op == "gte" else "T23:59:59.999999Z")
    return record_form.value_of({"type": "datetime"}, raw)


def table_state(collection: Any) -> dict[str, Any]:
    """The view a table page's URL asks for; ``bad_page``: the problem of a page parameter that
    is no page number (the page answers 400 with it, as the store's sentence answers a bad sort)."""
    columns = collection.columns
    where, sent, view_problems = _filters(columns)
    sort = request.args.get("sort", "").strip()
    raw_dir = request.args.get("dir", "").strip()
    direction = "desc" if raw_dir == "desc" else "asc"
    if raw_dir not in ("", "asc", "desc"):
        view_problems.append(f"dir={_cut(raw_dir)}: the direction is asc (ascending) or desc (descending)")
    page, bad_page = page_arg(shown)
    return {"q": request.args.get("q", "").strip(), "where": where, "filters": sent, "sort": sort,
            "dir": direction, "page": page, "bad_page": bad_page, "view_problems": view_problems}


def load_rows(conn: Any, collection: Any, state: dict[str, Any]) -> dict[str, Any]:
    """The records the state asks for, through the same store calls as the records route."""
    where = state["where"] or None
    order = f"{state['sort']} {state['dir']}" if state["sort"] else None
    offset = (state["page"] - 1) * PER_PAGE
    if state["q"]:
        # Ranked hits, paged like a listing; a sorted header orders the hits instead of rank.
        return records.search_records(conn, [collection], state["q"], where=where, order=order, limit=PER_PAGE,
                                      offset=offset, display_path=True, tool_name="search")
    return records.list_records(conn, collection, where=where, order=order, limit=PER_PAGE,
                                offset=offset, display_path=True, tool_name="listing")


def _url_with(**changes: Any) -> str:
    """This page's URL with some parameters changed (None drops one)."""
    args = request.args.to_dict(flat=True)
    args.pop("done", None)
    for key, value in changes.items():
        if value is None:
            args.pop(key, None)
        else:
            args[key] = value
    return url_for(request.endpoint or "databases.table", **(request.view_args or {}), **args)


@bp.get("/databases/<int:collection_id>")
@login_required
def table(collection_id: int) -> ResponseReturnValue:
    problems: list[str] = []
    error = None
    status = 200
    with db().connection() as conn:
        c = _collection(conn, collection_id)
        state = table_state(c)
        filtering = bool(state["q"] or state["where"])
        out: dict[str, Any] = {"total": 0, "records": []}
        if state["bad_page"]:
            # Not page 1 in its place: the person would take it for the page they asked for.
            error = (f"This address asks for page {shown(request.args.get('page', '').strip())}, which is not a"
                     " page number: pages are numbered 1, 2, 3 and so on (without page, the first is shown).")
            problems, status = [state["bad_page"]], 400
        else:
            try:
                out = load_rows(conn, c, state)
            except Invalid as exc:
                # (the store's head names its tool, "listing arguments rejected": the problems say it)
                error, problems, status = VIEW_ERROR, exc.problems or [exc.head], 422
            if state["view_problems"]:
                # Not the records without those parts: that would read as a view that matched them all.
                out = {"total": 0, "records": []}
                error, problems, status = VIEW_ERROR, state["view_problems"] + problems, 422
        # Unfiltered, the listing's total is the table's count: no second count.
        count = colls.record_counts(conn, [c.id]).get(c.id, 0) if filtering or error else out["total"]
    total = out["total"]
    pages = max(1, -(-total // PER_PAGE))
    # Each record link carries this view, so the record's "Back to" returns to it.
    view_q = _view_q(view_of(request.args.to_dict(flat=True)))
    html = render_template(
        "databases/table.html", nav="databases", c=c, columns=c.columns, state=state, rows=out["records"],
        total=total, count=count, pages=pages, error=error, problems=problems,
        past_the_end=not error and total > 0 and state["page"] > pages,
        per_page=PER_PAGE, url_with=_url_with, done=DONE.get(request.args.get("done", "")),
        filtering=filtering, reask_ms=int(live.REASK_SECONDS * 1000), view_q=view_q,
        record_suffix="?" + urlencode({"view": view_q}) if view_q else "")
    return html, status


VIEW_ERROR = "This view's address asks for something this table cannot do:"

# --- export, clear, delete ------------------------------------------------------------------------

@bp.get("/databases/<int:collection_id>/export.<fmt>")
@login_required
def export_table(collection_id: int, fmt: str) -> ResponseReturnValue:
    if fmt not in ("jsonl", "csv"):
        raise NotFound(f"there is no {fmt} export; choose export.jsonl or export.csv")
    with db().connection() as conn:
        c = _collection(conn, collection_id)
    body = records.export_jsonl(db(), c) if fmt == "jsonl" else export.csv_lines(c.columns, records.export_records(db(), c))
    mimetype = "application/x-ndjson" if fmt == "jsonl" else "text/csv"
    return Response(body, mimetype=mimetype, headers={
        "Content-Disposition": f'attachment; filename="{c.name}.{fmt}"', "Cache-Control": "no-store"})


_SEEN = ("count", "next_id", "versions")


def _confirm_clear_page(c: Any, facts: dict[str, int], *, changed: str | None = None,
                        status: int = 200) -> ResponseReturnValue:
    """The confirmation, carrying what it shows (``facts``: how many live records, the next id,
    the sum of their versions) so that the clear removes those records or nothing."""
    return render_template("databases/confirm.html", nav="databases", c=c, action="clear", count=facts["count"],
                           seen=facts, changed=changed), status


def _seen_of_form() -> dict[str, int] | None:
    """What the confirmation that sent the clear showed, or None when the form did not say."""
    seen = {}
    for name in _SEEN:
        raw = request.form.get(name, "")
        if not (raw.isascii() and raw.isdigit() and len(raw) < 19):
            return None
        seen[name] = int(raw)
    return seen


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def what_changed(seen: dict[str, int], now: dict[str, int]) -> str:
    """The sentence a refused clear shows: what happened to the records since the confirmation
    the person answered, and what the confirmation shows now."""
    added = now["next_id"] - seen["next_id"]
    removed = seen["count"] + max(added, 0) - now["count"]
    edits = now["versions"] - seen["versions"]
    parts = []
    if added > 0:
        parts.append(_plural(added, "record was added", "records were added"))
    if removed > 0:
        parts.append(_plural(removed, "record was removed", "records were removed"))
    if not parts and edits > 0:
        parts.append(_plural(edits, "change was saved to its records", "changes were saved to its records"))
    happened = " and ".join(parts) or "its records changed"
    return (f"Nothing was cleared: since this confirmation was shown, {happened}, so it was not asking about"
            f" the records the table holds now. It now holds {_plural(now['count'], 'record', 'records')}"
            f" (the confirmation showed {seen['count']}); look at them if you need to, then confirm again to"
            " remove them all, or cancel.")


@bp.get("/databases/<int:collection_id>/clear")
@login_required
def confirm_clear(collection_id: int) -> ResponseReturnValue:
    return _confirm_clear_page(*member_records.clear_facts(db(), principal(), collection_id))


@bp.post("/databases/<int:collection_id>/clear")
@login_required
def clear(collection_id: int) -> ResponseReturnValue:
    seen = _seen_of_form()
    if seen is None:  # a form from before confirmations carried what they showed, or a hand-made one
        c, now = member_records.clear_facts(db(), principal(), collection_id)
        return _confirm_clear_page(c, now, status=400, changed=(
            "Nothing was cleared: the request did not say which records its confirmation showed, so it could"
            " remove records nobody saw. The confirmation below shows them as they are now; confirm again to"
            " remove them all, or cancel."))
    try:
        member_records.clear(db(), principal(), collection_id, seen=seen)
    except PreconditionFailed:
        # The store refused under the collection's lock, nothing removed; the confirmation again,
        # as the records are now, saying what happened since.
        c, now = member_records.clear_facts(db(), principal(), collection_id)
        return _confirm_clear_page(c, now, status=409, changed=what_changed(seen, now))
    return redirect(url_for("databases.table", collection_id=collection_id, done="cleared"))


def _confirm_delete_page(collection_id: int, *, embedded: Embedded | None = None) -> ResponseReturnValue:
    """The delete's confirmation: what goes with the table, and which live tasks embed it (the
    store refuses the delete while one does, so the page then offers no Delete button). After a
    refused delete (``embedded``: a task came to embed it since the page was shown) it says so."""
    with db().connection() as conn:
        c = _collection(conn, collection_id)
        count = colls.record_counts(conn, [c.id]).get(c.id, 0)
        reach = colls.access_list(conn, c)
        used_by = task_links(embeds.embedding_tasks(conn, c.display_path))
    refusal = None if embedded is None else {"message": embedded.message,
                                             "tasks": task_links(embedded.tasks)}
    return render_template("databases/confirm.html", nav="databases", c=c, action="delete", count=count,
                           reach=reach, used_by=used_by, embedded=refusal), 200 if embedded is None else 409


@bp.get("/databases/<int:collection_id>/delete")
@login_required
def confirm_delete(collection_id: int) -> ResponseReturnValue:
    return _confirm_delete_page(collection_id)


@bp.post("/databases/<int:collection_id>/delete")
@login_required
def delete_table(collection_id: int) -> ResponseReturnValue:
    try:
        colls.delete_collection(db(), principal(), collection_id)
    except NotFound:
        return _table_gone()
    except Embedded as exc:  # a task embeds the table: nothing deleted; the confirmation says which
        return _confirm_delete_page(collection_id, embedded=exc)
    return redirect(url_for("databases.index", done="table-deleted"))


def _table_gone() -> ResponseReturnValue:
    """A delete confirmed after the table went (another tab, someone else): nothing to do, and
    nothing typed to keep. Who deleted it and when, from the provenance of the name the
    confirmation carried, when that path's latest change is a deletion."""
    name = request.form.get("name", "").strip()
    deletion = None
    if COLLECTION_NAME.fullmatch(name):
        with db().connection() as conn:
            deletion = _deletion(conn, collection_path(session().org_id, name))
    return render_template("databases/gone.html", nav="databases", name=name if deletion else None,
                           deletion=deletion), 404


# --- a record -------------------------------------------------------------------------------------

# The table view a record page was opened from travels with it as one parameter, ``view`` (the
# table page's own query string: search, filters, sort, page), so that "Back to" the table after a
# save or a delete lands on the view the person left, not on the unfiltered first page.
VIEW_KEYS = ("q", "sort", "dir", "page")


def view_of(args: Mapping[str, str]) -> dict[str, str]:
    """The table view's parameters among ``args`` (the rest, such as done or hbefore, left out)."""
    return {k: v for k, v in args.items() if (k in VIEW_KEYS or k.startswith("f.")) and v.strip()}


def _view() -> dict[str, str]:
    """The table view this record page came from (its ``view`` parameter), as the table page's
    parameters; empty for the table's plain first page."""
    raw = request.args.get("view", "")
    return view_of(dict(parse_qsl(raw))) if raw else {}


def _view_q(view: Mapping[str, str] | None = None) -> str | None:
    """``view`` (by default, the one this page came from) as the ``view`` parameter of a record
    page's links, or None when there is none (url_for then leaves it out)."""
    view = _view() if view is None else view
    return urlencode(view) if view else None


class _Gone(Exception):
    """The record the form edits was deleted since it was opened."""


def _deletion(conn: Any, display_path: str) -> dict[str, Any] | None:
    """The recorded deletion of what lived at ``display_path`` (who, when), from the same
    provenance as /api/file-changes; None when its latest change is no deletion (or it has none:
    nothing ever lived there)."""
    latest = files.latest(conn, principal().org_ids, [display_path]).get(display_path)
    return latest if latest and latest.get("operation") == "delete" else None


def _record_page(c: Any, record: dict[str, Any] | None, texts: dict[str, Any], *, status: int = 200,
                 by_field: dict[str, list[str]] | None = None, error: str | None = None,
                 general: list[str] | None = None, stale: dict[str, Any] | None = None,
                 provenance: dict[str, Any] | None = None, gone: dict[str, Any] | None = None,
                 clear: frozenset[str] | set[str] = frozenset()) -> ResponseReturnValue:
    """The record's form. ``gone``: the record was deleted (``id``, ``deletion``, ``typed``: the
    form shows what was typed into it): the form adds its values as a new record."""
    # The values the form shows the record with (its version's), beside the inputs: a save
    # sends only what the person changed from them, and a stale save lists only those.
    originals = record_form.texts_of(c.columns, record) if record else {}
    view = _view()
    return render_template(
        "databases/record.html", nav="databases", c=c, record=record,
        fields=record_form.fields(c.columns, texts, by_field, originals=originals, clear=clear),
        type_labels=record_form.TYPE_LABELS, originals=originals,
        has_datetime=any(col["type"] == "datetime" for col in c.columns),
        error=error, general=general or [], stale=stale, provenance=provenance, gone=gone,
        misfits=records.misfits(c, record) if record else [], view=view, view_q=_view_q(view),
        done=DONE.get(request.args.get("done", ""))), status


@bp.get("/databases/<int:collection_id>/records/new")
@login_required
def new_record(collection_id: int) -> ResponseReturnValue:
    with db().connection() as conn:
        c = _collection(conn, collection_id)
    return _record_page(c, None, record_form.texts_of(c.columns, None))


@bp.post("/databases/<int:collection_id>/records/new")
@login_required
def add_record(collection_id: int) -> ResponseReturnValue:
    try:
        with db().transaction() as conn:
            c = _collection(conn, collection_id, lock=True)
            typed = record_form.typed_of(c.columns, request.form)
            body = record_form.body_for_create(c.columns, typed)
            if unsent := record_form.unsent_datetimes(c.columns, request.form):
                raise record_form.unsent_refusal(c.columns, unsent, body, patch=False)
            result = records.record_add(conn, c, body, principal().actor)
    except (Invalid, Conflict, TooLarge, LimitReached) as exc:
        return _refused(collection_id, None, exc)
    done = "merged" if result.merged is not None else "added"
    return redirect(url_for("databases.record", collection_id=collection_id, record_id=result.record["id"],
                            done=done, view=_view_q()))


def _cleared(columns: list[dict[str, Any]]) -> set[str]:
    """The dates and times whose Clear box the sent form ticked (shown ticked again)."""
    return {col["name"] for col in columns
            if col["type"] == "datetime" and record_form.cleared(request.form, col["name"])}


def _refused(collection_id: int, record: dict[str, Any] | None, exc: StoreError) -> ResponseReturnValue:
    """The form again, with what was typed and every problem beside its field."""
    with db().connection() as conn:
        c = _collection(conn, collection_id)
        provenance = provenance_strip(conn, record["display_path"]) if record else None
    by_field, general = record_form.problems_by_field(exc.problems)
    if not exc.problems:
        general = [exc.message]
    placed = sum(len(v) for v in by_field.values())
    headline = (f"Not saved: {placed} problem{'' if placed == 1 else 's'} with the values, each shown beside"
                " its field." if placed else "Not saved.")
    return _record_page(c, record, record_form.kept_texts(c.columns, request.form, record), status=status_of(exc),
                        by_field=by_field, general=general, error=headline, provenance=provenance,
                        clear=_cleared(c.columns))


@bp.get("/databases/<int:collection_id>/records/<int:record_id>")
@login_required
def record(collection_id: int, record_id: int) -> ResponseReturnValue:
    with db().connection() as conn:
        c = _collection(conn, collection_id)
        try:
            rec = records.get_record(conn, c, record_id)
        except NotFound:
            deletion = _deletion(conn, record_path(c.org_id, c.name, record_id))
            if deletion is None:
                raise
            # A deleted record's address (a bookmark, a draft's way back): what happened, and its
            # form as a new record, so that a draft kept in this tab can still be added.
            return _record_page(c, None, record_form.texts_of(c.columns, None), status=404,
                                gone={"id": record_id, "deletion": deletion, "typed": False})
        provenance = provenance_strip(conn, rec["display_path"])
    return _record_page(c, rec, record_form.texts_of(c.columns, rec), provenance=provenance)


class _Stale(Exception):
    def __init__(self, current: dict[str, Any]) -> None:
        self.current = current


@bp.post("/databases/<int:collection_id>/records/<int:record_id>")
@login_required
def save_record(collection_id: int, record_id: int) -> ResponseReturnValue:
    # (Without _version the save cannot tell a stale form: refused, saying so. A column whose input
    # the form did not send at all is left as it is, record_form.sent: the save is a patch of what
    # the form sent and changed, as the API's record_update is.)
    if left_out("_version"):
        with db().connection() as conn:
            c = _collection(conn, collection_id)
            rec = records.get_record(conn, c, record_id)
        return _record_page(c, rec, record_form.texts_of(c.columns, rec), status=400, error=left_out_sentence(
            ["_version"], "Send _version, the version of the record the values were edited from (the record page's"
                          " form carries it), with the fields to change."))
    opened = request.form["_version"]
    current: dict[str, Any] | None = None
    try:
        with db().transaction() as conn:
            c = _collection(conn, collection_id, lock=True)
            try:
                current = records.get_record(conn, c, record_id)
            except NotFound:
                raise _Gone() from None
            # The collection's row lock serialises writers, so nothing can slip in between this
            # check and the update.
            if opened != str(current["version"]):
                raise _Stale(current)
            typed = record_form.typed_of(c.columns, request.form)
            # A patch of the fields changed from what the form showed (record_update merges it).
            patch = record_form.patch_for_update(c.columns, typed, current, records.misfits(c, current),
                                                 shown=record_form.originals_of(c.columns, request.form),
                                                 unsent=record_form.unsent_columns(c.columns, request.form))
            if unsent := record_form.unsent_datetimes(c.columns, request.form):
                raise record_form.unsent_refusal(c.columns, unsent, patch, patch=True)
            if not patch:
                return redirect(url_for("databases.record", collection_id=collection_id, record_id=record_id,
                                        done="unchanged", view=_view_q()))
            records.record_update(conn, c, record_id, patch, principal().actor)
    except _Gone:
        return _deleted_meanwhile(collection_id, record_id)
    except _Stale as stale:
        return _stale_page(collection_id, opened, stale.current)
    except (Invalid, Conflict, TooLarge, LimitReached) as exc:
        return _refused(collection_id, current, exc)
    return redirect(url_for("databases.record", collection_id=collection_id, record_id=record_id, done="saved",
                            view=_view_q()))


def _deleted_meanwhile(collection_id: int, record_id: int) -> ResponseReturnValue:
    """A save of a record deleted since its form was opened: nothing written; the form again with
    everything typed, saying who deleted it and when, offering to add the values as a new record."""
    with db().connection() as conn:
        c = _collection(conn, collection_id)
        deletion = _deletion(conn, record_path(c.org_id, c.name, record_id))
    return _record_page(c, None, record_form.kept_texts(c.columns, request.form), status=409,
                        gone={"id": record_id, "deletion": deletion, "typed": True}, clear=_cleared(c.columns))


def _stale_page(collection_id: int, opened: str, current: dict[str, Any]) -> ResponseReturnValue:
    """A save over a newer version: the newer values, and what the person had changed."""
    with db().connection() as conn:
        c = _collection(conn, collection_id)
        provenance = provenance_strip(conn, current["display_path"])
    typed = record_form.typed_of(c.columns, request.form)
    # Only what the person changed from the version they opened: the rest of the form held
    # that version's values, and typing them again would undo the other writer's change. A date
    # and time that did not arrive (partly filled) is no change, nor is a column the form did not send.
    base = record_form.originals_of(c.columns, request.form)
    unsent = (record_form.unsent_datetimes(c.columns, request.form).keys()
              | record_form.unsent_columns(c.columns, request.form))
    mine = [{"name": col["name"], "typed": typed[col["name"]]} for col in c.columns
            if col["name"] not in unsent and (
                record_form.differs(col, typed[col["name"]], base[col["name"]]) if base is not None
                else record_form.changed(col, typed[col["name"]], current.get(col["name"])))]
    return _record_page(c, current, record_form.texts_of(c.columns, current), status=409,
                        stale={"opened": opened, "mine": mine, "latest": provenance["latest"]},
                        provenance=provenance)


@bp.get("/databases/<int:collection_id>/records/<int:record_id>/delete")
@login_required
def confirm_delete_record(collection_id: int, record_id: int) -> ResponseReturnValue:
    with db().connection() as conn:
        c = _collection(conn, collection_id)
        rec = records.get_record(conn, c, record_id)
    view = _view()
    return render_template("databases/confirm.html", nav="databases", c=c, action="delete-record", record=rec,
                           view=view, view_q=_view_q(view))


@bp.post("/databases/<int:collection_id>/records/<int:record_id>/delete")
@login_required
def delete_record(collection_id: int, record_id: int) -> ResponseReturnValue:
    with db().transaction() as conn:
        c = _collection(conn, collection_id, lock=True)
        records.record_remove(conn, c, record_id, principal().actor)
    return redirect(url_for("databases.table", collection_id=collection_id, done="deleted", **_view()))


# --- the columns editor ---------------------------------------------------------------------------

SETTINGS = ("name", "purpose", "owner")


def _settings_form(c: Any) -> dict[str, str]:
    return {"name": c.name, "purpose": c.purpose, "owner": "" if c.guild_id is None else str(c.guild_id)}


def _grant_labels(reach: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The table's grant rows by name (a guild's base on its own table is no row): what moving
    the table to a guild drops."""
    return ([f"guild {g['name']} ({g['mode']})" for g in reach["guilds"] if not g["own"]]
            + [f"agent {a['name']} ({a['mode']})" for a in reach["agents"]])


def _columns_page(c: Any, *, form: dict[str, str], rows: list[dict[str, Any]], etag: str, status: int = 200,
                  error: str | None = None, problems: list[str] | None = None,
                  conflict: dict[str, Any] | None = None, embedded: Embedded | None = None) -> ResponseReturnValue:
    """The Columns tab: the settings and the columns editor (``form`` and ``rows`` as typed, or as
    stored), what a change of owner does to the grants it has now, and after a move what it did.
    ``used_by``: the live tasks that embed the table, whose embed a rename would break (the store
    refuses it); ``embedded``: a rename just refused for that, said with links to those tasks."""
    with db().connection() as conn:
        reach = colls.access_list(conn, c)
        directory = orgs.directory(conn, principal(), c.org_id)
        used_by = task_links(embeds.embedding_tasks(conn, c.display_path))
    guild_names = {g["id"]: g["name"] for g in directory["guilds"]}
    return render_template(
        "databases/columns.html", nav="databases", c=c, form=form, was=_settings_form(c), rows=rows,
        owners=_owner_choices(directory), types=columns_form.types(), etag=etag, error=error, problems=problems or [],
        conflict=conflict, grants=_grant_labels(reach), owner_name=guild_names.get(c.guild_id, ""),
        used_by=used_by, embedded=None if embedded is None else {"message": embedded.message,
                                                                 "tasks": task_links(embedded.tasks)},
        moved=_moved_sentence(c, reach, directory) if request.method == "GET" else None,
        done=(_saved_sentence(c, guild_names.get(c.guild_id, "")) or DONE.get(request.args.get("done", "")))
        if request.method == "GET" else None), status


@bp.get("/databases/<int:collection_id>/columns")
@login_required
def columns(collection_id: int) -> ResponseReturnValue:
    with db().connection() as conn:
        c = _collection(conn, collection_id)
    return _columns_page(c, form=_settings_form(c), rows=columns_form.rows_of(c.columns),
                         etag=colls.collection_etag(c))


@bp.post("/databases/<int:collection_id>/columns")
@login_required
def save_columns(collection_id: int) -> ResponseReturnValue:
    with db().connection() as conn:
        c = _collection(conn, collection_id)
        before = colls.access_list(conn, c)
    new_columns, rows = columns_form.parse(request.form)
    if refusal := _columns_left_out(c, rows):
        return refusal
    form = {k: request.form[k] for k in SETTINGS}
    body: dict[str, Any] = {"columns": new_columns}
    if form["name"].strip() != c.name:
        body["name"] = form["name"].strip()
    if form["purpose"].strip() != c.purpose:
        body["purpose"] = form["purpose"].strip()
    if _guild_id(form["owner"]) != c.guild_id:
        body["guild_id"] = _guild_id(form["owner"])
    try:
        if (refusal := columns_form.removed_and_added(rows)) is not None:
            raise refusal
        changed = colls.alter_collection(db(), principal(), collection_id, body,
                                         if_match=request.form.get("etag") or None)
    except PreconditionFailed:
        return _columns_conflict(collection_id, form, rows)
    except Embedded as exc:  # a rename while a task embeds the table: nothing saved, everything kept
        with db().connection() as conn:
            c = _collection(conn, collection_id)
        return _columns_page(c, form=form, rows=columns_form.editor_rows(rows, []),
                             etag=request.form.get("etag", ""), embedded=exc, status=status_of(exc))
    except StoreError as exc:
        if isinstance(exc, NotFound):
            raise
        with db().connection() as conn:
            c = _collection(conn, collection_id)
        return _columns_page(c, form=form, rows=columns_form.editor_rows(rows, exc.problems),
                             etag=request.form.get("etag", ""), error=exc.head, problems=exc.problems,
                             status=status_of(exc))
    saved = [key for key, was, now in (("columns", c.columns, changed.columns), ("name", c.name, changed.name),
                                       ("purpose", c.purpose, changed.purpose),
                                       ("owner", c.guild_id, changed.guild_id)) if was != now]
    if not saved:
        return redirect(url_for("databases.columns", collection_id=collection_id, done="unchanged"))
    if "owner" not in saved:
        return redirect(url_for("databases.columns", collection_id=collection_id, done="columns",
                                saved=",".join(saved)))
    with db().connection() as conn:
        after = colls.access_list(conn, changed)
    return redirect(url_for("databases.columns", collection_id=collection_id, done="columns", saved=",".join(saved),
                            moved_from=c.guild_id or "org", dropped=_dropped(before, after) or None))


_COLUMN_ROW = re.compile(r"col-([0-9]{1,3})-name\Z")
# The inputs a columns editor's row always sends (its flags are checkboxes: left out when unticked).
ROW_FIELDS = ("from", "type", "description", "values")


def _columns_left_out(c: Any, rows: list[dict[str, Any]]) -> ResponseReturnValue | None:
    """The refusal (400, nothing saved) of a columns save that left fields out, or None. The
    editor sends every field it has, empty or not, and one row per column: a field left out
    (by a script, another client) would have read as emptied (a purpose blanked, a guild's table
    moved to the organisation, a description or listed values dropped), and a column without a
    row as removed, with its values. A column added by someone else since the editor loaded has
    no row either: a stale etag is the store's 412 (both changes shown), so rows are counted
    only against the columns that etag names."""
    indexes = sorted(int(m.group(1)) for key in request.form if (m := _COLUMN_ROW.match(key)))
    row_fields = [name for index in indexes for name in left_out(*(f"col-{index}-{f}" for f in ROW_FIELDS))]
    missing = left_out(*SETTINGS) + row_fields
    etag = request.form.get("etag")
    rowless = ([col["name"] for col in c.columns if col["name"] not in {r["from"] for r in rows}]
               if not etag or etag.strip() in ("*", colls.collection_etag(c)) else [])
    if not missing and not rowless:
        return None
    said = []
    if missing:
        said.append(f"the field{'' if len(missing) == 1 else 's'} {_and(missing)}")
    if rowless:
        said.append(f"no row for the column{'' if len(rowless) == 1 else 's'} {_and(rowless)}")
    error = (f"Nothing was saved: the form did not send {' and '.join(said)}. The columns editor sends the table's"
             " name, purpose and owner, and one row per column (col-N-name, col-N-from, col-N-type, col-N-description"
             " and col-N-values, with col-N-remove to remove that column); reload the page and make the change again.")
    problems = ([f"{name}: missing from the form" for name in missing]
                + [f'column "{name}": no row was sent for it, which would have removed it and its values'
                   for name in rowless])
    stored = _settings_form(c)
    form = {k: request.form.get(k, stored[k]) for k in SETTINGS}
    if rowless or row_fields:  # (the rows as stored: rows as sent would be saved with their gaps next time)
        return _columns_page(c, form=form, rows=columns_form.rows_of(c.columns), etag=colls.collection_etag(c),
                             status=400, error=error, problems=problems)
    return _columns_page(c, form=form, rows=columns_form.editor_rows(rows, []),
                         etag=etag or colls.collection_etag(c), status=400, error=error, problems=problems)


def _saved_sentence(c: Any, owner_name: str) -> str | None:
    """What a save on the Columns tab changed (``saved``: columns, name, purpose, owner), said
    after it as the table is now; None without ``saved`` (the plain "Columns saved.")."""
    raw = request.args.get("saved", "")
    if request.args.get("done") != "columns" or not raw:
        return None
    keys = raw.split(",")
    said = {"columns": "Columns saved.", "name": f"Table renamed to {c.name}.", "purpose": "Purpose saved.",
            "owner": f"Table moved to guild {owner_name}." if c.guild_id else "Table moved to the organisation."}
    return " ".join(said[k] for k in said if k in keys) or None


# --- a move's grants, said after the save -----------------------------------------------------------

def _dropped(before: dict[str, list[dict[str, Any]]], after: dict[str, list[dict[str, Any]]]) -> str:
    """The grant rows a move removed, as the Columns page's ``dropped`` parameter: g<guild id>.<mode>
    and a<agent id>.<mode>, comma-separated (names are looked up when the page is shown)."""
    guilds_now = {g["guild_id"] for g in after["guilds"] if not g["own"]}
    agents_now = {a["agent_id"] for a in after["agents"]}
    guilds = [f"g{g['guild_id']}.{g['mode']}" for g in before["guilds"]
              if not g["own"] and g["guild_id"] not in guilds_now]
    agents = [f"a{a['agent_id']}.{a['mode']}" for a in before["agents"] if a["agent_id"] not in agents_now]
    return ",".join(guilds + agents)


def _dropped_labels(raw: str, reach: dict[str, list[dict[str, Any]]], directory: dict[str, Any]) -> list[str]:
    """The grants ``dropped`` names, by name: only those whose guild or agent holds no grant on the
    table now, so an edited address cannot claim that a grant in force was dropped."""
    names = {"g": {g["id"]: g["name"] for g in directory["guilds"]},
             "a": {a["id"]: a["name"] for a in directory["agents"]}}
    # The guild the table moved to held a grant too, which the move dropped: it reaches the table
    # as its owner now, with no grant row (a guild's own table takes none).
    holding = {"g": {g["guild_id"] for g in reach["guilds"] if not g["own"]},
               "a": {a["agent_id"] for a in reach["agents"]}}
    owner = next((g["guild_id"] for g in reach["guilds"] if g["own"]), None)
    out = []
    for item in raw.split(","):
        kind = item.strip()[:1]
        subject, _, mode = item.strip()[1:].partition(".")
        if kind not in names or not (subject.isascii() and subject.isdigit()) or mode not in colls.AGENT_MODES:
            continue
        sid = int(subject)
        if sid in names[kind] and sid not in holding[kind]:
            now = ", replaced by the owner's write" if kind == "g" and sid == owner else ""
            out.append(f"{'guild' if kind == 'g' else 'agent'} {names[kind][sid]} ({mode}{now})")
    return out


def _moved_sentence(c: Any, reach: dict[str, list[dict[str, Any]]], directory: dict[str, Any]) -> str | None:
    """After a change of owner (``moved_from``: the former owner's guild id, or org): where the
    table went and what that did to who reaches it, by name."""
    raw = request.args.get("moved_from", "")
    if not raw or request.args.get("done") != "columns":
        return None
    guilds = {g["id"]: g["name"] for g in directory["guilds"]}
    old = None if raw == "org" else int(raw) if raw.isascii() and raw.isdigit() and len(raw) < 19 else -1
    if old == c.guild_id or old == -1 or (old is not None and old not in guilds):
        return None  # an address that does not describe this table's last move
    if c.guild_id is None:
        return (f"The table moved to the organisation: guild {guilds[old]} keeps its reach as a write grant, and"
                " any agent's own row stays. Share it with other guilds on the Access tab.")
    lost = _dropped_labels(request.args.get("dropped", ""), reach, directory)
    where = f"The table moved to guild {guilds.get(c.guild_id, c.guild_id)}, whose agents alone reach it now"
    if old is not None:
        where += f" (guild {guilds[old]}'s agents no longer do)"
    if not lost:
        return where + ". It had no grants to drop."
    return where + f". The move dropped every grant the table had: {_and(lost)}."


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


# --- a save over columns someone else changed meanwhile --------------------------------------------------

def _setting_words(key: str, value: str, owners: dict[str, str], *, done: bool) -> str:
    """One settings change in words: past tense for the other person's, present for this one's."""
    if key == "name":
        return f"{'renamed' if done else 'rename'} the table to {value}"
    if key == "purpose":
        return f"{'changed' if done else 'change'} its purpose to \u201c{value}\u201d"
    where = owners.get(value, value).replace("Guild: ", "guild ")
    return f"{'moved' if done else 'move'} it to {where[0].lower() + where[1:]}"


def _merge_settings(typed: dict[str, str], now: dict[str, str]) -> tuple[dict[str, str], list[str], list[str],
                                                                         list[str]]:
    """(the settings to show, their changes, mine, both) for a form loaded with ``<key>-was``
    before someone changed the table to ``now``: what this person did not change is as it is now."""
    owners = dict(_owner_choices())
    shown, theirs, mine, both = {}, [], [], []
    for key in SETTINGS:
        loaded = request.form.get(f"{key}-was", typed[key]).strip()
        mine_value, now_value = typed[key].strip(), now[key]
        if now_value != loaded:
            theirs.append(_setting_words(key, now_value, owners, done=True))
        if mine_value == loaded:
            shown[key] = now_value
            continue
        shown[key] = typed[key]
        mine.append(_setting_words(key, mine_value, owners, done=False))
        if now_value not in (loaded, mine_value):
            said = (lambda v: owners.get(v, v)) if key == "owner" else (lambda v: v)
            both.append(f"the table's {key} (theirs: {said(now_value)}; yours: {said(mine_value)})")
    return shown, theirs, mine, both


def _columns_conflict(collection_id: int, typed: dict[str, str], rows: list[dict[str, Any]]) -> ResponseReturnValue:
    """Someone else changed the table since this editor was loaded (the etag moved): nothing saved.
    The editor again, showing the table as it is now with this person's change applied on top and
    the fresh etag, and both changes in words, so that Save, after a look, saves the merge."""
    with db().connection() as conn:
        c = _collection(conn, collection_id)
        latest = files.latest(conn, principal().org_ids, [c.display_path]).get(c.display_path)
    merged = columns_form.merge(rows, c.columns)
    settings, theirs, mine, both = _merge_settings(typed, _settings_form(c))
    conflict = {"latest": latest, "theirs": theirs + merged.theirs, "mine": mine + merged.mine,
                "both": both + merged.both, "lost": merged.lost}
    return _columns_page(c, form=settings, rows=merged.rows + [columns_form.blank_row()],
                         etag=colls.collection_etag(c), status=409, conflict=conflict)


# --- who reaches a table --------------------------------------------------------------------------

@bp.get("/databases/<int:collection_id>/access")
@login_required
def access(collection_id: int, *, error: str | None = None, problems: list[str] | None = None,
           status: int = 200) -> ResponseReturnValue:
    p = principal()
    with db().connection() as conn:
        c = collection_for_member(conn, p, collection_id)
        reach = colls.access_list(conn, c)
        directory = orgs.directory(conn, p, c.org_id)
        # The effective mode is the store's rule (agent row ?? guild base): asked per agent, one
        # query each, bounded by the organisation's agents, not by the records.
        per_agent = {a["id"]: next((e for e in colls.agent_access(conn, p, a["id"])["collections"]
                                    if e["collection_id"] == c.id), None) for a in directory["agents"]}
    guild_names = {g["id"]: g["name"] for g in directory["guilds"]}
    granted = {g["guild_id"]: g["mode"] for g in reach["guilds"]}
    guild_rows = ([{"id": c.guild_id, "name": guild_names.get(c.guild_id, ""), "mode": "write"}] if c.guild_id else
                  [{"id": g["id"], "name": g["name"], "mode": granted.get(g["id"])} for g in directory["guilds"]])
    agent_rows, outsiders = [], []
    for a in directory["agents"]:
        entry = per_agent.get(a["id"]) or {}
        row = {"id": a["id"], "name": a["name"], "guild_name": guild_names.get(a["guild_id"], ""),
               "guild_mode": entry.get("guild_mode"), "agent_mode": entry.get("agent_mode"),
               "effective": entry.get("effective")}
        # A guild's own table takes an agent row only from that guild's agents (the store refuses
        # any other): another guild's agent gets no choice that cannot succeed, but is named below.
        if c.guild_id is not None and a["guild_id"] != c.guild_id and row["agent_mode"] is None:
            outsiders.append(row)
        else:
            agent_rows.append(row)
    return render_template("databases/access.html", nav="databases", c=c, guild_rows=guild_rows,
                           agent_rows=agent_rows, outsiders=outsiders, owner_name=guild_names.get(c.guild_id, ""),
                           done=(_access_sentence(guild_rows, agent_rows + outsiders)
                                 or DONE.get(request.args.get("done", ""))),
                           error=error, problems=problems or []), status


@bp.post("/databases/<int:collection_id>/access")
@login_required
def save_access(collection_id: int) -> ResponseReturnValue:
    if left_out("mode"):
        # (A mode left out is no wish to remove a grant: a browser always sends the select.)
        works = ("Send mode as read, write, none, or empty to follow the agent's guild." if request.form.get("agent_id")
                 else "Send mode as read, write, or empty for no access.")
        return access(collection_id, error=left_out_sentence(["mode"], works), problems=["mode: missing from the form"],
                      status=400)
    mode = request.form["mode"] or None
    try:
        if request.form.get("agent_id"):
            agent_id = form_id("agent_id")
            colls.set_agent_access(db(), principal(), agent_id, {"collection_id": collection_id, "mode": mode})
            who = f"a{agent_id}"
        else:
            guild_id = form_id("guild_id")
            colls.set_guild_access(db(), principal(), guild_id, {"collection_id": collection_id, "mode": mode})
            who = f"g{guild_id}"
    except Invalid as exc:
        return access(collection_id, error=exc.head, problems=exc.problems, status=status_of(exc))
    return redirect(url_for("databases.access", collection_id=collection_id, done="access", who=who))


_READS = {"read": "reads", "write": "reads and writes"}


def _access_sentence(guild_rows: list[dict[str, Any]], agent_rows: list[dict[str, Any]]) -> str | None:
    """After a save on the Access tab (``who``: g<guild id> or a<agent id>), what that guild or
    agent has now, as the page shows it; None for an address that names neither."""
    raw = request.args.get("who", "")
    if request.args.get("done") != "access" or raw[:1] not in ("g", "a") or not raw[1:].isdigit():
        return None
    sid = int(raw[1:])
    if raw[0] == "g":
        g = next((g for g in guild_rows if g["id"] == sid), None)
        if g is None:
            return None
        now = f"now {_READS[g['mode']]} this table" if g["mode"] else "has no access to this table now"
        return f"Access saved. Guild {g['name']} {now}."
    a = next((a for a in agent_rows if a["id"] == sid), None)
    if a is None:
        return None
    if a["agent_mode"] is None:
        has = f"{_READS[a['effective']]} this table" if a["effective"] else "has no access to this table"
        now = f"now follows its guild: {has}"
    elif a["agent_mode"] == "none":
        now = "has no access to this table now (its own row says none)"
    else:
        now = f"now {_READS[a['agent_mode']]} this table"
    return f"Access saved. Agent {a['name']} {now}."


# --- live refresh ---------------------------------------------------------------------------------

@bp.get("/databases/<int:collection_id>/events")
@login_required
def events(collection_id: int) -> ResponseReturnValue:
    """Server-Sent Events: one ``change`` event per committed change to this table or its records
    (from guild.files.changed), so the page can refresh itself."""
    with db().connection() as conn:
        c = _collection(conn, collection_id)
    # (the door's way to tell that the page has gone: gateway/door.py CLIENT_GONE)
    body = live.open_stream(db().conninfo, c.org_id, c.display_path, request.environ.get("hostfinder.client_gone"))
    if body is None:  # every stream slot is taken: the page polls instead (204 stops EventSource)
        return Response(status=204)
    return Response(body, mimetype="text/event-stream", headers={"Cache-Control": "no-store",
                                                                 "X-Accel-Buffering": "no"})

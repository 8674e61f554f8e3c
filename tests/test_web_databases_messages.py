"""What the Databases page says, after a third review, against a running gateway with a web login:
a view's address asking for a filter or a direction the table cannot do, addresses of a record or
a table that are not there, what a change of owner dropped and what a Columns save saved, a refused
columns save that keeps its rows (and says which row a problem is on), what an Access save changed,
the empty result's wording for one condition or several, and a rename or delete refused because a
task embeds the table."""
from __future__ import annotations

import html
import re
from typing import Any

import pytest
import requests

from store import admin, tasks
from store.access import Actor
from tests.conftest import RunningServer
from tests.web_browser import Browser, browser, chromium, csrf_of, web_login  # noqa: F401 - fixtures
from test_records_support import LEADS, bulk_records, grant, make_collection, ok


@pytest.fixture
def leads(db, boot) -> dict[str, Any]:
    """60 leads: email userN@example.com, score N."""
    table = make_collection(db, boot["org_id"], "leads", LEADS)
    bulk_records(db, table, 60)
    return table


@pytest.fixture
def sales(db, boot) -> dict[str, Any]:
    """A second guild, Sales, with its agent Seller (the bootstrap's guild is Research, agent Scout)."""
    guild = admin.create_guild(db, org_id=boot["org_id"], name="Sales")
    agent = admin.create_agent(db, org_id=boot["org_id"], guild_id=guild["id"], name="Seller")
    return {"guild_id": guild["id"], "agent_id": agent["id"]}


@pytest.fixture
def web(server: RunningServer, boot) -> requests.Session:
    return web_login(server, boot["email"], boot["password"])


def text_of(page: str) -> str:
    """A page's words, as a person reads them (tags dropped, spaces collapsed)."""
    body = re.sub(r"<(script|style)\b.*?</\1>", " ", page, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", body))).strip()


def flash_ok(page: str) -> str:
    m = re.search(r'<p class="flash ok" role="status">(.*?)</p>', page, re.S)
    return html.unescape(m.group(1)) if m else ""


def columns_form(page: str) -> dict[str, str]:
    """The Columns tab's (or New table's) form fields as the page holds them (text, hidden,
    selected options, ticked boxes, textareas)."""
    fields: dict[str, str] = {}
    for tag in re.findall(r"<input\b[^>]*>", page):
        name = re.search(r'name="([^"]+)"', tag)
        if not name:
            continue
        kind = (re.search(r'type="([^"]+)"', tag) or [None, "text"])[1]
        if kind == "checkbox" and " checked" not in tag:
            continue
        value = re.search(r'value="([^"]*)"', tag)
        fields[html.unescape(name.group(1))] = html.unescape(value.group(1)) if value else ""
    for name, body in re.findall(r'<textarea name="([^"]+)"[^>]*>\n?(.*?)</textarea>', page, re.S):
        fields[name] = html.unescape(body)
    for name, body in re.findall(r'<select name="([^"]+)"[^>]*>(.*?)</select>', page, re.S):
        chosen = re.search(r'<option value="([^"]*)" selected>', body) or re.search(r'<option value="([^"]*)"', body)
        fields[name] = html.unescape(chosen.group(1)) if chosen else ""
    return fields


def row_count(page: str) -> int:
    return len(re.findall(r'<tr class="column-row', page))


def blank_rows(page: str) -> int:
    fields = columns_form(page)
    return sum(1 for k, v in fields.items() if re.fullmatch(r"col-\d+-name", k) and not v
               and not fields.get(k.replace("-name", "-from")))


# --- A. a view's address asks for what the table cannot do ------------------------------------------------

@pytest.mark.parametrize(("query", "said"), [
    ("f.nonexistent=abc", "f.nonexistent=abc: this table has no column nonexistent"),
    ("f.points.gte=10", "f.points.gte=10: this table has no column points"),
    ("f.score=42", "f.score=42: score is a number column, which this page filters by a range (from, to):"
                   " f.score.gte=42&f.score.lte=42 for exactly 42"),
    ("f.email.gte=a", "f.email.gte=a: email is a text column, which has no range: filter it with f.email=a"),
    ("dir=sideways&sort=score", "dir=sideways: the direction is asc (ascending) or desc (descending)"),
])
def test_a_view_asking_for_a_filter_or_direction_the_table_cannot_do_says_so(
        web, server, leads, query, said) -> None:
    """Dropped silently, such a view listed all 60 records as if the filter had matched them all."""
    r = web.get(f"{server.url}/databases/{leads['id']}?{query}")
    words = text_of(r.text)
    assert r.status_code == 422, words[:500]
    assert "This view's address asks for something this table cannot do:" in words
    assert said in words, words
    if "no column" in said:
        assert "its columns are email, status, score, signed_up_at" in words
    assert "Nothing listed (60 records in the table)" in words and not re.search(r"(?<!\()60 records", words)
    assert 'href="/databases/' in r.text and "Show every record" in words
    assert "<tr data-href" not in r.text  # no record listed
    if query.startswith("f."):
        assert '<details class="filters-box" open>' in r.text


def test_a_bad_sort_and_a_renamed_filter_are_said_together_and_a_good_view_still_lists(web, server, leads) -> None:
    r = web.get(f"{server.url}/databases/{leads['id']}?f.points.gte=10&sort=nope")
    words = text_of(r.text)
    assert r.status_code == 422
    assert "f.points.gte=10: this table has no column points" in words and '"nope" is not a column' in words
    r = web.get(f"{server.url}/databases/{leads['id']}?f.score.gte=10&sort=score&dir=desc")
    assert r.status_code == 200 and "51 of 60 records match" in text_of(r.text)


# --- B. addresses of a record or a table that are not there -----------------------------------------------

def test_a_record_address_with_no_record_says_so_for_an_operator(web, server, leads) -> None:
    r = web.get(f"{server.url}/databases/{leads['id']}/records/9999")
    words = text_of(r.text)
    assert r.status_code == 404
    assert "No record 9999 in leads" in words and "The table leads holds no record with the id 9999" in words
    assert "record_list" not in words and "record_search" not in words
    assert f'href="/databases/{leads["id"]}"' in r.text and "Back to leads" in words
    r = web.get(f"{server.url}/databases/{leads['id']}/records/9999/delete")
    assert r.status_code == 404 and "record_list" not in r.text and "Back to leads" in text_of(r.text)


def test_a_deleted_records_delete_says_who_deleted_it(web, server, leads, operator) -> None:
    page = web.get(f"{server.url}/databases/{leads['id']}/records/3/delete")
    ok(operator.delete(f"{server.url}/api/collections/{leads['id']}/records/3"))
    r = web.post(f"{server.url}/databases/{leads['id']}/records/3/delete", data={"csrf_token": csrf_of(page.text)})
    words = text_of(r.text)
    assert r.status_code == 404 and "record_list" not in words
    assert re.search(r"Record 3 was deleted It was deleted from leads by .+ at \d{4}-\d\d-\d\d", words), words


def test_a_deleted_tables_address_says_who_deleted_it_and_leads_to_the_list(web, server, boot, db, leads,
                                                                           operator) -> None:
    ok(operator.delete(f"{server.url}/api/collections/{leads['id']}"))
    # A new table takes the name and is deleted too: the old address still says its own deletion.
    again = make_collection(db, boot["org_id"], "leads", LEADS)
    ok(operator.delete(f"{server.url}/api/collections/{again['id']}"))
    for path in ("", "/columns", "/access", "/records/1", "/clear"):
        r = web.get(f"{server.url}/databases/{leads['id']}{path}")
        words = text_of(r.text)
        assert r.status_code == 404, path
        assert "unknown collection" not in words, path
        assert re.search(rf"The table leads was deleted It was deleted by {re.escape(boot['email'])}"
                         r" at \d\d\d\d-\d\d-\d\d \d\d:\d\d:\d\d UTC,"
                         r" with its records and every grant on it\.", words), (path, words)
        assert 'href="/databases"' in r.text and "Back to the list of tables" in words
    # Another organisation's deleted table reads as one never made: its id gives nothing away.
    other = admin.create_org(db, name="Elsewhere")
    theirs = make_collection(db, other["id"], "secret-plans", LEADS)
    with db.transaction() as conn:
        conn.execute("UPDATE artifact_collections SET deleted_at = now() WHERE id = %s", (theirs["id"],))
    r = web.get(f"{server.url}/databases/{theirs['id']}")
    assert r.status_code == 404 and "secret-plans" not in r.text
    assert (f"No table at this address No table of this organisation has the id {theirs['id']}: it was"
            " deleted") in text_of(r.text)


# --- C. a move's dropped grants, and what a Columns save saved --------------------------------------------

def test_moving_a_table_to_a_guild_names_that_guilds_dropped_grant_and_says_what_was_saved(
        web, server, boot, db, leads, sales) -> None:
    grant(db, leads["id"], guild_id=boot["guild_id"], mode="write")
    grant(db, leads["id"], guild_id=sales["guild_id"], mode="read")
    grant(db, leads["id"], agent_id=boot["agent_id"], mode="read")
    url = f"{server.url}/databases/{leads['id']}/columns"
    form = columns_form(web.get(url).text)
    r = web.post(url, data=dict(form, owner=str(sales["guild_id"])))
    assert r.status_code == 200 and "?done=columns" in r.url
    words = text_of(r.text)
    assert flash_ok(r.text) == "Table moved to guild Sales."
    assert "Columns saved." not in words
    assert ("The move dropped every grant the table had: guild Research (write), guild Sales (read, replaced by the"
            " owner's write) and agent Scout (read).") in words, words
    # A purpose change says so; a columns change says so; nothing changed says nothing was saved.
    form = columns_form(r.text)
    r = web.post(url, data=dict(form, purpose="leads we call"))
    assert flash_ok(r.text) == "Purpose saved."
    form = columns_form(r.text)
    r = web.post(url, data=dict(form, **{"col-0-description": "where to write"}))
    assert flash_ok(r.text) == "Columns saved."
    form = columns_form(r.text)
    r = web.post(url, data=dict(form, name="prospects", purpose="prospects we call"))
    assert flash_ok(r.text) == "Table renamed to prospects. Purpose saved."
    r = web.post(url, data=columns_form(r.text))
    assert flash_ok(r.text) == "Nothing changed, so nothing was saved."


# --- D. a refused columns save keeps its rows and marks the row a problem is on --------------------------

def test_a_refused_columns_save_keeps_the_rows_and_a_constant_number_of_blank_ones(web, server, leads) -> None:
    url = f"{server.url}/databases/{leads['id']}/columns"
    page = web.get(url).text
    assert (row_count(page), blank_rows(page)) == (7, 3)
    form = dict(columns_form(page), **{"col-4-name": "Bad Name", "col-4-description": "a column"})
    for _ in range(3):
        r = web.post(url, data=form)
        assert r.status_code == 422
        # The five typed rows and three blank ones, however many times it is refused.
        assert (row_count(r.text), blank_rows(r.text)) == (8, 3), row_count(r.text)
        form = columns_form(r.text)
        assert form["col-4-name"] == "Bad Name"
    # The problem is shown under its row, and the row's inputs are marked.
    row = r.text.split('name="col-4-name"')[0].rsplit("<tr", 1)[1]
    assert 'class="column-row invalid"' in "<tr" + row
    assert re.search(r'name="col-4-name" value="Bad Name"[^>]*aria-invalid="true" aria-describedby="col-4-problems"',
                     r.text)
    beside = r.text.split('id="col-4-problems">')[1].split("</td>")[0]
    assert 'name "Bad Name" is not a column name' in html.unescape(beside)
    assert 'aria-invalid' not in r.text.split('name="col-0-name"')[1].split("</tr>")[0]


def test_a_refused_new_table_keeps_four_blank_rows(web, server) -> None:
    page = web.get(f"{server.url}/databases/new").text
    assert (row_count(page), blank_rows(page)) == (4, 4)
    form = dict(columns_form(page), name="Bad table", purpose="p", **{"col-0-name": "email",
                                                                     "col-0-description": ""})
    for _ in range(2):
        r = web.post(f"{server.url}/databases/new", data=form)
        assert r.status_code == 422
        assert (row_count(r.text), blank_rows(r.text)) == (5, 4)
        form = columns_form(r.text)
    assert 'id="col-0-problems"' in r.text and "description is required" in r.text.split('id="col-0-problems"')[1]


# --- E. what an Access save changed -------------------------------------------------------------------

def test_an_access_save_says_which_guild_or_agent_now_has_what(web, server, boot, leads, sales) -> None:
    url = f"{server.url}/databases/{leads['id']}/access"
    token = csrf_of(web.get(url).text)
    said = {}
    for field, subject, mode in (("guild_id", sales["guild_id"], "read"), ("guild_id", sales["guild_id"], "write"),
                                 ("guild_id", sales["guild_id"], ""), ("agent_id", sales["agent_id"], "none"),
                                 ("agent_id", sales["agent_id"], "read"), ("agent_id", sales["agent_id"], "")):
        r = web.post(url, data={"csrf_token": token, field: str(subject), "mode": mode})
        assert r.status_code == 200
        said[(field, mode)] = flash_ok(r.text)
    assert said == {
        ("guild_id", "read"): "Access saved. Guild Sales now reads this table.",
        ("guild_id", "write"): "Access saved. Guild Sales now reads and writes this table.",
        ("guild_id", ""): "Access saved. Guild Sales has no access to this table now.",
        ("agent_id", "none"): "Access saved. Agent Seller has no access to this table now (its own row says none).",
        ("agent_id", "read"): "Access saved. Agent Seller now reads this table.",
        ("agent_id", ""): "Access saved. Agent Seller now follows its guild: has no access to this table.",
    }


# --- F. one condition or several --------------------------------------------------------------------------

def test_an_empty_result_says_it_or_them_as_there_are_conditions(web, server, leads) -> None:
    base = f"{server.url}/databases/{leads['id']}"
    words = text_of(web.get(f"{base}?q=zzzqqq").text)
    assert "No record matches the search (60 records in the table). Clear it ." in words, words
    words = text_of(web.get(f"{base}?f.status=won").text)
    assert "No record matches the filter (60 records in the table). Clear it ." in words, words
    words = text_of(web.get(f"{base}?q=zzzqqq&f.status=won").text)
    assert "No record matches the search and the filter (60 records in the table). Clear them ." in words, words
    words = text_of(web.get(f"{base}?f.score.gte=90&f.score.lte=95").text)
    assert "No record matches the filters (60 records in the table). Clear them ." in words, words


# --- G. a table a live task embeds: a rename or a delete refused, said, and nothing typed lost ------------

def test_a_rename_or_delete_of_a_table_a_task_embeds_is_refused_keeping_what_was_typed(
        browser: Browser, server, boot, db, leads, operator) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    path = f"org/{org}/collections/leads"
    task = f"org/{org}/agents/{agent}/task.md"
    with db.transaction() as conn:
        tasks.write_task(conn, org, agent, f"Work through ![[{path}]].", Actor("user", boot["user_id"], boot["email"]))
    browser.login(boot["email"], boot["password"])

    # The Columns tab says the table is embedded, and by which task, before anything is tried.
    browser.open(f"/databases/{leads['id']}/columns")
    note = browser.find("#name-note").text
    assert f"A task embeds this table as ![[{path}]]: {task}." in note and "cannot be renamed" in note
    # A rename with other changes: refused whole, said with the task, and the form keeps every change.
    browser.fill({"name": "prospects", "purpose": "leads we call", "col-0-description": "where to write"})
    browser.press("Save")
    alert = browser.find("#embedded").text
    assert alert.startswith(
        f"cannot rename the collection leads to prospects: the task {task} embeds it (![[{path}]]), which would "
        "then find nothing; remove the embed from the task first, then try again (and embed "
        f"![[org/{org}/collections/prospects]] after the rename)"), alert
    assert f"embedded by {task}" in alert and "Nothing was saved" in alert
    link = browser.find("#embedded a")
    assert link.text == task and link.get_attribute("href").endswith(f"/agents/{agent}#task")
    assert [browser.find(f'[name="{n}"]').get_attribute("value") for n in ("name", "purpose", "col-0-description")] \
        == ["prospects", "leads we call", "where to write"]
    browser.shot("rename-refused")
    got = operator.get(f"{server.url}/api/collections/{leads['id']}").json()
    assert (got["name"], got["purpose"], got["columns"][0]["description"]) == ("leads", "test table", "contact address")
    # Changing the name back saves the rest, as typed.
    browser.fill({"name": "leads"})
    browser.press("Save")
    assert browser.find(".flash.ok").text == "Columns saved. Purpose saved."
    got = operator.get(f"{server.url}/api/collections/{leads['id']}").json()
    assert (got["name"], got["purpose"], got["columns"][0]["description"]) == ("leads", "leads we call",
                                                                               "where to write")

    # The delete's confirmation offers no Delete while a task embeds the table, and says why.
    browser.open(f"/databases/{leads['id']}/delete")
    assert (f"A task embeds this table (![[{path}]]), so it cannot be deleted: {task}. Remove the embed from the"
            " task first, then come back to this page.") in browser.text()
    assert not browser.finds("button.danger")
    # A confirmation shown before a task came to embed the table: the delete is refused, and says so.
    with db.transaction() as conn:
        tasks.write_task(conn, org, agent, "nothing to embed", Actor("user", boot["user_id"], boot["email"]))
    browser.open(f"/databases/{leads['id']}/delete")
    with db.transaction() as conn:
        tasks.write_task(conn, org, agent, f"Again ![[{path}]]", Actor("user", boot["user_id"], boot["email"]))
    browser.press("Delete leads")
    alert = browser.find("#embedded").text
    assert alert.startswith(f"cannot delete the collection leads: the task {task} embeds it (![[{path}]]); remove"
                            " the embed from the task first, then try again"), alert
    assert f"embedded by {task}" in alert and "Delete the table leads?" in browser.text()
    assert not browser.finds("button.danger")
    browser.shot("delete-refused")
    got = operator.get(f"{server.url}/api/collections/{leads['id']}")
    assert got.status_code == 200 and got.json()["count"] == 60

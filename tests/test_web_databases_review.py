"""The Databases page after a review in headless Chromium against a running gateway: what the
Columns tab says a save does with a value that no longer fits, a clear that removes only the
records its confirmation showed, a stale record save that lists only the fields the person
changed, sorting search results from the page, pages that do not exist, and the list of tables
and the columns editor at phone width. Each result is asserted through the API as well."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from store import records
from store.access import SYSTEM
from store.grants import COLLECTION_COLUMNS, Collection
from tests.conftest import RunningServer, wait_for_lock_waiters
from tests.web_browser import Browser, browser, chromium, csrf_of, phone, web_login  # noqa: F401 - fixtures
from test_records_support import LEADS, bulk_records, make_collection, ok

# The reviewer's table: prospective sites, with a stage, a size and notes.
SITES = [
    {"name": "site", "type": "text", "description": "the site's address", "required": True, "unique": True},
    {"name": "stage", "type": "text", "description": "where we are with it", "required": False, "unique": False,
     "values": ["new", "talking", "won", "lost"]},
    {"name": "size", "type": "number", "description": "rooms", "required": False, "unique": False},
    {"name": "notes", "type": "text", "description": "anything else", "required": False, "unique": False},
]
PURPOSE = "Prospective hosting sites we are qualifying before a visit, one per address"


@pytest.fixture
def sites(db, boot) -> dict[str, Any]:
    return make_collection(db, boot["org_id"], "prospects", SITES, purpose=PURPOSE)


def add(operator: requests.Session, server: RunningServer, table: dict[str, Any], body: dict[str, Any]) -> dict:
    return ok(operator.post(f"{server.url}/api/collections/{table['id']}/records", json={"body": body}), 201)["record"]


def total(operator: requests.Session, server: RunningServer, table: dict[str, Any]) -> int:
    return ok(operator.get(f"{server.url}/api/collections/{table['id']}/records"))["total"]


# --- 1. the Columns tab says what happens to a value that no longer fits ------------------------

def test_a_save_that_leaves_a_misfit_alone_keeps_it_and_the_columns_tab_says_so(
        browser: Browser, boot, sites, operator, server) -> None:
    """The spec: record_update returns problems in columns the patch did not touch as warnings and
    writes. The Columns tab said the next save "asks for a value that fits"; it keeps the value."""
    add(operator, server, sites, {"site": "a.example", "stage": "lost", "size": 12})
    columns = [dict(c, type="boolean") if c["name"] == "size" else c for c in SITES]
    ok(operator.patch(f"{server.url}/api/collections/{sites['id']}", json={"columns": columns}))
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{sites['id']}/columns")
    said = browser.find("form.card > p.muted").text
    assert "asks for a value that fits" not in said
    assert "a save that leaves that field as it is keeps the stored value and shows the warning again" in said
    # What it says is what happens: opened, the record says so; a save of another field is
    # written, keeps 12 and the warning stays.
    browser.open(f"/databases/{sites['id']}/records/1")
    assert 'column "size": expected true or false; got 12' in browser.find(".flash.misfits").text
    browser.fill({"notes": "called twice"})
    browser.press("Save")
    assert "Saved." in browser.text() and 'column "size"' in browser.find(".flash.misfits").text
    got = ok(operator.get(f"{server.url}/api/collections/{sites['id']}/records/1"))
    assert (got["notes"], got["size"], got["version"]) == ("called twice", 12, 2)
    # The API says the same as a warning, without refusing the write.
    r = ok(operator.patch(f"{server.url}/api/collections/{sites['id']}/records/1", json={"body": {"notes": "x"}}))
    assert r["warnings"] == ['column "size": expected true or false; got 12'] and r["record"]["notes"] == "x"


# --- 2. clear removes the records its confirmation showed, or nothing ----------------------------

def test_a_clear_refuses_when_a_record_was_added_after_the_confirmation(browser: Browser, boot, operator,
                                                                        server, db) -> None:
    leads = make_collection(db, boot["org_id"], "leads", LEADS)
    bulk_records(db, leads, 61)
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{leads['id']}/clear")
    assert "This removes all 61 records of leads" in browser.text()
    add(operator, server, leads, {"email": "late@example.com"})  # another client, meanwhile
    browser.press("Clear 61 records")
    changed = browser.find(".flash.error.changed").text
    assert changed.startswith("Nothing was cleared: since this confirmation was shown, 1 record was added")
    assert "It now holds 62 records (the confirmation showed 61)" in changed
    assert "This removes all 62 records of leads" in browser.text()
    assert total(operator, server, leads) == 62
    browser.shot("clear-refused")
    # Confirmed again, as the records are now: all 62 go.
    browser.press("Clear 62 records")
    assert "Every record was removed." in browser.text() and total(operator, server, leads) == 0


def test_a_clear_refuses_when_a_record_changed_or_went_and_when_the_form_says_nothing(
        boot, operator, server, db) -> None:
    leads = make_collection(db, boot["org_id"], "leads", LEADS)
    bulk_records(db, leads, 3)
    s = web_login(server, boot["email"], boot["password"])
    url = f"{server.url}/databases/{leads['id']}/clear"
    form = {"csrf_token": csrf_of(s.get(url).text), "count": "3", "next_id": "4", "versions": "3"}
    ok(operator.patch(f"{server.url}/api/collections/{leads['id']}/records/2", json={"body": {"score": 5}}))
    r = s.post(url, data=form)
    assert r.status_code == 409 and "since this confirmation was shown, 1 change was saved to its records" in r.text
    assert 'name="versions" value="4"' in r.text and total(operator, server, leads) == 3
    ok(operator.delete(f"{server.url}/api/collections/{leads['id']}/records/3"))
    r = s.post(url, data=dict(form, versions="4"))
    assert r.status_code == 409 and "1 record was removed" in r.text and "It now holds 2 records" in r.text
    # A request that does not say what it was shown removes nothing either.
    r = s.post(url, data={"csrf_token": form["csrf_token"]})
    assert r.status_code == 400 and "did not say which records its confirmation showed" in r.text
    assert total(operator, server, leads) == 2
    r = s.post(url, data=dict(form, count="2", versions="3"), allow_redirects=False)
    assert r.status_code == 302 and total(operator, server, leads) == 0
    # The API's DELETE keeps the spec's behaviour: every live record, no questions.
    add(operator, server, leads, {"email": "new@example.com"})
    assert ok(operator.delete(f"{server.url}/api/collections/{leads['id']}/records"))["cleared"] == 1


def test_a_clear_checks_under_the_collections_lock(boot, operator, server, db) -> None:
    """A record added by a transaction that holds the table's lock while the clear arrives (and
    commits while the clear waits) is seen by the check: the clear waits for the lock, then
    refuses. A check made before taking the lock would pass and then clear the new record too."""
    leads = make_collection(db, boot["org_id"], "leads", LEADS)
    bulk_records(db, leads, 2)
    s = web_login(server, boot["email"], boot["password"])
    url = f"{server.url}/databases/{leads['id']}/clear"
    form = {"csrf_token": csrf_of(s.get(url).text), "count": "2", "next_id": "3", "versions": "2"}
    answer: list[requests.Response] = []
    with db.transaction() as conn:
        row = conn.execute(f"SELECT {COLLECTION_COLUMNS} FROM artifact_collections c WHERE c.id = %s",
                           (leads["id"],)).fetchone()
        records.record_add(conn, Collection.from_row(row), {"email": "racing@example.com"}, SYSTEM)
        clearing = threading.Thread(target=lambda: answer.append(s.post(url, data=form)))
        clearing.start()
        wait_for_lock_waiters(db.conninfo, 1)
    clearing.join(30)
    assert answer[0].status_code == 409 and "1 record was added" in answer[0].text
    assert total(operator, server, leads) == 3


# --- 3. a stale save lists only what the person changed --------------------------------------------

def test_a_stale_save_lists_only_the_fields_the_person_changed(browser: Browser, boot, sites, operator,
                                                               server) -> None:
    add(operator, server, sites, {"site": "a.example", "stage": "lost", "size": 10, "notes": "quiet"})
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{sites['id']}/records/1")
    browser.fill({"size": "12"})
    # Another client changes size and stage meanwhile.
    ok(operator.patch(f"{server.url}/api/collections/{sites['id']}/records/1",
                      json={"body": {"size": 20, "stage": "won"}}))
    browser.press("Save")
    stale = browser.find(".flash.stale").text
    assert "changed since you opened it" in stale
    mine = [li.text for li in browser.finds(".flash.stale li")]
    assert mine == ["size: 12"], mine  # not "stage: lost", which would undo the other writer
    assert browser.find('[name="stage"]').get_attribute("value") == "won"
    assert browser.find('[name="size"]').get_attribute("value") == "20"
    browser.shot("stale-lists-what-changed")
    # Entering the change again saves it as a patch of that field: the other writer's stage stays.
    browser.fill({"size": "12"})
    browser.press("Save")
    assert "Saved." in browser.text()
    got = ok(operator.get(f"{server.url}/api/collections/{sites['id']}/records/1"))
    assert (got["size"], got["stage"], got["notes"], got["version"]) == (12, "won", "quiet", 3)


# --- 4. search results sort from the page ------------------------------------------------------------

def test_search_results_sort_by_a_heading_and_back_to_relevance(browser: Browser, boot, sites, operator,
                                                                server) -> None:
    for site, size in (("a.example", 30), ("b.example", 10), ("c.example", 20)):
        add(operator, server, sites, {"site": site, "stage": "lost", "size": size})
    add(operator, server, sites, {"site": "d.example", "stage": "won", "size": 5})
    browser.login(boot["email"], boot["password"])
    base = f"/databases/{sites['id']}"
    browser.open(base + "?q=lost")
    assert "3 matches, by relevance" in browser.find("#summary").text
    assert not browser.finds("th a.sorted")  # relevance: no heading is the order
    browser.follow("size")
    assert "sort=size" in browser.path and "dir=asc" in browser.path and "q=lost" in browser.path
    sizes = lambda: [tr.find_elements(browser.By.CSS_SELECTOR, "td")[3].text for tr in browser.finds("tbody tr")]  # noqa: E731
    assert sizes() == ["10", "20", "30"]
    assert browser.find("th a.sorted").text == "size ▲" and "sorted by size ▲" in browser.find("#summary").text
    browser.navigate(browser.find("th a.sorted"))
    assert "dir=desc" in browser.path and sizes() == ["30", "20", "10"] and browser.find("th a.sorted").text == "size ▼"
    assert browser.find("th a.sorted").find_element(browser.By.XPATH, "..").get_attribute("aria-sort") == "descending"
    browser.shot("search-sorted")
    api = ok(operator.get(f"{server.url}/api/collections/{sites['id']}/records",
                          params={"query": "lost", "order": "size desc"}))
    assert [str(r["size"]) for r in api["records"]] == sizes()
    browser.follow("Sort by relevance")
    assert "sort=" not in browser.path and "q=lost" in browser.path
    assert "by relevance" in browser.find("#summary").text and len(browser.finds("tbody tr")) == 3


# --- 5. pages that do not exist --------------------------------------------------------------------

def test_a_page_past_the_end_and_a_page_that_is_no_number_say_so(browser: Browser, boot, operator, server,
                                                                   db) -> None:
    leads = make_collection(db, boot["org_id"], "leads", LEADS)
    bulk_records(db, leads, 61)
    s = web_login(server, boot["email"], boot["password"])
    base = f"{server.url}/databases/{leads['id']}"
    for page in ("abc", "0", "-1", "1.5", "99999999"):
        r = s.get(base, params={"page": page})
        assert r.status_code == 400, (page, r.status_code)
        assert "which is not a page number: pages are numbered 1, 2, 3" in r.text, page
        assert "page: expected a whole number from 1 to 1000000" in r.text and "<tr data-href" not in r.text
    r = s.get(base, params={"page": "abc", "q": "example"})
    assert r.status_code == 400 and "Show the first page" in r.text
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{leads['id']}?page=abc&sort=score")
    assert "which is not a page number" in browser.find(".flash.error").text
    browser.follow("Show the first page")
    assert browser.path == f"/databases/{leads['id']}?sort=score" and len(browser.finds("tbody tr")) == 50
    # Past the end: said at the top, where the page count used to read "page 99 of 2".
    browser.open(f"/databases/{leads['id']}?page=99")
    said = browser.find("#grid > .flash.past-end").text
    assert said == "Page 99 is past the last page (2): there are 61 records, 50 a page. Go to page 2."
    assert "page 99 of 2" not in browser.text() and not browser.finds("tbody tr")
    browser.shot("past-the-end")
    browser.follow("Go to page 2")
    assert len(browser.finds("tbody tr")) == 11
    browser.open(f"/databases/{leads['id']}?q=example&page=5")
    assert "there are 61 matches, 50 a page" in browser.find(".flash.past-end").text


# --- 6. phone width ----------------------------------------------------------------------------------

# The words of an element's text that the layout split across lines (a word on two lines has two
# boxes).
SPLIT_WORDS = """
const el = arguments[0], split = [];
const walker = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
  const re = /\\S+/g; let m;
  while ((m = re.exec(node.data))) {
    const range = document.createRange();
    range.setStart(node, m.index); range.setEnd(node, m.index + m[0].length);
    const lines = new Set(Array.from(range.getClientRects()).map((r) => Math.round(r.top)));
    if (lines.size > 1) split.push(m[0]);
  }
}
return split;
"""


def test_the_list_of_tables_and_the_columns_editor_fit_a_phone(phone: Browser, boot, sites, db) -> None:
    make_collection(db, boot["org_id"], "leads", LEADS, purpose="Sales leads found by the research guild.")
    phone.login(boot["email"], boot["password"])
    phone.open("/databases")
    phone.shot("tables-390")
    purposes = [td for td in phone.finds("table.tables td.wrap")]
    assert purposes and all(phone.driver.execute_script(SPLIT_WORDS, td) == [] for td in purposes), \
        [phone.driver.execute_script(SPLIT_WORDS, td) for td in purposes]
    for path in ("/databases/new", f"/databases/{sites['id']}/columns"):
        phone.open(path)
        editor = phone.find("#columns-editor")
        assert phone.driver.execute_script("return arguments[0].scrollWidth - arguments[0].clientWidth", editor) <= 0
        assert phone.driver.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
        row = phone.finds("tr.column-row")[0]
        box = row.rect
        for name in ("name", "type", "description", "values"):
            field = row.find_element(phone.By.CSS_SELECTOR, f'[name="col-0-{name}"]').rect
            # one under another, each as wide as the block
            assert field["width"] > box["width"] * 0.85 and field["x"] + field["width"] <= 390, (path, name)
        flags = ["required", "unique"] + (["remove"] if "columns" in path else [])
        for flag in flags:
            el = row.find_element(phone.By.CSS_SELECTOR, f'[name="col-0-{flag}"]')
            label = el.find_element(phone.By.XPATH, "..")
            assert el.rect["x"] + el.rect["width"] <= 390 and label.text == flag.capitalize(), (path, flag)
        phone.driver.execute_script("arguments[0].scrollIntoView()", row)
        phone.shot("columns-editor-390" if "columns" in path else "new-table-390")
    # Clicking a flag's name ticks it (it is the checkbox's label), and a save goes through.
    phone.find('tr.column-row label:has([name="col-3-required"]) .flag-name').click()
    assert phone.find('[name="col-3-required"]').is_selected()


def test_the_columns_editor_is_still_a_table_on_a_wide_screen(browser: Browser, boot, sites) -> None:
    browser.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
    try:
        browser.login(boot["email"], boot["password"])
        browser.open(f"/databases/{sites['id']}/columns")
        headings = [th.text for th in browser.finds("#columns-editor thead th")]
        assert headings[:2] == ["Name", "Type"] and headings[-1] == "Remove"
        row = browser.finds("tr.column-row")[0]
        cells = row.find_elements(browser.By.CSS_SELECTOR, "td")
        assert len({round(td.rect["y"]) for td in cells}) == 1  # one line per column definition
        assert not any(el.is_displayed() for el in browser.finds(".flag-name"))
        browser.shot("columns-editor-1280")
        browser.open("/databases")
        browser.shot("tables-1280")
        assert all(browser.driver.execute_script(SPLIT_WORDS, td) == [] for td in browser.finds("table.tables td.wrap"))
    finally:
        browser.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def test_columns_named_like_the_forms_own_fields_keep_their_values(browser: Browser, boot, db, operator,
                                                                   server) -> None:
    """The record form's own hidden fields were named version and originals, names a column may
    have: a column called originals was saved as "1" on every save of its record. And a list of
    listed values is one hidden input, so a draft restored field by field lines up however many
    items the list holds."""
    columns = [{"name": "name", "type": "text", "description": "a name", "required": True, "unique": False},
               {"name": "originals", "type": "text", "description": "clashes", "required": False, "unique": False},
               {"name": "tags", "type": "array", "description": "tags", "required": False, "unique": False,
                "values": ["a", "b", "c"]}]
    table = make_collection(db, boot["org_id"], "clash", columns)
    add(operator, server, table, {"name": "a", "originals": "keep me", "tags": ["a", "b"]})
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{table['id']}/records/1")
    assert len(browser.finds('input[type="hidden"][name="orig.tags"]')) == 1
    browser.fill({"name": "b"})
    browser.press("Save")
    assert "Saved." in browser.text()
    got = ok(operator.get(f"{server.url}/api/collections/{table['id']}/records/1"))
    assert (got["name"], got["originals"], got["tags"], got["version"]) == ("b", "keep me", ["a", "b"], 2)


# --- 7. a stale save keeps what was typed as the draft -----------------------------------------------

def test_a_stale_save_keeps_the_typed_change_as_a_draft_to_restore_after_leaving(
        browser: Browser, boot, sites, operator, server) -> None:
    """The stale page showed the newer values and the typed change only as a bullet, and dropped the
    tab's draft: following "Back to" and opening the record again offered nothing, the edit was
    gone. The draft is now the newer version with the change typed in: Restore brings it back and
    the save writes only it, the other writer's change staying."""
    add(operator, server, sites, {"site": "a.example", "stage": "lost", "size": 10, "notes": "quiet"})
    browser.login(boot["email"], boot["password"])
    record = f"/databases/{sites['id']}/records/1"
    browser.open(record)
    browser.fill({"notes": "called twice, wants a visit", "stage": "talking"})
    ok(operator.patch(f"{server.url}/api/collections/{sites['id']}/records/1", json={"body": {"size": 20}}))
    browser.press("Save")
    assert "changed since you opened it" in browser.find(".flash.stale").text
    assert browser.find('[name="notes"]').get_attribute("value") == "quiet"  # the newer values shown
    browser.shot("stale-before-leaving")
    browser.follow("Back to prospects")
    browser.open(record)
    offer = browser.find(".flash.draft").text
    assert "was not saved: This record changed since you opened it." in offer, offer
    assert browser.find('[name="notes"]').get_attribute("value") == "quiet"  # until restored
    browser.button("Restore it").click()
    assert not browser.finds(".flash.draft")
    assert browser.find('[name="notes"]').get_attribute("value") == "called twice, wants a visit"
    assert browser.find('[name="stage"]').get_attribute("value") == "talking"
    assert browser.find('[name="size"]').get_attribute("value") == "20"  # the other writer's, kept
    browser.shot("stale-draft-restored")
    browser.press("Save")
    assert "Saved." in browser.text() and not browser.finds(".flash.stale")
    got = ok(operator.get(f"{server.url}/api/collections/{sites['id']}/records/1"))
    assert (got["notes"], got["stage"], got["size"], got["version"]) == ("called twice, wants a visit", "talking", 20, 3)
    # The save went through: the draft is gone.
    browser.open(record)
    assert not browser.finds(".flash.draft")


def test_a_stale_save_of_a_list_and_a_cleared_date_keeps_them_as_the_draft(
        browser: Browser, boot, db, operator, server) -> None:
    """The draft of a stale page holds each change as its inputs take it: a list's ticked boxes, a
    date and time cleared with its Clear box; a field changed on the stale page itself keeps what
    was typed there."""
    columns = [{"name": "name", "type": "text", "description": "a name", "required": True, "unique": False},
               {"name": "tags", "type": "array", "description": "tags", "required": False, "unique": False,
                "values": ["a", "b", "c"]},
               {"name": "due", "type": "datetime", "description": "when", "required": False, "unique": False},
               {"name": "notes", "type": "text", "description": "notes", "required": False, "unique": False}]
    table = make_collection(db, boot["org_id"], "tasks", columns)
    add(operator, server, table, {"name": "a", "tags": ["a"], "due": "2026-05-01T10:00:00Z", "notes": "n"})
    browser.login(boot["email"], boot["password"])
    record = f"/databases/{table['id']}/records/1"
    browser.open(record)
    browser.find('input[name="tags"][value="a"]').click()
    browser.find('input[name="tags"][value="c"]').click()
    browser.find('input[name="_clear.due"]').click()
    ok(operator.patch(f"{server.url}/api/collections/{table['id']}/records/1", json={"body": {"name": "b"}}))
    browser.press("Save")
    assert "changed since you opened it" in browser.find(".flash.stale").text
    browser.fill({"notes": "typed on the stale page"})
    browser.follow("Back to tasks")
    browser.open(record)
    browser.button("Restore it").click()
    assert [el.get_attribute("value") for el in browser.finds('input[name="tags"]') if el.is_selected()] == ["c"]
    assert browser.find('input[name="_clear.due"]').is_selected() and browser.find('[name="due"]').get_attribute("value") == ""
    assert browser.find('[name="notes"]').get_attribute("value") == "typed on the stale page"
    assert browser.find('[name="name"]').get_attribute("value") == "b"
    browser.press("Save")
    assert "Saved." in browser.text()
    got = ok(operator.get(f"{server.url}/api/collections/{table['id']}/records/1"))
    assert (got["name"], got["tags"], got.get("due"), got["notes"]) == ("b", ["c"], None, "typed on the stale page")


# --- 8. the Access tab on a phone ---------------------------------------------------------------------

def test_the_access_tab_fits_a_phone_with_every_control_on_screen(phone: Browser, boot, sites, db) -> None:
    """At 390 px the agents' select and Save were off the screen inside a table scrolling sideways,
    and the Guilds table ended at 40 % of the page: each guild and agent is a block now."""
    from store import admin
    other = admin.create_guild(db, org_id=boot["org_id"], name="partnerships and channel sales of the north")
    admin.create_agent(db, org_id=boot["org_id"], guild_id=other["id"], name="follow-up-agent-with-a-long-name")
    phone.login(boot["email"], boot["password"])
    phone.open(f"/databases/{sites['id']}/access")
    phone.shot("access-390")
    width = phone.driver.execute_script("return window.innerWidth")
    assert phone.driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth") <= 0
    for css in ("table.access-guilds", "table.access-agents"):
        table = phone.find(css)
        assert phone.driver.execute_script("return arguments[0].scrollWidth - arguments[0].clientWidth", table) <= 0
        section = table.find_element(phone.By.XPATH, "..").rect
        assert table.rect["width"] >= section["width"] - 1, (css, table.rect, section)
        rows = table.find_elements(phone.By.CSS_SELECTOR, "tbody tr")
        assert len(rows) >= 2
        for tr in rows:
            assert tr.rect["width"] >= table.rect["width"] - 2, (css, tr.text)  # as wide as the table
            for el in tr.find_elements(phone.By.CSS_SELECTOR, "select, button"):
                box = el.rect
                assert box["x"] >= 0 and box["x"] + box["width"] <= width, (css, tr.text, box)
    # The select and its Save still change an agent's row.
    row = phone.finds("table.access-agents tbody tr")[0]
    phone.fill({"mode": "read"}, within=row)
    phone.press("Save", within=row)
    assert "Access saved" in phone.text()
    # On a wide screen it is still a table: headings shown, each row on one line.
    phone.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                 {"width": 1366, "height": 900, "deviceScaleFactor": 1, "mobile": False})
    phone.open(f"/databases/{sites['id']}/access")
    phone.shot("access-1366")
    assert [th.text for th in phone.finds("table.access-agents thead th")][-1] == "Change the agent's row"
    for tr in phone.finds("table.access-agents tbody tr, table.access-guilds tbody tr"):
        assert len({round(td.rect["y"]) for td in tr.find_elements(phone.By.CSS_SELECTOR, "td")}) == 1, tr.text

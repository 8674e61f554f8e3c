"""The Databases page in a real browser against the real gateway and PostgreSQL, each result
asserted through the API as well: tables by owner, a table's records with search, filters, sort
and paging, the record form (422 beside each field, a stale edit), export, clear and delete."""
from __future__ import annotations

import csv
import io
import json
import re
from typing import Any

import pytest
import requests

from store import admin
from tests.conftest import RunningServer
from tests.web_browser import Browser, browser, chromium, csrf_of, web_login  # noqa: F401 - fixtures
from test_records_support import LEADS, PEOPLE, bulk_records, make_collection, ok


@pytest.fixture
def people(db, boot) -> dict[str, Any]:
    """An organisation table with one column of every type."""
    return make_collection(db, boot["org_id"], "people", PEOPLE, purpose="people we work with")


@pytest.fixture
def leads(db, boot) -> dict[str, Any]:
    """The specification's example table, the guild's own (its agent writes it)."""
    return make_collection(db, boot["org_id"], "leads", LEADS, guild_id=boot["guild_id"], purpose="sales leads")


def seed_people(operator: requests.Session, server: RunningServer, people: dict[str, Any]) -> None:
    for body in ({"name": "Ada Lovelace", "city": "London", "stage": "active", "age": 36, "vip": True,
                  "met_at": "2024-05-01T09:30:00Z", "tags": ["math", "poetry"], "langs": ["en", "fr"]},
                 {"name": "Alan Turing", "city": "Manchester", "stage": "done", "age": 41, "vip": False,
                  "tags": ["math"], "langs": ["en"]},
                 {"name": "Grace Hopper", "city": "New York", "stage": "new", "age": 85,
                  "met_at": "2024-06-15T12:00:00Z"}):
        ok(operator.post(f"{server.url}/api/collections/{people['id']}/records", json={"body": body}), 201)


def grid_names(browser: Browser, column: int = 2) -> list[str]:
    return [tr.find_elements(browser.By.CSS_SELECTOR, "td")[column - 1].text for tr in browser.finds("tbody tr")]


def test_the_databases_page_lists_tables_by_owner(browser: Browser, boot, people, leads, operator, server) -> None:
    seed_people(operator, server, people)
    browser.login(boot["email"], boot["password"])
    sections = browser.finds("section.owner")
    assert "Organisation" in sections[0].text and "people we work with" in sections[0].text
    assert "Research" in sections[1].text and "leads" in sections[1].text
    row = browser.link("people").find_element(browser.By.XPATH, "./ancestor::tr")
    assert row.find_elements(browser.By.CSS_SELECTOR, "td")[2].text == "3"
    browser.shot("databases")
    browser.follow("people")
    assert browser.path == f"/databases/{people['id']}"
    assert len(browser.finds('input[type="search"]')) == 1
    assert len(browser.finds("table.records tbody tr")) == 3
    assert [th.text.split(" ")[0] for th in browser.finds("table.records thead th")][:3] == ["id", "name", "city"]
    browser.shot("table")


def test_search_filters_sort_and_paging_are_in_the_url(browser: Browser, boot, people, operator, server, db) -> None:
    seed_people(operator, server, people)
    browser.login(boot["email"], boot["password"])
    base = f"/databases/{people['id']}"
    browser.open(base + "?q=turing")
    assert grid_names(browser) == ["Alan Turing"]
    api = ok(operator.get(f"{server.url}/api/collections/{people['id']}/records", params={"query": "turing"}))
    assert [r["name"] for r in api["records"]] == ["Alan Turing"]
    # Filters: an enum choice, a number range, a boolean, array contains; all sent as where.
    browser.open(base + "?f.stage=active")
    assert grid_names(browser) == ["Ada Lovelace"]
    browser.open(base + "?f.age.gte=40&f.age.lte=90")
    assert sorted(grid_names(browser)) == ["Alan Turing", "Grace Hopper"]
    browser.open(base + "?f.vip=false")
    assert grid_names(browser) == ["Alan Turing"]
    browser.open(base + "?f.langs=fr")
    assert grid_names(browser) == ["Ada Lovelace"]
    browser.open(base + "?f.met_at.gte=2024-06-01")
    assert grid_names(browser) == ["Grace Hopper"]
    api = ok(operator.get(f"{server.url}/api/collections/{people['id']}/records",
                          params={"where": json.dumps({"age": {"gte": 40, "lte": 90}})}))
    assert api["total"] == 2
    # The filter form itself, as a person uses it.
    browser.open(base)
    browser.find("details.filters-box summary").click()
    browser.fill({"f.stage": "done"})
    browser.press("Apply filters")
    # (only the field that says something: not every empty filter of the form)
    assert browser.path == base + "?f.stage=done" and grid_names(browser) == ["Alan Turing"]
    # Live, though this is the eighth table page opened in a few seconds: each page left behind
    # gives its stream back as it goes (live.MAX_STREAMS are open at most), and a page that found
    # none free (a busy machine: the last pages' streams not given back yet) asks again in 3 s.
    browser.wait(lambda d: browser.find("#live-status").text == "Live", timeout=10)
    browser.shot("filtered")
    browser.driver.back()
    assert len(browser.finds("tbody tr")) == 3
    # Sort by a header, twice for descending.
    browser.open(base)
    browser.follow("age")
    assert grid_names(browser) == ["Ada Lovelace", "Alan Turing", "Grace Hopper"] and "sort=age" in browser.path
    browser.navigate(browser.find("th a.sorted"))
    assert grid_names(browser) == ["Grace Hopper", "Alan Turing", "Ada Lovelace"] and "dir=desc" in browser.path
    # A filter the store refuses says why, on the page.
    browser.open(base + "?f.age.gte=lots")
    assert "expected a number" in browser.text() and "No records yet" not in browser.text()
    # Filters nothing passes say so in the operator's terms (not the agents' record_list advice).
    browser.open(base + "?f.age.gte=90&f.age.lte=10")
    assert "No record matches the filters (3 records in the table)." in browser.find(".empty").text
    assert "record_list" not in browser.text()
    browser.follow("Clear them")
    assert len(grid_names(browser)) == 3


def test_paging_shows_the_total(browser: Browser, boot, leads, operator, server, db) -> None:
    bulk_records(db, leads, 120)
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{leads['id']}")
    assert browser.find("#total").text == "120" and "page 1 of 3" in browser.text()
    assert len(browser.finds("tbody tr")) == 50
    browser.follow("Next →")
    assert "page=2" in browser.path and browser.finds("tbody tr td.id")[0].text == "51"
    api = ok(operator.get(f"{server.url}/api/collections/{leads['id']}/records", params={"limit": 50, "offset": 50}))
    assert api["records"][0]["id"] == 51 and api["total"] == 120
    browser.open(f"/databases/{leads['id']}?page=3")
    assert len(browser.finds("tbody tr")) == 20
    # A page past the last (an old bookmark, a table that shrank) says so, and leads to the last.
    browser.open(f"/databases/{leads['id']}?page=9")
    said = browser.find("#grid > .flash.past-end").text  # at the top, where "page 9 of 3" used to be
    assert said.startswith("Page 9 is past the last page (3): there are 120 records") and "No records yet" not in browser.text()
    assert "page 9 of 3" not in browser.text()
    browser.shot("past-the-last-page")
    browser.follow("Go to page 3")
    assert len(browser.finds("tbody tr")) == 20


def test_search_hits_page_and_sort_like_a_listing(browser: Browser, boot, leads, operator, server, db) -> None:
    bulk_records(db, leads, 120)
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{leads['id']}?q=example")
    assert browser.find("#total").text == "120" and "page 1 of 3" in browser.text()
    assert len(browser.finds("tbody tr")) == 50
    browser.follow("Next →")
    assert "page=2" in browser.path and len(browser.finds("tbody tr")) == 50
    # A sorted header orders the hits by that column instead of rank, as the records route does.
    browser.open(f"/databases/{leads['id']}?q=example&sort=score&dir=desc")
    first = [td.text for td in browser.finds("tbody tr td.id")][:3]
    api = ok(operator.get(f"{server.url}/api/collections/{leads['id']}/records",
                          params={"query": "example", "order": "score desc", "limit": 3}))
    assert first == [str(r["id"]) for r in api["records"]] == ["120", "119", "118"]
    assert "sorted by score" in browser.text()


def test_add_edit_and_delete_a_record(browser: Browser, boot, people, operator, server) -> None:
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{people['id']}")
    browser.follow("New record")
    names = {el.get_attribute("name") for el in browser.finds("form.record-form [name]")}
    assert {c["name"] for c in PEOPLE} <= names
    browser.fill({"name": "Katherine Johnson", "city": "Hampton", "stage": "active", "age": "101",
                  "vip": "true", "tags": "nasa\norbits"})
    browser.find('input[name="langs"][value="en"]').click()
    # datetime-local's keyboard order follows the locale; set the value as the picker would.
    browser.driver.execute_script("arguments[0].value = '2024-02-03T10:15'", browser.find("#field-met_at"))
    browser.shot("new-record")
    browser.press("Save")
    assert "Record added" in browser.text()
    record = ok(operator.get(f"{server.url}/api/collections/{people['id']}/records/1"))
    assert record["name"] == "Katherine Johnson" and record["age"] == 101 and record["vip"] is True
    assert record["tags"] == ["nasa", "orbits"] and record["langs"] == ["en"] and record["stage"] == "active"
    assert record["met_at"] == "2024-02-03T10:15:00Z"
    # Edit: only what changed is sent; emptying an optional input clears it.
    browser.fill({"city": "", "age": "102"})
    browser.press("Save")
    assert "Saved." in browser.text()
    record = ok(operator.get(f"{server.url}/api/collections/{people['id']}/records/1"))
    assert record["city"] is None and record["age"] == 102 and record["version"] == 2
    assert record["tags"] == ["nasa", "orbits"]
    # The provenance strip: the latest change and the History.
    strip = browser.find("#provenance")
    assert "update" in strip.text.lower() and boot["email"] in strip.text and "v2" in strip.text
    strip.find_element(browser.By.CSS_SELECTOR, "summary").click()
    assert len(strip.find_elements(browser.By.CSS_SELECTOR, "ol.history li")) == 2
    browser.shot("record-history")
    # Delete behind a confirmation naming the record.
    browser.follow("Delete record…")
    assert "Delete record 1 of people" in browser.text()
    browser.press("Delete record 1")
    assert operator.get(f"{server.url}/api/collections/{people['id']}/records/1").status_code == 404


def test_a_refused_save_shows_every_problem_beside_its_field(browser: Browser, boot, people, operator, server) -> None:
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{people['id']}/records/new")
    browser.fill({"city": "Paris", "age": "forty", "met_at": ""})
    # The inline hint as the field is left; it does not stop the save, the store decides.
    assert "expected a number" in browser.find('[data-kind="number"] .problem.inline').text
    browser.press("Save")
    problems = {el.find_element(browser.By.XPATH, "./..").find_element(browser.By.CSS_SELECTOR, "[name]")
                .get_attribute("name"): el.text for el in browser.finds(".control .problem")}
    assert set(problems) == {"name", "age"}
    assert "missing required column" in problems["name"] and "expected number" in problems["age"]
    assert "2 problems" in browser.find(".flash.error").text
    assert browser.find('[name="city"]').get_attribute("value") == "Paris"
    assert browser.find('[name="age"]').get_attribute("value") == "forty"
    # Said to a screen reader as well, and the first field with a problem has the focus.
    name = browser.find('[name="name"]')
    assert name.get_attribute("aria-invalid") == "true" and browser.find('[name="city"]').get_attribute("aria-invalid") is None
    described = [browser.find("#" + i).text for i in name.get_attribute("aria-describedby").split()]
    # (the problem first, then the column's description)
    assert len(described) == 2 and "missing required column" in described[0] and described[1] == "full name"
    assert browser.driver.switch_to.active_element == name
    browser.shot("refused")
    assert ok(operator.get(f"{server.url}/api/collections/{people['id']}/records"))["total"] == 0


def test_save_submits_on_the_first_click_while_a_field_with_a_problem_has_focus(browser: Browser, boot, people,
                                                                              server) -> None:
    """Leaving a field shows its inline hint; when the field is left by clicking Save, the hint
    must not move the button from under that click (the save would silently not happen)."""
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{people['id']}/records/new")
    browser.fill({"name": "Ada"})
    age = browser.find('[name="age"]')
    age.click()
    age.send_keys("12abc")
    browser.press("Save")  # waits for the answer page: it fails if the click was swallowed
    assert "expected number" in browser.find('[data-kind="number"] .problem').text
    assert browser.find('[name="age"]').get_attribute("value") == "12abc"


def test_a_record_that_no_longer_fits_its_columns_says_so_and_shows_its_values_as_json(
        browser: Browser, boot, people, operator, server) -> None:
    """After vip is retyped from boolean to text, a record holding true says what no longer fits
    whenever it is opened (a save through the form used to hide the store's warning), its field
    shows true (JSON), not Python's True, and a save stores what the form showed."""
    seed_people(operator, server, people)
    columns = [dict(c, type="text") if c["name"] == "vip" else c for c in PEOPLE]
    r = operator.patch(f"{server.url}/api/collections/{people['id']}", json={"columns": columns})
    assert r.status_code == 200, r.text
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{people['id']}/records/1")
    assert 'column "vip": expected text; got true' in browser.find(".flash.misfits").text
    assert browser.find('[name="vip"]').get_attribute("value") == "true"
    browser.shot("misfit")
    # Saving stores what the form showed: the text "true", which fits, so the notice goes.
    browser.fill({"city": "Paris"})
    browser.press("Save")
    assert "Saved." in browser.text() and not browser.finds(".flash.misfits")
    got = ok(operator.get(f"{server.url}/api/collections/{people['id']}/records/1"))
    assert (got["vip"], got["city"]) == ("true", "Paris")
    browser.shot("saved")


def test_values_the_columns_no_longer_accept_survive_a_save_of_another_field(
        browser: Browser, boot, people, operator, server) -> None:
    """Retyping a column or narrowing its values leaves stored values as they are (the spec). Each
    is shown in an input that can hold it (a checked box for an item no longer listed, an option
    for a boolean column's text, a text input for a datetime column's word), so a save that
    changes another field keeps them: the form used to send its blank inputs and clear them. A
    text that starts with a line break keeps it too (HTML drops one right after <textarea>)."""
    seed_people(operator, server, people)  # record 1: Ada, stage active, age 36, langs en + fr
    ok(operator.patch(f"{server.url}/api/collections/{people['id']}/records/1",
                      json={"body": {"city": "\n\nLondon\n  north"}}))
    columns = [dict(c, values=["en", "de"]) if c["name"] == "langs"
               else {k: v for k, v in dict(c, type="datetime").items() if k != "values"} if c["name"] == "stage"
               else dict(c, type="boolean") if c["name"] == "age" else c for c in PEOPLE]
    ok(operator.patch(f"{server.url}/api/collections/{people['id']}", json={"columns": columns}))
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{people['id']}/records/1")
    notice = browser.find(".flash.misfits").text
    assert 'column "stage"' in notice and 'column "age"' in notice and 'column "langs"' in notice
    assert browser.find('[name="stage"]').get_attribute("value") == "active"
    assert browser.find('[name="age"]').get_attribute("value") == "36"
    assert [b.get_attribute("value") for b in browser.finds('[name="langs"]:checked')] == ["en", "fr"]
    assert browser.find('[name="city"]').get_attribute("value") == "\n\nLondon\n  north"
    browser.shot("misfits-kept")
    browser.fill({"name": "Ada King"})
    browser.press("Save")
    assert "Saved." in browser.text()
    got = ok(operator.get(f"{server.url}/api/collections/{people['id']}/records/1"))
    assert (got["name"], got["stage"], got["age"], got["langs"], got["city"]) == (
        "Ada King", "active", 36, ["en", "fr"], "\n\nLondon\n  north")


def test_a_typed_number_is_stored_exactly_or_refused(boot, people, operator, server) -> None:
    """What is typed in a number field is the number stored: a 20-digit integer stays exact (it
    became a float), and text only float() reads as a number ("1_000", other scripts' digits) is
    refused with the store's sentence instead of stored as 1000."""
    s = web_login(server, boot["email"], boot["password"])
    base = f"{server.url}/databases/{people['id']}/records"
    token = csrf_of(s.get(f"{base}/new").text)
    r = s.post(f"{base}/new", data={"csrf_token": token, "name": "Big", "age": "12345678901234567890"})
    assert r.status_code == 200 and "Record 1" in r.text
    assert ok(operator.get(f"{server.url}/api/collections/{people['id']}/records/1"))["age"] == 12345678901234567890
    for typed in ("1_000", "\u0661\u0662\u0663", "inf"):
        r = s.post(f"{base}/new", data={"csrf_token": token, "name": f"Typed {typed}", "age": typed})
        assert r.status_code == 422 and "expected number" in r.text, typed
    assert ok(operator.get(f"{server.url}/api/collections/{people['id']}/records"))["total"] == 1


def test_a_stale_edit_says_so_and_shows_the_newer_values(browser: Browser, boot, people, operator, server) -> None:
    seed_people(operator, server, people)
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{people['id']}/records/1")
    ok(operator.patch(f"{server.url}/api/collections/{people['id']}/records/1", json={"body": {"city": "Oxford"}}))
    browser.fill({"city": "Cambridge"})
    browser.press("Save")
    assert "changed since you opened it" in browser.text()
    assert browser.find('[name="city"]').get_attribute("value") == "Oxford"
    assert "Cambridge" in browser.find(".stale").text
    assert "tags" not in browser.find(".stale").text and "met_at" not in browser.find(".stale").text
    # The focus is on the news, not left at the page's start.
    assert browser.driver.execute_script("return document.activeElement.classList.contains('stale')")
    browser.shot("stale")
    assert ok(operator.get(f"{server.url}/api/collections/{people['id']}/records/1"))["city"] == "Oxford"


def test_export_clear_and_delete(browser: Browser, boot, people, operator, server) -> None:
    seed_people(operator, server, people)
    s = web_login(server, boot["email"], boot["password"])
    lines = s.get(f"{server.url}/databases/{people['id']}/export.jsonl").text.splitlines()
    assert [json.loads(x)["name"] for x in lines] == ["Ada Lovelace", "Alan Turing", "Grace Hopper"]
    r = s.get(f"{server.url}/databases/{people['id']}/export.csv")
    assert r.headers["Content-Type"].startswith("text/csv") and "people.csv" in r.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(r.content.decode("utf-8-sig"))))
    assert rows[0]["name"] == "Ada Lovelace" and rows[0]["tags"] == "math; poetry" and rows[0]["vip"] == "true"
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{people['id']}")
    browser.follow("Clear all records…")
    assert "all 3 records of people" in browser.text()
    browser.shot("confirm-clear")
    browser.press("Clear 3 records")
    assert ok(operator.get(f"{server.url}/api/collections/{people['id']}/records"))["total"] == 0
    browser.follow("Delete table…")
    assert "deletes the table people" in browser.text()
    browser.press("Delete people")
    assert browser.path.startswith("/databases") and "Table deleted" in browser.text()
    assert operator.get(f"{server.url}/api/collections/{people['id']}").status_code == 404


def test_another_organisations_ids_answer_404(server: RunningServer, boot, db) -> None:
    other = admin.bootstrap(db, org_name="Other", email="eve@example.com", password="other password 1")
    theirs = make_collection(db, other["org_id"], "secrets", LEADS)
    s = web_login(server, boot["email"], boot["password"])
    for path in ("", "/records/new", "/records/1", "/columns", "/access", "/export.csv", "/events", "/clear"):
        assert s.get(f"{server.url}/databases/{theirs['id']}{path}").status_code == 404, path
    token = csrf_of(s.get(f"{server.url}/databases").text)
    assert s.post(f"{server.url}/databases/{theirs['id']}/delete", data={"csrf_token": token}).status_code == 404
    # Their own member still sees it: the 404 is about who asks.
    theirs_page = web_login(server, other["email"], other["password"]).get(f"{server.url}/databases/{theirs['id']}")
    assert theirs_page.status_code == 200 and "secrets" in theirs_page.text


def test_record_writes_need_the_csrf_token(server: RunningServer, boot, people, operator) -> None:
    s = web_login(server, boot["email"], boot["password"])
    r = s.post(f"{server.url}/databases/{people['id']}/records/new", data={"name": "Mallory"})
    assert r.status_code == 403
    assert ok(operator.get(f"{server.url}/api/collections/{people['id']}/records"))["total"] == 0
    token = csrf_of(s.get(f"{server.url}/databases/{people['id']}/records/new").text)
    r = s.post(f"{server.url}/databases/{people['id']}/records/new", data={"name": "Mallory", "csrf_token": token})
    assert r.status_code == 200
    assert ok(operator.get(f"{server.url}/api/collections/{people['id']}/records"))["total"] == 1


def test_a_record_over_the_size_cap_shows_the_form_again_with_what_was_typed(server: RunningServer, boot, people,
                                                                            operator) -> None:
    """The 32 KB cap is a refusal like any other: the form comes back with every value typed and
    a sentence saying what would fit, not a bare error page that loses the input."""
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(f"{server.url}/databases/{people['id']}/records/new").text)
    long_city = "x" * 40_000
    r = s.post(f"{server.url}/databases/{people['id']}/records/new",
               data={"name": "Ada Lovelace", "city": long_city, "age": "36", "csrf_token": token})
    assert r.status_code == 422, r.text[:500]
    assert re.search(r"indexed value text: 400\d\d bytes; at most 32768 \(32 KB\): shorten the longest text", r.text)
    assert 'value="Ada Lovelace"' in r.text and long_city in r.text and 'value="36"' in r.text
    assert ok(operator.get(f"{server.url}/api/collections/{people['id']}/records"))["total"] == 0


def test_a_table_reads_without_javascript(server: RunningServer, boot, people, operator) -> None:
    """The grid, its filters and its paging are server-rendered HTML: a client without scripts
    (here plain requests) reads the same rows the browser shows."""
    seed_people(operator, server, people)
    s = web_login(server, boot["email"], boot["password"])
    html = s.get(f"{server.url}/databases/{people['id']}", params={"f.stage": "active"}).text
    assert html.count("<tr data-href") == 1 and "Ada Lovelace" in html and "Alan Turing" not in html
    assert html.count('type="search"') == 1


def test_search_as_you_type_keeps_the_url(browser: Browser, boot, people, operator, server) -> None:
    seed_people(operator, server, people)
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{people['id']}")
    browser.find('input[type="search"]').send_keys("hopper")
    browser.wait(lambda d: len(browser.finds("tbody tr")) == 1)
    assert "Grace Hopper" in browser.find("tbody tr").text and "q=hopper" in browser.path
    browser.driver.refresh()
    assert grid_names(browser) == ["Grace Hopper"]


def test_values_are_shown_as_text_never_as_markup_or_formulas(server: RunningServer, boot, people, operator) -> None:
    hostile = {"name": '<script>alert("x")</script>', "city": "=HYPERLINK(\"http://evil.example\")",
               "tags": ["<b>bold</b>"], "stage": "new"}
    ok(operator.post(f"{server.url}/api/collections/{people['id']}/records", json={"body": hostile}), 201)
    s = web_login(server, boot["email"], boot["password"])
    for path in ("", "/records/1"):
        html = s.get(f"{server.url}/databases/{people['id']}{path}").text
        assert "<script>alert" not in html and "&lt;script&gt;alert(" in html and "<b>bold" not in html
    rows = list(csv.DictReader(io.StringIO(s.get(f"{server.url}/databases/{people['id']}/export.csv")
                                           .content.decode("utf-8-sig"))))
    assert rows[0]["city"].startswith("'=HYPERLINK")


def test_a_records_history_pages_back_to_its_creation(boot, people, operator, server) -> None:
    """History under a record expands the full change list, a page at a time (the store's cursor)."""
    base = f"{server.url}/api/collections/{people['id']}/records"
    ok(operator.post(base, json={"body": {"name": "Ada Lovelace", "age": 0}}), 201)
    for age in range(1, 30):
        ok(operator.patch(f"{base}/1", json={"body": {"age": age}}))
    s = web_login(server, boot["email"], boot["password"])
    page = s.get(f"{server.url}/databases/{people['id']}/records/1")
    assert page.status_code == 200 and page.text.count('<span class="op">update</span>') >= 20
    assert 'rel="next"' in page.text and "<span class=\"op\">create</span>" not in page.text.split("<details")[1]
    older = page.text.split('rel="next"')[0].rsplit('href="', 1)[1].split('"')[0].replace("&amp;", "&")
    last = s.get(server.url + older)
    assert last.status_code == 200 and 'rel="first"' in last.text and 'rel="next"' not in last.text
    assert '<span class="op">create</span>' in last.text.split("<details")[1]

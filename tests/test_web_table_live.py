"""The table page after a review with a 10 000-record table, in headless Chromium against the
real gateway: live refresh coalesced (a burst of changes costs a few page renders, not one per
change), a refresh that keeps the grid's scroll and moves nothing, First and Last in the pager,
and an export that says it takes the whole table. Record changes go through the API."""
from __future__ import annotations

import csv
import io
import logging
import math
import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from tests.web_browser import Browser, browser, chromium, desktop, phone  # noqa: F401 - fixtures
from test_records_support import LEADS, bulk_records, make_collection, ok
from test_web_notes import login

# A table wider than a desktop screen: twelve text columns of long values.
WIDE = [{"name": f"column_{i:02d}", "type": "text", "description": f"column {i}", "required": False,
         "unique": False} for i in range(12)]


@pytest.fixture
def leads(db, boot) -> dict[str, Any]:
    return make_collection(db, boot["org_id"], "leads", LEADS, guild_id=boot["guild_id"], purpose="sales leads")


@pytest.fixture
def wide(db, boot, server, operator) -> dict[str, Any]:
    table = make_collection(db, boot["org_id"], "wide", WIDE, purpose="a wide table")
    for n in range(8):
        body = {c["name"]: f"record {n} {c['name']} a rather long value to widen the column" for c in WIDE}
        ok(operator.post(f"{server.url}/api/collections/{table['id']}/records", json={"body": body}), 201)
    return table


class PageRenders(logging.Handler):
    """The gateway's access log, counting the GETs of one table page (the page and its grid
    fetches: the same address)."""

    def __init__(self, collection_id: int) -> None:
        super().__init__(logging.INFO)
        self.pattern = re.compile(rf"^GET /databases/{collection_id} ")
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:  # (called holding the handler's lock)
        if self.pattern.match(record.getMessage()):
            self.count += 1


@pytest.fixture
def access_log() -> Iterator[logging.Logger]:
    log = logging.getLogger("hostfinder.access")
    level = log.level
    log.setLevel(logging.INFO)
    try:
        yield log
    finally:
        log.setLevel(level)


def mark_grid(browser: Browser) -> Any:
    """Mark the grid's markup; a condition true once a refresh replaced it."""
    browser.driver.execute_script("document.getElementById('summary').dataset.old = '1'")
    return lambda d: d.execute_script("const s = document.getElementById('summary'); return !!s && !s.dataset.old")


def live(browser: Browser) -> None:
    browser.wait(lambda d: "Live" in browser.find("#live-status").text)


# --- 1. a burst of changes costs a few page renders, not one per change ---------------------------

def test_a_burst_of_changes_is_one_refresh_a_second_not_one_per_change(
        browser: Browser, boot, leads, db, server, operator, access_log) -> None:
    """An agent PATCHing records 20 times a second made each open table page fetch the whole grid
    on every change event (505 page GETs in 30 s from one tab). Now a fetch is in flight at most
    once, and at most about once a second: 50 changes in a burst are a handful of renders, and the
    grid ends showing the last change."""
    bulk_records(db, leads, 60)
    login(browser, boot)
    browser.open(f"/databases/{leads['id']}")
    live(browser)
    renders = PageRenders(leads["id"])
    access_log.addHandler(renders)
    try:
        url = f"{server.url}/api/collections/{leads['id']}/records/5"
        started = time.monotonic()
        for n in range(50):  # about 20 a second, as the reviewer's agent wrote
            ok(operator.patch(url, json={"body": {"email": f"change{n}@example.com"}}))
            time.sleep(0.05)
        row = "#grid tr[data-href*='/records/5'] td:nth-child(2)"
        browser.wait(lambda d: browser.find(row).text == "change49@example.com", timeout=20)
        # From the first change until the page showed the last: however long a slow machine took.
        arriving = time.monotonic() - started
        # The status says when, as before. A fetch that was still due may follow: waited for
        # (longer than the refresh's gap), then counted too.
        assert re.fullmatch(r"Live · updated \d\d:\d\d:\d\d UTC", browser.find("#live-status").text)
        time.sleep(2.5)
    finally:
        access_log.removeHandler(renders)
    # At most one fetch a second while the changes arrive, one more for the last of them and one
    # that was due (each fetched the page before the fix: 50). The bound follows the seconds they
    # took, so a slow machine does not fail it; it stays far below 50 unless coalescing is gone.
    bound = math.ceil(arriving) + 3
    print(f"{renders.count} page renders for 50 changes in {arriving:.1f} s (at most {bound})")
    assert 1 <= renders.count <= bound, f"{renders.count} page renders for 50 changes in {arriving:.1f} s"
    assert browser.find(row).text == "change49@example.com"
    assert browser.find("#total").text == "60"
    browser.check_console()


def test_changes_during_a_slow_fetch_are_taken_in_by_one_more_fetch(
        browser: Browser, boot, leads, db, server, operator) -> None:
    """At most one grid fetch in flight: changes that arrive while one runs mark the grid stale,
    and one fetch follows when it ends, so the last change is never missed. Counted in the page
    (the fetches it starts)."""
    bulk_records(db, leads, 60)
    login(browser, boot)
    browser.open(f"/databases/{leads['id']}")
    live(browser)
    # Each grid fetch answered a moment late (as a busy server would), and counted as it starts.
    browser.driver.execute_script("""
        window.gridFetches = 0; window.inFlight = 0; window.mostInFlight = 0;
        const fetch = window.fetch;
        window.fetch = (...args) => {
          window.gridFetches++; window.inFlight++; window.mostInFlight = Math.max(window.mostInFlight, window.inFlight);
          return new Promise((wait) => setTimeout(wait, 700)).then(() => fetch(...args))
            .finally(() => { window.inFlight--; });
        };""")
    url = f"{server.url}/api/collections/{leads['id']}/records/7"
    started = time.monotonic()
    for n in range(30):
        ok(operator.patch(url, json={"body": {"score": 1000 + n}}))
    row = "#grid tr[data-href*='/records/7'] td:nth-child(4)"
    browser.wait(lambda d: browser.find(row).text == "1029", timeout=30)
    took = time.monotonic() - started
    counts = browser.driver.execute_script("return [window.gridFetches, window.mostInFlight]")
    assert counts[1] == 1, f"{counts[1]} grid fetches in flight at once"
    # About one a second at most, however long the 30 changes took on this machine (one for each
    # would be 30).
    assert 1 <= counts[0] <= int(took) + 3 < 30, f"{counts[0]} grid fetches for 30 changes in {took:.1f} s"


# --- 2. a refresh keeps the grid's scroll, and the status moves nothing ---------------------------

def scroller(browser: Browser) -> str:
    """Which box scrolls the grid sideways: its card on a desktop, the table itself on a phone."""
    return browser.driver.execute_script(
        "const t = document.querySelector('#grid table.records');"
        "return t.scrollWidth > t.clientWidth + 1 && getComputedStyle(t).overflowX === 'auto'"
        " ? '#grid table.records' : '#grid .scroll'")


def scroll_left(browser: Browser, css: str) -> int:
    return round(browser.driver.execute_script("return document.querySelector(arguments[0]).scrollLeft", css))


@pytest.mark.parametrize("screen, offset", [("desktop", 370), ("phone", 600)])
def test_a_live_refresh_keeps_the_grids_sideways_scroll(request, screen: str, offset: int, boot, wide, server,
                                                        operator) -> None:
    browser: Browser = request.getfixturevalue(screen)
    login(browser, boot)
    browser.open(f"/databases/{wide['id']}")
    live(browser)
    box = scroller(browser)
    browser.driver.execute_script("document.querySelector(arguments[0]).scrollLeft = arguments[1]", box, offset)
    assert scroll_left(browser, box) == offset
    fresh = mark_grid(browser)
    ok(operator.patch(f"{server.url}/api/collections/{wide['id']}/records/3",
                      json={"body": {"column_00": "changed while scrolled"}}))
    browser.wait(fresh)
    assert "changed while scrolled" in browser.find("#grid tr[data-href*='/records/3']").get_attribute("textContent")
    assert scroll_left(browser, box) == offset, f"{box} scrolled back to {scroll_left(browser, box)}"
    browser.shot(f"{screen}-after-live-refresh")


def test_the_live_status_moves_nothing_on_a_phone(phone: Browser, boot, leads, db, server, operator) -> None:
    """The first "Live · updated HH:MM:SS UTC" wrapped the phone's toolbar (77 -> 119 px) and moved
    the grid down 42 px: its room is there from the start."""
    bulk_records(db, leads, 120)
    login(phone, boot)
    phone.open(f"/databases/{leads['id']}")

    def where() -> list[int]:
        return phone.driver.execute_script(
            "return [document.querySelector('#table-query .toolbar').getBoundingClientRect().height,"
            " document.getElementById('grid').getBoundingClientRect().top + window.scrollY].map(Math.round)")
    at_first = where()
    live(phone)
    assert where() == at_first
    fresh = mark_grid(phone)
    ok(operator.patch(f"{server.url}/api/collections/{leads['id']}/records/1", json={"body": {"status": "won"}}))
    phone.wait(fresh)
    assert re.fullmatch(r"Live · updated \d\d:\d\d:\d\d UTC", phone.find("#live-status").text)
    assert where() == at_first, f"toolbar height and grid top {at_first} became {where()}"
    # On one line, inside the screen.
    status = phone.find("#live-status").rect
    assert status["height"] < 24 and status["x"] + status["width"] <= 390
    phone.shot("phone-table-live")


# --- 3. First and Last, keeping the view ------------------------------------------------------------

def test_first_and_last_go_to_the_ends_keeping_the_view(browser: Browser, boot, leads, db, server, operator) -> None:
    """10 000 records are 200 pages: reaching the last took 199 clicks on Next."""
    bulk_records(db, leads, 600)
    login(browser, boot)
    base = f"/databases/{leads['id']}"
    # A view: a filter (scores 40 and up: 561 records, 12 pages) sorted by score, descending.
    browser.open(base + "?f.score.gte=40&sort=score&dir=desc&page=3")
    assert "page 3 of 12" in browser.find("#summary").text
    browser.navigate(browser.find("#summary a[rel=last]"))
    assert browser.path == base + "?f.score.gte=40&sort=score&dir=desc&page=12"
    assert "page 12 of 12" in browser.find("#summary").text and browser.find("#total").text == "561"
    ids = [td.text for td in browser.finds("tbody tr td.id")]
    assert ids == [str(n) for n in range(50, 39, -1)]   # the last page: the 11 lowest scores
    assert not browser.finds("#summary a[rel=last]") and not browser.finds("#summary a[rel=next]")
    api = ok(operator.get(f"{server.url}/api/collections/{leads['id']}/records",
                          params={"where": '{"score": {"gte": 40}}', "order": "score desc", "limit": 50,
                                  "offset": 550}))
    assert ids == [str(r["id"]) for r in api["records"]]
    browser.shot("desktop-pager-last-page")
    browser.follow("« First")
    assert browser.path == base + "?f.score.gte=40&sort=score&dir=desc"
    assert "page 1 of 12" in browser.find("#summary").text
    assert [td.text for td in browser.finds("tbody tr td.id")][:2] == ["600", "599"]
    assert not browser.finds("#summary a[rel=first]") and not browser.finds("#summary a[rel=prev]")
    # The pager below the grid has them too; a search is kept as well.
    browser.open(base + "?q=example&page=2")
    bottom = browser.find(".pager.bottom")
    browser.navigate(bottom.find_element(browser.By.LINK_TEXT, "Last »"))
    assert browser.path == base + "?q=example&page=12" and "page 12 of 12" in browser.find("#summary").text
    browser.navigate(browser.find(".pager.bottom").find_element(browser.By.LINK_TEXT, "« First"))
    assert browser.path == base + "?q=example" and "page 1 of 12" in browser.find("#summary").text


def test_the_pager_fits_a_phone(phone: Browser, boot, leads, db) -> None:
    bulk_records(db, leads, 600)
    login(phone, boot)
    phone.open(f"/databases/{leads['id']}?page=5")
    live(phone)
    links = phone.finds("#summary a")
    assert [a.text for a in links] == ["« First", "← Previous", "Next →", "Last »"]
    for a in links + phone.finds(".pager.bottom a"):
        r = a.rect
        assert r["x"] >= 0 and r["x"] + r["width"] <= 390, a.text
        assert r["height"] < 24, f"{a.text!r} is split over lines"
    assert phone.driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth") == 0
    phone.shot("phone-pager")


# --- 4. what Export takes ----------------------------------------------------------------------------

def test_export_says_it_takes_the_whole_table_and_does(browser: Browser, boot, leads, db, server) -> None:
    """With a filter on, the CSV link downloaded every record without saying so. The links say
    what they take (the whole table, not this view's matches), and the download is that."""
    bulk_records(db, leads, 120)
    login(browser, boot)
    browser.open(f"/databases/{leads['id']}?f.score.lte=30&sort=score&dir=desc")
    assert browser.find("#total").text == "30"
    said = browser.find("#export-what").text
    assert said == "Export the whole table (120 records, not only the 30 matches of this view):"
    for fmt in ("JSONL", "CSV"):
        link = browser.link(fmt)
        assert link.get_attribute("aria-describedby") == "export-what"
        assert link.get_attribute("aria-label") == f"Export as {fmt}"
    # The download, with this browser's session: the 120 records by id, as said.
    s = requests.Session()
    for cookie in browser.driver.get_cookies():
        s.cookies.set(cookie["name"], cookie["value"])
    r = s.get(browser.link("CSV").get_attribute("href"))
    assert r.status_code == 200 and r.headers["Content-Type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.content.decode("utf-8-sig"))))
    assert [int(row["id"]) for row in rows] == list(range(1, 121))
    assert list(rows[0]) == ["id", "email", "status", "score", "signed_up_at", "created_at", "updated_at",
                             "updated_by", "version"]
    lines = s.get(browser.link("JSONL").get_attribute("href")).text.splitlines()
    assert len(lines) == 120
    # Without a filter there is nothing to contrast: the count alone.
    browser.open(f"/databases/{leads['id']}")
    assert browser.find("#export-what").text == "Export the whole table (120 records):"
    browser.shot("export-whole-table")


def test_the_export_count_follows_a_live_refresh(browser: Browser, boot, leads, db, server, operator) -> None:
    bulk_records(db, leads, 3)
    login(browser, boot)
    browser.open(f"/databases/{leads['id']}")
    live(browser)
    fresh = mark_grid(browser)
    ok(operator.post(f"{server.url}/api/collections/{leads['id']}/records",
                     json={"body": {"email": "new@example.com"}}), 201)
    browser.wait(fresh)
    browser.wait(lambda d: browser.find("#export-what").text == "Export the whole table (4 records):")


"""Creating and changing tables in the browser: the columns editor, who reaches a table, and the
live refresh when an agent adds a record. Each result is asserted through the API too."""
from __future__ import annotations

import re
import threading
import time
from datetime import datetime, timezone

from tests.conftest import running_gateway
from tests.web_browser import Browser, browser, chromium, csrf_of, web_login  # noqa: F401 - fixtures
from store import notes
from store.access import SYSTEM
from web import live
from test_records_support import PEOPLE, call_tool, make_collection, ok


def test_create_a_table_with_the_columns_editor(browser: Browser, boot, operator, server) -> None:
    browser.login(boot["email"], boot["password"])
    browser.follow("New table")
    browser.fill({"name": "leads", "purpose": "Sales leads the scouts find", "owner": str(boot["guild_id"]),
                  "col-0-name": "email", "col-0-description": "contact address", "col-0-required": "1",
                  "col-0-unique": "1",
                  "col-1-name": "status", "col-1-description": "pipeline state", "col-1-values": "new\nwon\nlost",
                  "col-2-name": "score", "col-2-type": "number", "col-2-description": "lead score"})
    browser.button("Add another column").click()
    browser.fill({"col-4-name": "vip", "col-4-type": "boolean", "col-4-description": "important"})
    browser.shot("new-table")
    browser.press("Save")
    assert "Table created" in browser.text()
    tables = ok(operator.get(f"{server.url}/api/collections"))["collections"]
    assert [t["name"] for t in tables] == ["leads"] and tables[0]["guild_id"] == boot["guild_id"]
    assert [(c["name"], c["type"]) for c in tables[0]["columns"]] == [
        ("email", "text"), ("status", "text"), ("score", "number"), ("vip", "boolean")]
    assert tables[0]["columns"][1]["values"] == ["new", "won", "lost"] and tables[0]["columns"][0]["unique"]


def test_a_refused_definition_shows_the_stores_sentences_and_keeps_the_rows(browser: Browser, boot, operator,
                                                                            server) -> None:
    browser.login(boot["email"], boot["password"])
    browser.open("/databases/new")
    browser.fill({"name": "Bad Name", "purpose": "x", "col-0-name": "id", "col-0-description": "",
                  "col-1-name": "when", "col-1-type": "datetime", "col-1-description": "a time", "col-1-unique": "1"})
    browser.press("Save")
    text = browser.text()
    assert 'the name "id" is reserved' in text and "unique applies to text or number columns only" in text
    assert "description is required" in text
    assert browser.find('[name="col-1-name"]').get_attribute("value") == "when"
    browser.shot("refused-definition")
    assert ok(operator.get(f"{server.url}/api/collections"))["collections"] == []


def test_listed_values_with_commas_survive_a_save_of_the_purpose(browser: Browser, boot, operator, server,
                                                                  db) -> None:
    """The editor sends every column on each save; listed values are one per line, so a value
    holding a comma (or spaces, or, through the API, a line break) comes back as it was: with
    comma-separated values a purpose-only save turned "11-1,000" into "11-1" and "000"."""
    listed = ["1-10", "11-1,000", "1,001+", " padded ", "two\nlines"]
    sizes = make_collection(db, boot["org_id"], "sizes", [
        {"name": "size", "type": "text", "description": "company size", "required": False, "unique": False,
         "values": listed}])
    ok(operator.post(f"{server.url}/api/collections/{sizes['id']}/records", json={"body": {"size": "1,001+"}}), 201)
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{sizes['id']}/columns")
    browser.fill({"purpose": "companies by size"})
    browser.shot("columns-values")
    browser.press("Save")
    assert "Purpose saved." in browser.text()
    got = ok(operator.get(f"{server.url}/api/collections/{sizes['id']}"))
    assert got["purpose"] == "companies by size" and got["columns"][0]["values"] == listed
    # Typed: one value a line, commas and all; blank lines are skipped.
    browser.fill({"col-0-values": "small, under 10\nlarge\n\n1,001+\n"})
    browser.press("Save")
    assert "Columns saved" in browser.text()
    got = ok(operator.get(f"{server.url}/api/collections/{sizes['id']}"))
    assert got["columns"][0]["values"] == ["small, under 10", "large", "1,001+"]


def test_a_table_over_the_limit_keeps_the_form_as_typed(boot, server, db) -> None:
    """The 101st table, or one for a guild that does not exist, is refused with the store's
    sentence on the form, what was typed still in it (not a bare error page)."""
    for i in range(100):
        make_collection(db, boot["org_id"], f"t{i}", [{"name": "a", "type": "text", "description": "d",
                                                       "required": False, "unique": False}])
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(f"{server.url}/databases/new").text)
    form = {"csrf_token": token, "name": "one_more", "purpose": "typed purpose", "owner": "",
            "col-0-name": "email", "col-0-type": "text", "col-0-description": "typed description"}
    r = s.post(f"{server.url}/databases/new", data=form)
    assert r.status_code == 422 and "the most it can hold (100)" in r.text, (r.status_code, r.text[:300])
    assert "typed purpose" in r.text and "typed description" in r.text
    r = s.post(f"{server.url}/databases/new", data=dict(form, owner="999"))
    assert r.status_code == 422 and "typed purpose" in r.text and "guild_id 999 is not a guild" in r.text


def test_rename_retype_and_remove_columns(browser: Browser, boot, operator, server, db) -> None:
    people = make_collection(db, boot["org_id"], "people", PEOPLE)
    for name in ("Ada", "Charles"):
        ok(operator.post(f"{server.url}/api/collections/{people['id']}/records",
                         json={"body": {"name": name, "city": "London", "age": 36}}), 201)
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{people['id']}/columns")
    browser.fill({"col-1-name": "town", "col-7-remove": "1"})  # city -> town; drop langs
    browser.shot("columns-editor")
    browser.press("Save")
    assert "Columns saved" in browser.text()
    described = ok(operator.get(f"{server.url}/api/collections/{people['id']}"))
    names = [c["name"] for c in described["columns"]]
    assert "town" in names and "city" not in names and "langs" not in names
    assert ok(operator.get(f"{server.url}/api/collections/{people['id']}/records/1"))["town"] == "London"
    # A change the records do not allow: the store's sentence, nothing half-applied (the rename
    # back to city in the same save does not happen either).
    browser.fill({"col-0-unique": "", "col-1-unique": "1", "col-1-name": "city"})
    browser.press("Save")
    assert 'column "city" cannot become unique: 2 live records repeat the value "London"' in browser.text()
    browser.shot("columns-refused")
    after = ok(operator.get(f"{server.url}/api/collections/{people['id']}"))
    assert [c["name"] for c in after["columns"]] == names
    # Someone else changed the table meanwhile: the editor's etag no longer matches.
    browser.open(f"/databases/{people['id']}/columns")
    ok(operator.patch(f"{server.url}/api/collections/{people['id']}", json={"purpose": "changed elsewhere"}))
    browser.fill({"col-0-description": "the full name"})
    browser.press("Save")
    assert "changed since you loaded it" in browser.text()


def test_who_reaches_a_table_and_editing_grants(browser: Browser, boot, operator, server, db) -> None:
    people = make_collection(db, boot["org_id"], "people", PEOPLE)
    browser.login(boot["email"], boot["password"])
    browser.open(f"/databases/{people['id']}/access")
    guild_form = browser.find("table.access-guilds tbody tr form")
    browser.fill({"mode": "read"}, within=guild_form)
    browser.press("Save", within=guild_form)
    assert "Access saved" in browser.text()
    access = ok(operator.get(f"{server.url}/api/agents/{boot['agent_id']}/collection-access"))
    entry = next(e for e in access["collections"] if e["collection_id"] == people["id"])
    assert entry["guild_mode"] == "read" and entry["effective"] == "read"
    assert browser.find("table.access-agents td.effective").text == "read"
    agent_form = browser.find("table.access-agents tbody tr form")
    browser.fill({"mode": "none"}, within=agent_form)
    browser.press("Save", within=agent_form)
    assert browser.find("table.access-agents td.effective").text == "no access"
    browser.shot("access")
    access = ok(operator.get(f"{server.url}/api/agents/{boot['agent_id']}/collection-access"))
    entry = next(e for e in access["collections"] if e["collection_id"] == people["id"])
    assert entry["agent_mode"] == "none" and entry["effective"] is None


def test_live_refresh_after_an_agents_record_add(browser: Browser, boot, service, server, db) -> None:
    """An agent's record_add appears on an open table page by itself, and the page says when, in
    UTC like every time it prints (here for an operator in New York)."""
    leads = make_collection(db, boot["org_id"], "leads", PEOPLE, guild_id=boot["guild_id"])
    browser.driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "America/New_York"})
    try:
        browser.login(boot["email"], boot["password"])
        browser.open(f"/databases/{leads['id']}")
        browser.wait(lambda d: "Live" in browser.find("#live-status").text)
        assert browser.finds("tbody tr") == []
        ok(call_tool(server, service, boot["agent_id"], "record_add", collection="leads", body={"name": "From an agent"}))
        browser.wait(lambda d: len(browser.finds("tbody tr")) == 1)
        assert "From an agent" in browser.find("tbody tr").text and browser.find("#total").text == "1"
        said = re.fullmatch(r"Live · updated (\d\d):(\d\d):(\d\d) UTC", browser.find("#live-status").text)
        assert said, browser.find("#live-status").text
        now = datetime.now(timezone.utc)
        shown = now.replace(hour=int(said[1]), minute=int(said[2]), second=int(said[3]))
        apart = (now - shown).total_seconds() % 86_400   # (either side of midnight)
        assert min(apart, 86_400 - apart) < 60, f"{said[0]} at {now:%H:%M:%S} UTC"
        browser.shot("live")
    finally:
        browser.driver.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": ""})


def test_a_page_told_to_poll_goes_live_again_once_a_stream_is_free(browser: Browser, boot, service, server, db,
                                                                    monkeypatch) -> None:
    """Opened while every stream slot was taken, a table page polls; once other pages close their
    streams it asks again (live.REASK_SECONDS, shortened here) and is live again for good."""
    monkeypatch.setattr(live, "REASK_SECONDS", 1.0)
    leads = make_collection(db, boot["org_id"], "leads", PEOPLE, guild_id=boot["guild_id"])
    s = web_login(server, boot["email"], boot["password"])
    url = f"{server.url}/databases/{leads['id']}/events"
    streams = [s.get(url, stream=True, timeout=10) for _ in range(live.MAX_STREAMS)]
    try:
        browser.login(boot["email"], boot["password"])
        browser.open(f"/databases/{leads['id']}")
        browser.wait(lambda d: "Refreshing every 15 s" in browser.find("#live-status").text)
    finally:
        for r in streams:
            r.close()
    browser.wait(lambda d: browser.find("#live-status").text == "Live", timeout=20)
    ok(call_tool(server, service, boot["agent_id"], "record_add", collection="leads", body={"name": "Pushed"}))
    browser.wait(lambda d: len(browser.finds("tbody tr")) == 1, timeout=5)  # pushed, not the 15 s poll
    assert "Pushed" in browser.find("tbody tr").text


def test_past_the_stream_limit_a_page_is_told_to_poll(server, boot, db, monkeypatch) -> None:
    """Each live stream holds a worker thread; past live.MAX_STREAMS the events route answers 204
    (EventSource stops, the page polls), and a closed stream frees its slot at once: the door
    tells the stream its client hung up, without waiting for a write to fail (the heartbeat is
    made longer than the test here, so only that can free the slots), and the stream asks even
    while other changes of the store keep arriving (here a note saved every 0.2 s)."""
    monkeypatch.setattr(live, "HEARTBEAT_SECONDS", 60.0)
    leads = make_collection(db, boot["org_id"], "leads", PEOPLE)
    s = web_login(server, boot["email"], boot["password"])
    url = f"{server.url}/databases/{leads['id']}/events"
    streams = [s.get(url, stream=True, timeout=10) for _ in range(live.MAX_STREAMS)]
    busy = threading.Event()

    def a_busy_store() -> None:
        n = 0
        while not busy.wait(0.2):
            n += 1
            with db.transaction() as conn:
                notes.write_note(conn, boot["org_id"], "org", None, "busy.md", f"{n}", SYSTEM)

    writer = threading.Thread(target=a_busy_store, daemon=True)
    try:
        assert all(r.status_code == 200 and r.headers["Content-Type"].startswith("text/event-stream")
                   for r in streams)
        assert next(streams[0].iter_lines(decode_unicode=True)).startswith("retry:")
        assert s.get(url, timeout=10).status_code == 204
        writer.start()
    finally:
        for r in streams:
            r.close()
    try:
        deadline = time.monotonic() + 10   # (it takes about a second: the stream looks once a second)
        while time.monotonic() < deadline:
            r = s.get(url, stream=True, timeout=10)
            r.close()
            if r.status_code == 200:
                break
            time.sleep(0.5)
        assert r.status_code == 200
    finally:
        busy.set()
        writer.join(5)


def test_a_stopping_gateway_ends_the_open_table_pages_streams_at_once(boot, db) -> None:
    """An open table page holds a live stream (and a worker thread) for up to a minute; a gateway
    asked to stop ends it first, so Ctrl-C on `make serve` with a tab open does not wait out the
    server's shutdown timeout, and the page's EventSource reconnects to the next server."""
    leads = make_collection(db, boot["org_id"], "leads", PEOPLE)
    with running_gateway(db) as server:
        s = web_login(server, boot["email"], boot["password"])
        r = s.get(f"{server.url}/databases/{leads['id']}/events", stream=True, timeout=10)
        lines = r.iter_lines(decode_unicode=True)
        assert next(lines).startswith("retry:")
        assert [next(lines), next(lines)] == ["event: ready", "data: {}"]
        server.gateway.stopping()
        # Without it the stream goes on: a keep-alive comment every few seconds for 55 s.
        rest = []
        for line in lines:
            rest.append(line)
            if line.startswith(":"):
                break
        assert rest == [""], f"the stream went on after the gateway began stopping: {rest}"


def test_pages_say_their_time_zone_direction_counts_and_which_row_a_button_saves(boot, server, service, db) -> None:
    """From a read review of the pages: datetimes in the grid said no zone; right-to-left text
    in a cell was reordered with its neighbours ("#1 مرحبا" showed as "1# مرحبا"); a single
    scope's page counted the whole organisation's notes; every Save on the Access tab read
    just "Save" to a screen reader."""
    people = make_collection(db, boot["org_id"], "people", PEOPLE, guild_id=boot["guild_id"])
    ok(call_tool(server, service, boot["agent_id"], "record_add", collection="people",
                 body={"name": "مرحبا بالعالم #1", "city": "Cairo"}))
    for key in ("a.md", "b.md"):
        ok(call_tool(server, service, boot["agent_id"], "note_write", level="guild", key=key, content="x"))
    ok(call_tool(server, service, boot["agent_id"], "note_write", level="agent", key="mine.md", content="x"))
    s = web_login(server, boot["email"], boot["password"])
    table = s.get(f"{server.url}/databases/{people['id']}").text
    assert 'updated_at <span class="muted">UTC</span>' in table
    assert '<td class="cell" dir="auto">مرحبا بالعالم #1</td>' in table
    notes = s.get(f"{server.url}/notes", params={"scope": f"agent-{boot['agent_id']}"}).text
    assert '<span class="muted count">1 note</span>' in notes
    assert '<span class="muted count">3 notes</span>' in s.get(f"{server.url}/notes").text
    access = s.get(f"{server.url}/databases/{people['id']}/access").text
    assert 'aria-label="Save agent Scout&#39;s access to people"' in access

"""What a keyboard or screen-reader user notices in the web app, in a real browser: where the
focus is after each action (document.activeElement), what the page's live region (#announce)
says, which sentences a field is described by (aria-invalid, aria-describedby), the title, and
aria-current. One test per group of defects a review found; each failed before its fix."""
from __future__ import annotations

import re
from typing import Any

import pytest
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select

from store import admin
from tests.web_browser import Browser, browser, chromium  # noqa: F401 - fixtures
from test_records_support import LEADS, PEOPLE, bulk_records, call_tool, make_collection, ok
from test_web_notes import login, press


@pytest.fixture
def people(db, boot) -> dict[str, Any]:
    return make_collection(db, boot["org_id"], "people", PEOPLE, purpose="people we work with")


def active(browser: Browser) -> Any:
    return browser.driver.switch_to.active_element


def is_active(browser: Browser, css: str, wait: float = 5) -> bool:
    """Whether the element ``css`` has the focus, waiting a moment for it (a page opened at a
    fragment places it after the browser's scroll to the fragment)."""
    check = lambda d: d.execute_script(  # noqa: E731
        "return document.activeElement === document.querySelector(arguments[0])", css)
    try:
        return bool(browser.wait(check, timeout=wait))
    except Exception:
        return False


def describe_active(browser: Browser) -> str:
    return browser.driver.execute_script(
        "const e = document.activeElement; return e.tagName + '#' + e.id + '[' + (e.getAttribute('name') || '') + '] '"
        " + (e.getAttribute('aria-label') || e.textContent.trim().slice(0, 60))")


def announced(browser: Browser, part: str) -> str:
    """Wait until the live region says ``part``; its text."""
    browser.wait(lambda d: part in (browser.find("#announce").get_attribute("textContent") or ""), timeout=10)
    return browser.find("#announce").get_attribute("textContent")


def described(browser: Browser, el: Any) -> list[str]:
    """The texts of the elements ``el`` is described by, in order."""
    ids = (el.get_attribute("aria-describedby") or "").split()
    return [browser.driver.execute_script("return document.getElementById(arguments[0]).textContent", i).strip()
            for i in ids]


def wait_for_fresh_grid(browser: Browser) -> None:
    """Mark the grid's markup, then wait until a refresh replaced it."""
    browser.driver.execute_script("document.getElementById('summary').dataset.old = '1'")

    def fresh(_: Any) -> bool:
        return browser.driver.execute_script("const s = document.getElementById('summary'); return !!s && !s.dataset.old")
    return fresh


def test_a_live_refresh_keeps_the_focus_where_it_was_in_the_grid(browser: Browser, boot, server, service, db) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    leads = make_collection(db, org, "leads", LEADS, guild_id=boot["guild_id"], purpose="sales leads")
    bulk_records(db, leads, 60)
    login(browser, boot)
    browser.open(f"/databases/{leads['id']}")
    browser.wait(lambda d: "Live" in browser.find("#live-status").text)
    changes = iter(range(100))

    def agent_changes(record: int = 5) -> None:
        fresh = wait_for_fresh_grid(browser)
        ok(call_tool(server, service, agent, "record_update", collection="leads", id=record,
                     body={"status": ["new", "won"][next(changes) % 2]}))
        browser.wait(fresh)

    # Next → in the summary: after the refresh the focus is on the new Next →.
    browser.driver.execute_script("document.querySelector('#summary a[rel=next]').focus()")
    agent_changes()
    assert is_active(browser, "#summary a[rel=next]"), describe_active(browser)
    browser.shot("next-still-focused")
    # Next → below the grid (the same address as the one above): that one, not the one above.
    bottom_next = ("return Array.from(document.querySelectorAll('.pager.bottom a'))"
                   ".find((a) => a.textContent.startsWith('Next'))")
    browser.driver.execute_script(bottom_next[len("return "):] + ".focus()")
    agent_changes()
    assert browser.driver.execute_script("return document.activeElement") == browser.driver.execute_script(
        bottom_next), describe_active(browser)
    # A sort heading: the same column's heading.
    browser.driver.execute_script("document.querySelectorAll('#grid thead th a')[1].focus()")
    agent_changes()
    assert active(browser).text.startswith("email"), describe_active(browser)
    # A record's link: the same record's.
    browser.driver.execute_script("document.querySelector('#grid tr[data-href$=\"/records/3\"] td.id a').focus()")
    agent_changes()
    assert active(browser).get_attribute("aria-label") == "Record 3", describe_active(browser)
    browser.shot("record-link-still-focused")
    # The record goes: the focus is on the summary (not the page's start), and the page did not scroll.
    browser.driver.execute_script("window.scrollTo(0, 0)")
    fresh = wait_for_fresh_grid(browser)
    ok(call_tool(server, service, agent, "record_remove", collection="leads", id=3))
    browser.wait(fresh)
    assert is_active(browser, "#summary"), describe_active(browser)
    # The clock is not read out on every refresh: the status is no live region.
    assert browser.find("#live-status").get_attribute("aria-live") is None
    assert "updated" not in browser.find("#announce").get_attribute("textContent")


def test_a_done_save_is_announced_titled_and_focused(browser: Browser, boot, server, service, operator, db,
                                                     people) -> None:
    org, agent, guild = boot["org_id"], boot["agent_id"], boot["guild_id"]
    ok(operator.post(f"{server.url}/api/collections/{people['id']}/records", json={"body": {"name": "Ada"}}), 201)
    login(browser, boot)
    # A record saved.
    browser.open(f"/databases/{people['id']}/records/1")
    browser.fill({"city": "Paris"})
    browser.press("Save")
    assert "done=saved" in browser.path
    assert is_active(browser, ".flash.ok"), describe_active(browser)
    assert announced(browser, "Saved.") == "Saved."
    assert browser.driver.title.startswith("Saved · people")
    browser.shot("record-saved-focused")
    # The Access tab: the focus stays on the row that was saved.
    browser.open(f"/databases/{people['id']}/access")
    row = browser.find(f"#access-guild_id-{guild}")
    Select(row.find_element(browser.By.NAME, "mode")).select_by_value("read")
    browser.navigate(browser.button("Save", within=row))
    assert is_active(browser, f"#access-guild_id-{guild} select"), describe_active(browser)
    assert "Access saved." in announced(browser, "Access saved.")
    assert browser.driver.title.startswith("Saved · ")
    browser.shot("access-row-focused")
    # An agent's State and a guild's: the row on that table.
    for page in (f"/agents/{agent}#collections", f"/guilds/{guild}"):
        browser.open(page)
        row = browser.find(f"#access-collection_id-{people['id']}")
        Select(row.find_element(browser.By.NAME, "mode")).select_by_value("write")
        browser.navigate(browser.button("Save", within=row))
        assert is_active(browser, f"#access-collection_id-{people['id']} select"), (page, describe_active(browser))
        announced(browser, "Access saved.")
    # A note saved with Ctrl+S.
    admin.set_agent(db, agent, write_org=True)
    ok(call_tool(server, service, agent, "note_write", level="org", key="plan.md", content="one\n"))
    browser.open(f"/notes/org/{org}/plan.md")
    editor = browser.find("#note-content")
    editor.send_keys(Keys.END, "two")
    old = browser.find("html")
    editor.send_keys(Keys.CONTROL, "s")
    browser.wait(lambda d: "done=saved" in browser.path and browser.finds(".flash.ok"))
    assert is_active(browser, ".flash.ok"), describe_active(browser)
    assert announced(browser, "Saved.") and browser.driver.title.startswith("Saved · plan.md")
    del old
    # The table deleted.
    browser.open(f"/databases/{people['id']}/delete")
    browser.press("Delete people")
    assert is_active(browser, ".flash.ok") and announced(browser, "Table deleted.")
    assert browser.driver.title.startswith("Deleted · Databases")


def test_a_change_of_view_says_what_is_listed(browser: Browser, boot, server, operator, people) -> None:
    for name in ("Ada Lovelace", "Alan Turing", "Grace Hopper"):
        ok(operator.post(f"{server.url}/api/collections/{people['id']}/records", json={"body": {"name": name}}), 201)
    login(browser, boot)
    browser.open(f"/databases/{people['id']}")
    assert browser.driver.title == "people · 3 records · Host Finder"
    # A search sent with Enter: the page arrives with the focus on the summary, the view in its title.
    box = browser.find('input[type="search"]')
    box.send_keys("Ada")
    box.send_keys(Keys.ENTER)
    browser.wait(lambda d: "q=Ada" in browser.path and is_active(browser, "#summary"))
    assert browser.driver.title == "people · search “Ada” · 1 match · Host Finder"
    browser.shot("search-summary-focused")
    # A sort heading followed with the keyboard.
    heading = browser.finds("#grid thead th a")[1]
    heading.send_keys(Keys.ENTER)
    browser.wait(lambda d: "sort=name" in browser.path)
    assert is_active(browser, "#summary") and "sorted by name ascending" in browser.driver.title
    # Search as you type: the new count is read out, the focus stays in the box, the title follows.
    browser.open(f"/databases/{people['id']}")
    box = browser.find('input[type="search"]')
    box.send_keys("Grace")
    said = announced(browser, "1 match")
    assert said.startswith("1 match"), said
    assert is_active(browser, 'input[type="search"]')
    browser.wait(lambda d: "search “Grace”" in browser.driver.title)


def test_refused_settings_tie_each_problem_to_its_field(browser: Browser, boot, server, service, db, people) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    login(browser, boot)
    # New table: a bad name and no purpose.
    browser.open("/databases/new")
    browser.fill({"name": "Bad Name", "col-0-name": "email"})
    browser.press("Save")
    name, purpose = browser.find('input[name="name"]'), browser.find('input[name="purpose"]')
    assert name.get_attribute("aria-invalid") == "true" and purpose.get_attribute("aria-invalid") == "true"
    assert "is not a collection name" in described(browser, name)[0]
    assert described(browser, purpose)[0].startswith("purpose is required")
    assert active(browser) == name, describe_active(browser)
    assert not browser.finds("h3")  # h1 → h2, no level skipped
    assert [h.text for h in browser.finds("h2")] == ["COLUMNS"] or [h.get_attribute("textContent") for h in
                                                                     browser.finds("h2")] == ["Columns"]
    browser.shot("new-table-refused")
    # The Columns tab: the name.
    browser.open(f"/databases/{people['id']}/columns")
    browser.fill({"name": "Bad Name"})
    browser.press("Save")
    name = browser.find('input[name="name"]')
    assert name.get_attribute("aria-invalid") == "true" and "is not a collection name" in described(browser, name)[0]
    assert active(browser) == name, describe_active(browser)
    # A note's rename: the sentence under the rename box, which has the focus.
    admin.set_agent(db, agent, write_org=True)
    for key in ("plan.md", "taken.md"):
        ok(call_tool(server, service, agent, "note_write", level="org", key=key, content="x\n"))
    browser.open(f"/notes/org/{org}/plan.md")
    form = browser.find("#rename-form")
    browser.fill({"name": "taken.md"}, within=form)
    browser.press("Rename", within=form)
    box = browser.find('#rename-form input[name="name"]')
    assert active(browser) == box, describe_active(browser)
    assert box.get_attribute("aria-invalid") == "true" and "already exists" in described(browser, box)[0]
    browser.shot("rename-refused-focused")
    # New note: the name is described by the refusal and by its hint.
    browser.open("/notes/new")
    browser.fill({"name": "a/b"})
    browser.press("Save")
    name = browser.find('input[name="name"]')
    texts = described(browser, name)
    assert name.get_attribute("aria-invalid") == "true" and len(texts) == 2
    assert texts[1].startswith("One Markdown file name") and active(browser) == name


def test_a_conflict_alerts_with_its_heading_only(browser: Browser, boot, server, service, db) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    admin.set_agent(db, agent, write_org=True)
    ok(call_tool(server, service, agent, "note_write", level="org", key="status.md", content="green\n"))
    login(browser, boot)
    browser.open(f"/notes/org/{org}/status.md")
    ok(call_tool(server, service, agent, "note_write", level="org", key="status.md", content="red\n"))
    browser.find("#note-content").send_keys("amber")
    press(browser, "Save")
    conflict = browser.find("#conflict")
    assert conflict.get_attribute("role") is None
    alerts = browser.finds("#conflict [role=alert]")
    assert len(alerts) == 1 and "pre" not in alerts[0].get_attribute("innerHTML")
    assert alerts[0].text.startswith("This note changed since you opened it")
    assert is_active(browser, "#conflict-heading"), describe_active(browser)
    browser.shot("conflict-heading-focused")


def test_the_record_form_ties_hints_descriptions_and_checkbox_groups(browser: Browser, boot, people) -> None:
    login(browser, boot)
    browser.open(f"/databases/{people['id']}/records/new")
    age = browser.find("#field-age")
    age.send_keys("lots", Keys.TAB)
    browser.wait(lambda d: age.get_attribute("aria-invalid") == "true")
    assert described(browser, age) == ["expected a number, such as 42 or 3.5", "age in years"]
    browser.shot("inline-hint-tied")
    age.clear()
    age.send_keys("42", Keys.TAB)
    browser.wait(lambda d: age.get_attribute("aria-invalid") is None)
    assert described(browser, age) == ["age in years"]
    assert described(browser, browser.find("#field-city")) == ["home city"]
    group = browser.find("#field-langs")
    assert group.get_attribute("role") == "group"
    label = browser.driver.execute_script(
        "return document.getElementById(arguments[0].getAttribute('aria-labelledby')).textContent", group)
    assert label.split()[0] == "langs" and described(browser, group) == ["languages"]


def test_the_org_switcher_waits_for_an_explicit_choice_on_the_keyboard(browser: Browser, boot, server) -> None:
    other = admin.create_org(server.db, name="Second Org")
    admin.add_member(server.db, org_id=other["id"], email=boot["email"])
    login(browser, boot)
    switch = browser.find("#org-switch")
    switch.send_keys(Keys.ARROW_DOWN)
    browser.wait(lambda d: browser.button("Switch"))  # shown for the keyboard
    assert browser.path.startswith("/databases") and is_active(browser, "#org-switch")
    assert "Second Org" in Select(browser.find("#org-switch")).first_selected_option.text
    assert "Bootstrap" in browser.find("#org-switch option[selected]").text  # not switched yet
    browser.shot("org-switch-keyboard")
    browser.navigate(browser.button("Switch"))
    assert "Second Org" in browser.find("#org-switch option[selected]").text


def test_a_restored_or_discarded_draft_leaves_the_focus_in_the_form(browser: Browser, boot, server, operator,
                                                                    people) -> None:
    ok(operator.post(f"{server.url}/api/collections/{people['id']}/records", json={"body": {"name": "Ada"}}), 201)
    login(browser, boot)
    page = f"/databases/{people['id']}/records/1"
    for answer in ("Restore it", "Discard"):
        browser.open(page)
        browser.find("#field-city").send_keys("Paris")
        browser.open(page)  # left unsaved; back on the form, the draft is offered
        said = announced(browser, "was not saved")
        assert "Restore it or Discard" in said
        browser.button(answer).click()
        assert is_active(browser, "#field-name"), describe_active(browser)
        announced(browser, "Restored" if answer == "Restore it" else "Discarded")
        assert browser.find("#field-city").get_attribute("value") == ("Paris" if answer == "Restore it" else "")
        browser.shot(f"draft-{answer.split()[0].lower()}-focused")
        browser.driver.execute_script("sessionStorage.clear()")


def test_focus_rings_borders_and_small_text_are_seen(browser: Browser, boot, people, server, operator) -> None:
    ok(operator.post(f"{server.url}/api/collections/{people['id']}/records",
                     json={"body": {"name": "Ada", "stage": "new"}}), 201)
    login(browser, boot)
    browser.open(f"/databases/{people['id']}")
    ratio = """
      const rgb = (c) => c.match(/[\\d.]+/g).slice(0, 3).map(Number);
      const lum = (c) => { const [r, g, b] = rgb(c).map((v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; });
                           return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
      const [a, b] = [lum(arguments[0]), lum(arguments[1])];
      return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);"""
    style = lambda el, prop: browser.driver.execute_script(  # noqa: E731
        "return getComputedStyle(arguments[0])[arguments[1]]", el, prop)
    contrast = lambda c1, c2: browser.driver.execute_script(ratio, c1, c2)  # noqa: E731
    box = browser.find('input[type="search"]')
    assert contrast(style(box, "borderTopColor"), "rgb(255, 255, 255)") >= 3
    button = next(b for b in browser.finds("main button, main a.button") if "primary" not in b.get_attribute("class")
                  and "danger" not in b.get_attribute("class") and b.is_displayed())
    assert contrast(style(button, "borderTopColor"), "rgb(255, 255, 255)") >= 3, button.text
    tag = browser.find("td .tag")
    assert contrast(style(tag, "color"), style(tag, "backgroundColor")) >= 4.5
    null = browser.find("td .null")
    assert contrast(style(null, "color"), "rgb(255, 255, 255)") >= 4.5
    # A field with a problem, focused from the keyboard: a clear accent ring, offset from it.
    browser.open(f"/databases/{people['id']}/records/1")
    age = browser.find("#field-age")
    age.send_keys("lots", Keys.TAB, Keys.SHIFT + Keys.TAB)
    browser.wait(lambda d: is_active(browser, "#field-age") and age.get_attribute("aria-invalid") == "true")
    assert style(age, "outlineStyle") == "solid" and style(age, "outlineWidth") == "2px"
    assert style(age, "outlineColor") == "rgb(36, 86, 214)" and style(age, "outlineOffset") == "2px"
    assert contrast(style(age, "outlineColor"), "rgb(255, 255, 255)") >= 3
    browser.shot("invalid-field-focus-ring")


def test_open_step_marks_and_focuses_the_step(browser: Browser, boot, server, service) -> None:
    r = service.post(f"{server.url}/api/runs", json={"agent_id": boot["agent_id"], "kind": "schedule",
                                                      "routine": "morning"})
    run = ok(r, 201)
    for call, key in (("call-1", "one.md"), ("call-2", "two.md")):
        ok(service.post(f"{server.url}/api/agents/{boot['agent_id']}/tools/note_write",
                        json={"level": "agent", "key": key, "content": "x"},
                        headers={"X-Run-Id": str(run["id"]), "X-Tool-Call-Id": call}))
    login(browser, boot)
    browser.open(f"/runs/{run['id']}#call-call-2")
    step = browser.find("#call-call-2")
    assert step.get_attribute("aria-current") == "step" and "Opened step" in step.text
    assert browser.find("#call-call-1").get_attribute("aria-current") is None
    browser.wait(lambda d: active(browser).text.endswith("two.md"), timeout=5)
    assert style_of(browser, "#call-call-2 td", "boxShadow") != "none"
    browser.shot("open-step-focused")


def style_of(browser: Browser, css: str, prop: str) -> str:
    return browser.driver.execute_script("return getComputedStyle(document.querySelector(arguments[0]))[arguments[1]]",
                                         css, prop)


def test_headings_tabs_and_link_names(browser: Browser, boot, server, operator, people, db) -> None:
    ok(operator.post(f"{server.url}/api/collections/{people['id']}/records", json={"body": {"name": "Ada"}}), 201)
    login(browser, boot)
    browser.open(f"/databases/{people['id']}/columns")
    assert not browser.finds("h3") and browser.find("h2.section-title").get_attribute("textContent") == "Columns"
    assert [a.text for a in browser.finds('.tabs a[aria-current="page"]')] == ["Columns"]
    browser.open(f"/databases/{people['id']}")
    assert [a.text for a in browser.finds('.tabs a[aria-current="page"]')] == ["Records"]
    link = browser.find("#grid td.id a")
    assert link.text == "1" and link.get_attribute("aria-label") == "Record 1"
    csv_link = browser.link("CSV")
    assert csv_link.get_attribute("aria-label") == "Export as CSV"
    browser.open("/notes")
    guild_scope = browser.find(f"#scope-guild-{boot['guild_id']}")
    new = guild_scope.find_element(browser.By.LINK_TEXT, "New note")
    state = guild_scope.find_element(browser.By.LINK_TEXT, "State")
    label = new.get_attribute("aria-label")
    assert label.startswith("New note in guild ") and state.get_attribute("aria-label").endswith(" State")
    assert len({a.get_attribute("aria-label") for a in browser.driver.find_elements(browser.By.LINK_TEXT, "New note")
                if a.get_attribute("aria-label")}) == len(browser.finds(".scope-head a.button"))
    assert re.fullmatch(r"New note in guild .+", label)


def test_without_javascript_no_button_is_shown_that_only_javascript_can_work(browser: Browser, boot, people) -> None:
    """"Add another column" is a button only app.js answers, hidden in the markup until app.js
    shows it; a button's display in app.css overrode the hidden attribute, so without JavaScript
    it stood there doing nothing."""
    login(browser, boot)
    browser.driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        browser.open(f"/databases/{people['id']}/columns")
        assert not browser.find("#add-column").is_displayed()
    finally:
        browser.driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})
    browser.open(f"/databases/{people['id']}/columns")
    assert browser.find("#add-column").is_displayed()


def test_a_done_page_that_also_offers_a_draft_says_both(browser: Browser, boot, server, service, db) -> None:
    """A note renamed with unsaved text in its editor: the page arrives with "Renamed" and offers
    the text typed before; the offer's sentence replaced the outcome's, which was never said."""
    org, agent = boot["org_id"], boot["agent_id"]
    admin.set_agent(db, agent, write_org=True)
    ok(call_tool(server, service, agent, "note_write", level="org", key="draft.md", content="one\n"))
    login(browser, boot)
    browser.open(f"/notes/org/{org}/draft.md")
    browser.find("#note-content").send_keys(Keys.END, "typed, not saved")
    form = browser.find("#rename-form")
    browser.fill({"name": "kept.md"}, within=form)
    browser.press("Rename", within=form)
    assert "done=renamed" in browser.path
    said = announced(browser, "was not saved")
    assert said.startswith("Renamed") and "Restore it or Discard" in said, said

"""The web app on a phone-sized screen (390 px, as an iPhone shows it), in a real browser: every
page fits the screen's width (only a wide table of data scrolls, inside its card; a table of rows
to act on, as the agent's State, a run's steps, a note's History and the notes list, is a block
per row with every link and Save on the screen), the bar keeps the person's name and Log out
readable, and a record's form is one column of full-width fields."""
from __future__ import annotations

from typing import Any

from store import admin
from tests.web_browser import PHONE, Browser, browser, chromium, phone  # noqa: F401 - fixtures
from test_records_support import LEADS, call_tool, make_collection, ok
from test_web_notes import login

WIDTH = PHONE[0]


def sideways(browser: Browser) -> int:
    """How far the page itself scrolls sideways (0 when it fits the screen)."""
    return browser.driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth")


def test_every_page_fits_a_phone_screen(phone: Browser, db, boot, server, service) -> None:
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    admin.set_agent(db, agent, write_org=True)
    leads = make_collection(db, org, "leads", LEADS, guild_id=guild, purpose="sales leads")
    ok(call_tool(server, service, agent, "record_add", collection="leads",
                 body={"email": "ada.lovelace.long.address@analytical-engines.example.com", "status": "new",
                       "score": 91}))
    ok(call_tool(server, service, agent, "note_write", level="org", key="a-rather-long-note-name-for-a-phone.md",
                 content="# Plan\n\n| a | b | c |\n| --- | --- | --- |\n| one | two | three |\n"))
    # A column name may be 64 characters with no break: its label wraps (it widened the page).
    long_name = "a_very_long_column_name_that_goes_on_and_on_without_any_break_x"[:64]
    wide = make_collection(db, org, "wide", [{"name": long_name, "type": "text", "description": "long"}],
                           guild_id=guild)
    ok(call_tool(server, service, agent, "record_add", collection="wide", body={long_name: "v"}))
    # A note's 40-column table scrolls in its own box; a purpose of one long word wraps (each
    # widened the page: to 1 181 px and 2 700 px).
    table = ("|" + "|".join(f"column {i}" for i in range(40)) + "|\n|" + "---|" * 40 + "\n|"
             + "|".join(f"value {i}" for i in range(40)) + "|\n")
    ok(call_tool(server, service, agent, "note_write", level="org", key="wide-table.md", content=table))
    worded = make_collection(db, org, "worded", [{"name": "t", "type": "text", "description": "t"}],
                             guild_id=guild, purpose="p" * 300)
    login(phone, boot)
    pages = {
        "wide-record": f"/databases/{wide['id']}/records/1",
        "wide-table-filters": f"/databases/{wide['id']}?f.{long_name}=v",
        "guild": f"/guilds/{guild}",
        "databases": "/databases",
        "table": f"/databases/{leads['id']}",
        "record": f"/databases/{leads['id']}/records/1",
        "columns": f"/databases/{leads['id']}/columns",
        "access": f"/databases/{leads['id']}/access",
        "notes": "/notes",
        "note": f"/notes/org/{org}/a-rather-long-note-name-for-a-phone.md",
        "wide-markdown-table": f"/notes/org/{org}/wide-table.md",
        "one-word-purpose": f"/databases/{worded['id']}",
        "state": f"/agents/{agent}",
    }
    too_wide = wider_than_the_screen(phone, pages)
    assert not too_wide, f"pages wider than a {WIDTH} px screen (px too wide): {too_wide}"
    # The person's name and Log out are on the dark bar, where they can be read.
    phone.open("/databases")
    bar = phone.find(".topbar").rect
    logout = phone.button("Log out").rect
    assert logout["x"] + logout["width"] <= WIDTH and bar["y"] <= logout["y"] <= bar["y"] + bar["height"]
    # The record form is one column: each field as wide as the form, not squeezed beside its label.
    phone.open(f"/databases/{leads['id']}/records/1")
    field: Any = phone.find('[name="email"]')
    form = phone.find(".record-form").rect
    assert field.rect["width"] > form["width"] * 0.8


def wider_than_the_screen(browser: Browser, pages: dict[str, str]) -> dict[str, int]:
    """Each page (name -> path) opened and photographed; those wider than the window, by how
    many pixels."""
    too_wide = {}
    for name, path in pages.items():
        browser.open(path)
        browser.shot(name)
        if sideways(browser) > 0:
            too_wide[name] = sideways(browser)
    return too_wide


def overflowing(browser: Browser, css: str) -> list[str]:
    """The elements matching ``css`` whose content is wider than their box (cut off or scrolling
    inside it), by their text's first 40 characters."""
    return browser.driver.execute_script(
        "return [...document.querySelectorAll(arguments[0])]"
        ".filter(e => e.scrollWidth > e.clientWidth + 1).map(e => e.textContent.trim().slice(0, 40))", css)


def test_long_names_wrap_on_a_phone_and_on_a_desktop(phone: Browser, db, boot, server, service) -> None:
    """A note named with 240 letters and no break, and a guild and an agent with long names: the
    note page's heading, the delete page's, the New note form's Scope list and the notes list
    wrap or shrink to the screen; on a phone the list keeps Size, Last change and By on screen,
    the name wrapping in its row (it pushed the page 1 900 px sideways)."""
    org = boot["org_id"]
    admin.set_agent(db, boot["agent_id"], write_org=True)
    long_key = "a" * 240 + ".md"
    ok(call_tool(server, service, boot["agent_id"], "note_write", level="org", key=long_key, content="long\n"))
    ok(call_tool(server, service, boot["agent_id"], "note_write", level="org", key="short.md", content="s\n"))
    guild = admin.create_guild(db, org_id=org, name="The regional partnerships and channel sales guild "
                                                    "of the northern hemisphere offices")
    admin.create_agent(db, org_id=org, guild_id=guild["id"], name="Partnerships-and-channel-sales-follow-up-agent")
    login(phone, boot)
    pages = {"notes-long-name": "/notes", "note-long-name": f"/notes/org/{org}/{long_key}",
             "delete-long-name": f"/notes/delete/org/{org}/{long_key}", "new-note-long-scopes": "/notes/new"}
    too_wide = wider_than_the_screen(phone, pages)
    assert not too_wide, f"pages wider than a {WIDTH} px screen (px too wide): {too_wide}"
    # The notes list: every cell on screen, none cut off; the long name wraps in its row.
    phone.open("/notes")
    assert not overflowing(phone, "#scope-org table.notes, #scope-org table.notes th, #scope-org table.notes td")
    assert not out_of_reach(phone, "#scope-org table.notes td:not(:empty)")
    name_cell = phone.find("#scope-org tr.note td:first-child")
    assert long_key in name_cell.text.replace("\n", "") and name_cell.rect["height"] > 40
    # The New note form: the Scope list is no wider than the form.
    phone.open("/notes/new")
    scope, form = phone.find('select[name="scope"]').rect, phone.find("#new-note").rect
    assert scope["x"] + scope["width"] <= form["x"] + form["width"], (scope, form)
    # On a desktop the note's heading wraps as well.
    phone.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
    for name, path in pages.items():
        phone.open(path)
        assert sideways(phone) == 0, (name, sideways(phone))
    phone.open(f"/notes/org/{org}/{long_key}")
    phone.shot("note-long-name-desktop")


def out_of_reach(browser: Browser, css: str) -> list[str]:
    """The elements matching ``css`` (there must be some) that a person cannot see whole without
    scrolling sideways: any part of one left or right of the window, or cut by a box around it that
    clips or scrolls (a table scrolling inside its card). By their label or text."""
    found, out = browser.driver.execute_script("""
        const found = [...document.querySelectorAll(arguments[0])], out = [];
        for (const e of found) {
          const r = e.getBoundingClientRect();
          let cut = r.width === 0 || r.left < 0 || r.right > innerWidth + 0.5;
          for (let a = e.parentElement; a && !cut; a = a.parentElement) {
            if (getComputedStyle(a).overflowX === 'visible') continue;
            const box = a.getBoundingClientRect();
            cut = r.left < box.left - 0.5 || r.right > box.right + 0.5;
          }
          if (cut) out.push((e.getAttribute('aria-label') || e.textContent).trim().slice(0, 60));
        }
        return [found.length, out];""", css)
    assert found, f"nothing matches {css} on {browser.path}"
    return out


def shown_label(browser: Browser, css: str) -> str:
    """The label shown before the first element matching ``css`` (its ::before), "" for none."""
    content = browser.driver.execute_script(
        "return getComputedStyle(document.querySelector(arguments[0]), '::before').content", css)
    return content.strip('"').strip() if content not in ("none", "normal") else ""


def shoot(browser: Browser, css: str, label: str) -> None:
    """A screenshot with the element ``css`` at the top of the window."""
    browser.driver.execute_script("document.querySelector(arguments[0]).scrollIntoView()", css)
    browser.shot(label)


def as_desktop(browser: Browser) -> None:
    browser.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False})


def test_the_state_page_keeps_every_control_on_a_phone_screen(phone: Browser, db, boot, server, service,
                                                               operator) -> None:
    """The agent's State at 390 px: Access to tables (its Save was off the screen, 46 % of the table
    beyond the right edge), Revisions (Diff with current), the History archive, Scripts and the
    tables it reaches each row a block of the card's width, every link and Save on the screen and
    Save working there. A desktop keeps the tables with their headings."""
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    make_collection(db, org, "leads", LEADS, guild_id=guild, purpose="sales leads found by the research guild")
    for text in ("# Daily\n\nCall ten leads.\n", "# Daily\n\nCall twenty.\n", "# Daily\n\nCall twenty, report.\n"):
        ok(operator.put(f"{server.url}/api/agents/{agent}/task", json={"task": text}))
    for text in ("# Memory\n\nLikes tea.", "# Memory\n\nLikes coffee now."):
        ok(call_tool(server, service, agent, "memory_write", content=text))
    ok(service.post(f"{server.url}/api/agents/{agent}/tools/script_write",
                    json={"name": "fetch_the_morning_leads.py", "content": "print(1)\n"}))
    login(phone, boot)
    phone.open(f"/agents/{agent}")
    assert sideways(phone) == 0
    unreachable = {css: out_of_reach(phone, css) for css in (
        "table.agent-access select", "table.agent-access button", "table.revisions a", "table.archive a",
        "table.scripts a", "table.reach a")}
    assert not any(unreachable.values()), unreachable
    assert not overflowing(phone, "table.grid"), "a table scrolls sideways inside its card"
    assert len(phone.finds("table.revisions a")) == 2  # Diff with current, for v1 and v2
    # Each cell says what it is, as the heading row (hidden on a phone) did.
    assert shown_label(phone, "table.agent-access td.effective") == "Effective"
    assert shown_label(phone, "table.revisions td[data-label=By]") == "By"
    for css, label in (("#collections", "state-access"), ("#revisions", "state-revisions"),
                       ("#history-archive", "state-archive")):
        shoot(phone, css, label)
    # Save, pressed on the phone, saves.
    access = phone.find("table.agent-access")
    phone.fill({"mode": "read"}, within=access)
    phone.navigate(phone.button("Save", within=access))
    assert "read" in phone.find("table.agent-access td.effective").text
    # A desktop keeps its tables, headings and all, with nothing cut.
    as_desktop(phone)
    phone.open(f"/agents/{agent}")
    assert phone.find("table.agent-access thead").is_displayed()
    assert phone.find("table.revisions thead").is_displayed()
    assert sideways(phone) == 0 and not overflowing(phone, "table.grid")
    shoot(phone, "#collections", "state-access-desktop")


def test_the_guild_state_pages_tables_keep_the_grant_and_its_save_on_a_phone_screen(phone: Browser, db, boot,
                                                                                    server) -> None:
    """The guild's State at 390 px: its own tables and the organisation's tables with the guild's
    grant (a select and Save, which scrolled off the card's right edge) each a block per row."""
    org, guild = boot["org_id"], boot["guild_id"]
    make_collection(db, org, "leads", LEADS, guild_id=guild, purpose="sales leads found by the research guild")
    make_collection(db, org, "customers_of_the_whole_organisation", LEADS,
                    purpose="every customer the organisation has signed, with the contract's owner")
    login(phone, boot)
    phone.open(f"/guilds/{guild}")
    assert sideways(phone) == 0
    unreachable = {css: out_of_reach(phone, css) for css in (
        "table.guild-grants select", "table.guild-grants button", "table.guild-grants a", "table.guild-own a")}
    assert not any(unreachable.values()), unreachable
    assert not overflowing(phone, "table.grid"), "a table scrolls sideways inside its card"
    assert shown_label(phone, "table.guild-grants td.change") == "The guild's grant"
    shoot(phone, "#databases", "guild-state-tables")
    grants = phone.find("table.guild-grants")
    phone.fill({"mode": "read"}, within=grants)
    phone.navigate(phone.button("Save", within=grants))
    assert phone.find("#access-saved").is_displayed()


def test_a_runs_steps_and_a_notes_history_keep_their_links_on_a_phone_screen(phone: Browser, boot, server,
                                                                             service) -> None:
    """A run's steps (each file's link was beyond the right edge) and a note's History (its Open
    step links) at 390 px: each row a block, every link on the screen, nothing scrolling."""
    agent = boot["agent_id"]
    run = ok(service.post(f"{server.url}/api/runs", json={"agent_id": agent, "kind": "schedule",
                                                           "routine": "morning-lead-review"}), 201)
    key = "findings-from-the-morning-lead-review.md"
    for i in range(3):
        ok(service.post(f"{server.url}/api/agents/{agent}/tools/note_write",
                        json={"level": "agent", "key": key, "content": f"step {i}\n"},
                        headers={"X-Run-Id": str(run["id"]), "X-Tool-Call-Id": f"toolu_01XFDUDYJgAACzvnptvVoYE{i}"}))
    login(phone, boot)
    phone.open(f"/runs/{run['id']}")
    assert sideways(phone) == 0
    assert not out_of_reach(phone, "table.steps a"), out_of_reach(phone, "table.steps a")
    assert not overflowing(phone, "table.grid, .scroll"), "the steps scroll sideways"
    assert len(phone.finds("table.steps tbody tr")) == 3
    shoot(phone, "table.steps", "run-steps")
    path = f"org/{boot['org_id']}/agents/{agent}/{key}"
    phone.open(f"/notes/{path}")
    phone.find("#provenance-history summary").click()
    assert sideways(phone) == 0
    assert not out_of_reach(phone, "#provenance-history table a.open-step"), \
        out_of_reach(phone, "#provenance-history table a.open-step")
    assert not overflowing(phone, "table.grid"), "the History scrolls sideways"
    assert len(phone.finds("#provenance-history table a.open-step")) == 3
    shoot(phone, "#provenance", "note-history")
    # A desktop keeps the steps as a table.
    as_desktop(phone)
    phone.open(f"/runs/{run['id']}")
    assert phone.find("table.steps thead").is_displayed() and sideways(phone) == 0
    phone.shot("run-steps-desktop")


def test_the_notes_list_on_a_phone_gives_a_long_name_the_cards_width_and_shows_who(
        phone: Browser, db, boot, server, service) -> None:
    """At 390 px each note of the list is a block: a 240-letter name as wide as its card (in its
    100 px column it took 27 lines and filled the card's box), and who changed it last shown
    whole (it read "ada@exam…")."""
    admin.set_agent(db, boot["agent_id"], write_org=True)
    long_key = "a" * 240 + ".md"
    ok(call_tool(server, service, boot["agent_id"], "note_write", level="org", key=long_key, content="long\n"))
    login(phone, boot)
    phone.open("/notes/new?scope=org")
    phone.fill({"name": "by-a-person.md", "content": "mine\n"})
    phone.press("Save")
    phone.open("/notes")
    assert sideways(phone) == 0
    assert not out_of_reach(phone, "#scope-org table.notes a")
    listing = phone.find("#scope-org .scope-list").rect
    name_cell = phone.find("#scope-org tr.note td:first-child")
    assert long_key in name_cell.text.replace("\n", "")
    name = name_cell.rect
    assert name["width"] > listing["width"] * 0.8, (name, listing)
    # Half the box's height at most (27 lines were 550 px, more than the whole box).
    box = float(phone.driver.execute_script(
        "return getComputedStyle(document.querySelector('#scope-org .scope-list')).maxHeight").removesuffix("px"))
    assert name["height"] < box / 2, (name, box)
    by = [e.text for e in phone.finds("#scope-org td.by")]
    assert boot["email"] in by and shown_label(phone, "#scope-org td.by") == "By", by
    assert not overflowing(phone, "#scope-org table.notes, #scope-org table.notes td")
    shoot(phone, "#scope-org", "notes-list-phone")


def test_the_notes_list_on_a_desktop_shows_who_changed_a_note_whole(browser: Browser, boot, server) -> None:
    """The By column at 1 280 px showed "ada@exam…" for every person: the email is shown whole
    (wrapped after its @ where the column is narrow), the list still a table."""
    login(browser, boot)
    browser.open("/notes/new?scope=org")
    browser.fill({"name": "by-a-person.md", "content": "mine\n"})
    browser.press("Save")
    as_desktop(browser)
    try:
        for path in ("/notes", "/notes?scope=org"):
            browser.open(path)
            cells = browser.finds("#scope-org td.by")
            assert [c.text.replace("\n", "") for c in cells] == [boot["email"]]
            assert not overflowing(browser, "#scope-org td.by"), path
            assert browser.find("#scope-org table.notes thead").is_displayed()
            browser.shot("notes-list-desktop")
    finally:
        browser.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})

"""The web app on a phone-sized screen (390 px, as an iPhone shows it), in a real browser: every
page fits the screen's width (only a wide table scrolls, inside its card), the bar keeps the
person's name and Log out readable, and a record's form is one column of full-width fields."""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from store import admin
from tests.web_browser import Browser, browser, chromium  # noqa: F401 - fixtures
from test_records_support import LEADS, call_tool, make_collection, ok
from test_web_notes import login

WIDTH = 390


@pytest.fixture
def phone(browser: Browser) -> Iterator[Browser]:
    browser.driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                                   {"width": WIDTH, "height": 844, "deviceScaleFactor": 1, "mobile": True})
    try:
        yield browser
    finally:
        browser.driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


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
    the name wrapping inside its cell (it pushed the page 1 900 px sideways)."""
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
    # The notes list: every column on screen, none cut off; the long name wraps in its cell.
    phone.open("/notes")
    assert not overflowing(phone, "#scope-org table.notes, #scope-org table.notes th, #scope-org table.notes td")
    by = phone.find("#scope-org table.notes th:nth-child(4)").rect
    assert by["x"] + by["width"] <= WIDTH, by
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

"""The notes browser in a real browser against the real gateway and PostgreSQL, each result
asserted through the API (the agent tools and /api/file-changes) as well: scopes side by side,
a note rendered with its embeds, the editor and its conflict, new, rename, delete, the embed
refusal with links to the embedding tasks, and the provenance strip with its paged History."""
from __future__ import annotations

import re
from typing import Any

import pytest
import requests

from store import admin
from tests.conftest import RunningServer
from tests.web_browser import Browser, browser, chromium, csrf_of, web_login  # noqa: F401 - fixtures
from test_records_support import call_tool, ok


@pytest.fixture(autouse=True)
def curator(db, boot) -> None:
    """The bootstrap agent may write organisation notes too, so it can seed every scope."""
    admin.set_agent(db, boot["agent_id"], write_org=True)


def login(browser: Browser, boot: dict[str, Any]) -> None:
    """Log in through the form and wait for the page it leads to (so the next open cannot race it)."""
    browser.open("/")
    browser.fill({"email": boot["email"], "password": boot["password"]})
    press(browser, "Log in")
    browser.wait(lambda d: browser.path.startswith("/databases"))


def press(browser: Browser, label: str) -> None:
    """Click the button (once this page has finished loading) and wait until the page it submits
    to has replaced this one: the harness's navigate, which knows every way Chromium says "gone"."""
    browser.wait(lambda d: d.execute_script("return document.readyState") == "complete")
    browser.navigate(browser.button(label))


def follow(browser: Browser, element: Any) -> None:
    """Click a link and wait until the page it opens has replaced this one."""
    browser.navigate(element)


def note_get(server: RunningServer, service: requests.Session, agent_id: int, path: str) -> requests.Response:
    return call_tool(server, service, agent_id, "note_get", path=path)


def write(server: RunningServer, service: requests.Session, agent_id: int, level: str, key: str,
          content: str) -> dict[str, Any]:
    return ok(call_tool(server, service, agent_id, "note_write", level=level, key=key, content=content))


def changes(operator: requests.Session, server: RunningServer, path: str) -> list[dict[str, Any]]:
    return ok(operator.get(f"{server.url}/api/file-changes", params={"display_path": path}))["changes"]


def test_scopes_side_by_side_with_new_and_deleted_notes(browser: Browser, boot, server, service, operator) -> None:
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    write(server, service, agent, "org", "handbook.md", "# Handbook\n")
    write(server, service, agent, "guild", "plan.md", "The plan.\n")
    write(server, service, agent, "agent", "scratchpad.md", "mine\n")
    write(server, service, agent, "guild", "old.md", "going\n")
    ok(call_tool(server, service, agent, "note_delete", path=f"org/{org}/guilds/{guild}/old.md"))
    login(browser, boot)
    follow(browser, browser.link("Notes"))
    assert browser.path == "/notes"
    scopes = {s.get_attribute("data-scope"): s for s in browser.finds("section.scope")}
    assert list(scopes) == ["org", f"guild-{guild}", f"agent-{agent}"]
    org_rows = scopes["org"].find_elements(browser.By.CSS_SELECTOR, "tbody tr.note")
    assert [r.find_elements(browser.By.TAG_NAME, "td")[0].text for r in org_rows] == ["handbook.md new"]
    cells = org_rows[0].find_elements(browser.By.TAG_NAME, "td")
    # Last change in the format of every other time of the app (the date and UTC, to the minute;
    # a narrow column puts the clock under the date), the full time in its title.
    changed = ok(note_get(server, service, agent, f"org/{org}/handbook.md"))["updated_at"]
    day, clock = changed[:10], changed[11:16]
    assert cells[1].text == "11 B" and cells[2].text.split() == [day, clock, "UTC"], cells[2].text
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", cells[2].get_attribute("title"))
    assert cells[2].get_attribute("title").startswith(f"{day} {clock}:")
    removed_cell = browser.find(f"#scope-guild-{guild} tr.removed td.when").text
    assert re.fullmatch(r"\d{4}-\d\d-\d\d\s\d\d:\d\d UTC", removed_cell), removed_cell
    assert cells[3].text == "Scout"
    guild_text = scopes[f"guild-{guild}"].text
    assert "Research" in guild_text and "plan.md" in guild_text
    removed = scopes[f"guild-{guild}"].find_elements(browser.By.CSS_SELECTOR, "tr.removed")
    assert len(removed) == 1 and "old.md" in removed[0].text and "deleted" in removed[0].text
    # Its name opens the page that says what became of it, with its History.
    assert removed[0].find_element(browser.By.CSS_SELECTOR, "a.gone").get_attribute("href").endswith(
        f"/notes/org/{org}/guilds/{guild}/old.md")
    assert "scratchpad.md" in scopes[f"agent-{agent}"].text
    # The agent's scope links to its State.
    assert len(browser.finds("nav.mainnav a")) == 2
    browser.shot("notes-browser")
    follow(browser, scopes[f"agent-{agent}"].find_element(browser.By.LINK_TEXT, "Scout"))
    assert browser.path == f"/agents/{agent}"
    assert browser.link("Databases") and browser.link("Notes")


def test_open_edit_and_save_a_note(browser: Browser, boot, server, service, operator) -> None:
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    write(server, service, agent, "org", "facts.md", "Water boils at 100 °C.\n")
    path = f"org/{org}/guilds/{guild}/plan.md"
    write(server, service, agent, "guild", "plan.md",
          "# Launch plan\n\n- step *one*\n\n<script>alert(1)</script>\n\nFacts: ![[org/%d/facts.md]]\n\n"
          "![the venue](https://example.com/venue.png)\n" % org)
    login(browser, boot)
    browser.open("/notes")
    follow(browser, browser.link("plan.md"))
    assert browser.path == f"/notes/{path}"
    rendered = browser.find("#rendered")
    assert rendered.find_element(browser.By.TAG_NAME, "h1").text == "Launch plan"
    assert rendered.find_element(browser.By.TAG_NAME, "em").text == "one"
    # Raw HTML is shown as text, never run; the embed is expanded as State expands it.
    assert "<script>alert(1)</script>" in rendered.text and not rendered.find_elements(browser.By.TAG_NAME, "script")
    assert "Facts: Water boils at 100 °C." in rendered.text
    # Another site's image is a link to it (the page's policy would block it: a broken image and
    # a console error on every view), never an image that tells that site who reads the note.
    assert not rendered.find_elements(browser.By.TAG_NAME, "img")
    assert browser.link("image: the venue").get_attribute("href") == "https://example.com/venue.png"
    assert browser.link(f"org/{org}/facts.md")
    browser.shot("note")
    editor = browser.find("#note-content")
    editor.clear()
    editor.send_keys("# Launch plan\n\nShip on Monday.\n")
    press(browser, "Save")
    assert "Saved." in browser.text()
    assert browser.find("#rendered").text.endswith("Ship on Monday.")
    got = ok(note_get(server, service, agent, path))
    assert got["content"] == "# Launch plan\n\nShip on Monday.\n" and got["version"] == 2
    assert got["updated_by"] == boot["email"]
    history = changes(operator, server, path)
    assert [c["operation"] for c in history] == ["update", "create"] and history[0]["actor_name"] == boot["email"]
    # The provenance strip says the same.
    strip = browser.find("#provenance")
    assert "update" in strip.text.lower() and boot["email"] in strip.text and "v2" in strip.text
    strip.find_element(browser.By.TAG_NAME, "summary").click()
    rows = strip.find_elements(browser.By.CSS_SELECTOR, "table tbody tr")
    assert len(rows) == 2 and "Scout" in rows[1].text and "note_write" in rows[1].text
    browser.shot("note-saved")
    # Saving what is already there writes nothing.
    press(browser, "Save")
    assert "Nothing changed" in browser.text() and len(changes(operator, server, path)) == 2
    # Nor for a note that starts with a line break (HTML drops one right after <textarea>, and
    # each save through the editor took one away).
    write(server, service, agent, "guild", "poem.md", "\n\n    indented first line\n")
    browser.open(f"/notes/org/{org}/guilds/{guild}/poem.md")
    assert browser.find("#note-content").get_attribute("value") == "\n\n    indented first line\n"
    press(browser, "Save")
    assert "Nothing changed" in browser.text()
    assert ok(note_get(server, service, agent, f"org/{org}/guilds/{guild}/poem.md"))["version"] == 1


def test_what_was_typed_survives_a_session_that_ended_before_the_save(browser: Browser, boot, server, service,
                                                                     db) -> None:
    """A save that meets an ended session is refused before the editor can answer (a bare 401
    page). The text typed is kept in the tab: the page's Log in link returns to the note, which
    offers it back, and the restored text saves as the next version."""
    org, agent = boot["org_id"], boot["agent_id"]
    path = f"org/{org}/typed.md"
    write(server, service, agent, "org", "typed.md", "first\n")
    login(browser, boot)
    browser.open(f"/notes/{path}")
    editor = browser.find("#note-content")
    editor.clear()
    editor.send_keys("a paragraph that took a while to write\n")
    with db.connection() as conn:  # the session ends meanwhile (logged out in another tab, expired)
        conn.execute("DELETE FROM web_sessions")
    press(browser, "Save")
    assert "Not logged in" in browser.text() and "kept in this browser tab" in browser.text()
    browser.shot("session-ended")
    follow(browser, browser.link("Log in"))
    browser.fill({"email": boot["email"], "password": boot["password"]})
    press(browser, "Log in")
    assert browser.path == f"/notes/{path}"
    assert ok(note_get(server, service, agent, path))["content"] == "first\n"
    notice = browser.wait_for(".flash.draft")
    assert "was not saved" in notice.text
    assert re.search(r"What you typed here at \d\d:\d\d UTC was not saved", notice.text), notice.text
    assert browser.find("#note-content").get_attribute("value") == "first\n"
    browser.shot("draft-offered")
    browser.button("Restore it").click()
    assert browser.find("#note-content").get_attribute("value") == "a paragraph that took a while to write\n"
    assert not browser.finds(".flash.draft")
    press(browser, "Save")
    assert "Saved." in browser.text()
    got = ok(note_get(server, service, agent, path))
    assert got["content"] == "a paragraph that took a while to write\n" and got["version"] == 2
    # Saved: the draft is gone, so the note opens plainly again.
    browser.open(f"/notes/{path}")
    assert not browser.finds(".flash.draft")


def test_a_save_over_a_newer_version_is_refused_with_both_versions(browser: Browser, boot, server, service,
                                                                   operator) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    path = f"org/{org}/status.md"
    write(server, service, agent, "org", "status.md", "status: green\n")
    login(browser, boot)
    browser.open(f"/notes/{path}")
    # While the operator edits, the agent saves a newer version.
    write(server, service, agent, "org", "status.md", "status: red (agent)\n")
    editor = browser.find("#note-content")
    editor.clear()
    editor.send_keys("status: amber (operator)\n")
    press(browser, "Save")
    conflict = browser.find("#conflict")
    assert "changed since you opened it" in conflict.text and "not saved" in conflict.text
    assert browser.find("pre.theirs").text == "status: red (agent)"
    assert browser.find("pre.mine").text == "status: amber (operator)"
    assert "-status: red (agent)" in browser.find("pre.diff").text
    assert "+status: amber (operator)" in browser.find("pre.diff").text
    browser.shot("note-conflict")
    browser.check_console()
    got = ok(note_get(server, service, agent, path))
    assert got["content"] == "status: red (agent)\n" and got["version"] == 2
    # The editor keeps what was typed, now based on the newest version: saving again is a choice.
    assert browser.find("#note-content").get_attribute("value") == "status: amber (operator)\n"
    assert browser.find('#note-editor input[name="version"]').get_attribute("value") == "2"
    assert browser.find("#dirty").text == "Unsaved changes"
    # Leaving by a link of the conflict page (the history, the breadcrumb) keeps it as a draft.
    browser.open("/notes")
    browser.open(f"/notes/{path}")
    assert "was not saved" in browser.find(".flash.draft").text
    browser.button("Restore it").click()
    assert browser.find("#note-content").get_attribute("value") == "status: amber (operator)\n"
    press(browser, "Save")
    assert "Saved." in browser.text()
    got = ok(note_get(server, service, agent, path))
    assert got["content"] == "status: amber (operator)\n" and got["version"] == 3


def test_a_save_over_a_note_renamed_meanwhile_goes_to_it_where_it_is(browser: Browser, boot, server, service,
                                                                     operator) -> None:
    """Renamed (in Finder, by another operator) while this one edits: the save is refused as a
    conflict shown at the note's new name, so Save again goes there, and never makes a second
    note at the old name."""
    org, agent = boot["org_id"], boot["agent_id"]
    old, new = f"org/{org}/style-guide.md", f"org/{org}/style-guide-2.md"
    write(server, service, agent, "org", "style-guide.md", "Use short words.\n")
    login(browser, boot)
    browser.open(f"/notes/{old}")
    moved = operator.request("MOVE", f"{server.url}/dav/{old}", headers={"Destination": f"{server.url}/dav/{new}"})
    assert moved.status_code == 201, moved.text
    editor = browser.find("#note-content")
    editor.clear()
    editor.send_keys("Use short words. Avoid jargon.\n")
    press(browser, "Save")
    conflict = browser.find("#conflict")
    assert "was moved since you opened it" in conflict.text and old in conflict.text and new in conflict.text
    assert browser.find("pre.theirs").text == "Use short words."
    assert browser.find("#note-editor").get_attribute("action").endswith(f"/notes/{new}")
    browser.shot("note-moved-conflict")
    browser.check_console()
    press(browser, "Save")
    assert "Saved." in browser.text()
    assert ok(note_get(server, service, agent, new))["content"] == "Use short words. Avoid jargon.\n"
    assert note_get(server, service, agent, old).status_code == 404


def test_a_save_over_a_deleted_note_whose_name_an_earlier_note_left_is_no_move(boot, server, service,
                                                                               operator) -> None:
    """draft.md renamed to final.md, then a new draft.md opened, deleted by someone, and saved:
    the save is told the note was deleted, and never goes to final.md, the earlier draft's home."""
    org, agent = boot["org_id"], boot["agent_id"]
    draft, final = f"org/{org}/draft.md", f"org/{org}/final.md"
    write(server, service, agent, "org", "draft.md", "the first draft\n")
    moved = operator.request("MOVE", f"{server.url}/dav/{draft}", headers={"Destination": f"{server.url}/dav/{final}"})
    assert moved.status_code == 201, moved.text
    write(server, service, agent, "org", "draft.md", "a new draft\n")
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(f"{server.url}/notes/{draft}").text)
    ok(call_tool(server, service, agent, "note_delete", path=draft))
    r = s.post(f"{server.url}/notes/{draft}", data={"csrf_token": token, "content": "my edit\n", "version": "1"})
    assert r.status_code == 409 and "the note was deleted meanwhile" in r.text and "was moved" not in r.text
    assert f'action="/notes/{draft}"' in r.text
    assert ok(note_get(server, service, agent, final))["content"] == "the first draft\n"
    page = s.get(f"{server.url}/notes/{draft}")
    assert page.status_code == 404 and "This note was deleted" in page.text


def test_a_renamed_notes_history_leads_back_to_its_first_change(browser: Browser, boot, server, service,
                                                                  operator) -> None:
    """A rename leaves the note's earlier changes on its old path: the new path's History links
    there, and the old path's page (a 404: no note lives there) says where the note went and
    shows those changes. A deleted note's path shows its History too; a path never used is a
    plain 404."""
    org, agent = boot["org_id"], boot["agent_id"]
    old, new = f"org/{org}/draft.md", f"org/{org}/final.md"
    write(server, service, agent, "org", "draft.md", "v1\n")
    write(server, service, agent, "org", "draft.md", "v2\n")
    moved = operator.request("MOVE", f"{server.url}/dav/{old}", headers={"Destination": f"{server.url}/dav/{new}"})
    assert moved.status_code == 201, moved.text
    login(browser, boot)
    browser.open(f"/notes/{new}?hbefore=")
    browser.find("#provenance-history summary").click()
    follow(browser, browser.link(old))
    assert browser.path == f"/notes/{old}"
    gone = browser.find("#gone")
    assert "no longer here" in gone.text and new in gone.text
    rows = [r.text for r in browser.finds("#provenance-history tbody tr")]
    assert [("create" in r, "update" in r, "move" in r) for r in rows] == [
        (False, False, True), (False, True, False), (True, False, False)], rows
    browser.shot("note-gone-moved")
    follow(browser, browser.link(new))
    assert browser.path == f"/notes/{new}"

    ok(call_tool(server, service, agent, "note_delete", path=new))
    s = web_login(server, boot["email"], boot["password"])
    r = s.get(f"{server.url}/notes/{new}")
    assert r.status_code == 404 and "This note was deleted" in r.text and "History" in r.text
    r = s.get(f"{server.url}/notes/org/{org}/never.md")
    assert r.status_code == 404 and "none was ever recorded there" in r.text


LOCK_BODY = (b'<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/>'
             b'</D:lockscope><D:locktype><D:write/></D:locktype><D:owner>Word</D:owner></D:lockinfo>')


def test_a_note_open_in_word_over_webdav_is_not_saved_over(browser: Browser, boot, server, service,
                                                            operator) -> None:
    """Word holds a WebDAV lock on the note: the editor's Save is refused with the holder's name,
    keeps what was typed, and writes nothing; once Word closes the file, Save works."""
    org, agent = boot["org_id"], boot["agent_id"]
    path = f"org/{org}/report.md"
    write(server, service, agent, "org", "report.md", "draft from Word\n")
    login(browser, boot)
    browser.open(f"/notes/{path}")
    r = operator.request("LOCK", f"{server.url}/dav/{path}", data=LOCK_BODY,
                         headers={"Timeout": "Second-300", "Depth": "0"})
    assert r.status_code == 200, r.text
    editor = browser.find("#note-content")
    editor.clear()
    editor.send_keys("my edit in the browser\n")
    press(browser, "Save")
    alert = browser.find(".flash.error")
    assert f"/{path} is locked by a WebDAV client of {boot['email']}" in alert.text
    assert browser.find("#note-content").get_attribute("value") == "my edit in the browser\n"
    browser.shot("note-locked")
    got = ok(note_get(server, service, agent, path))
    assert got["content"] == "draft from Word\n" and got["version"] == 1
    assert operator.request("UNLOCK", f"{server.url}/dav/{path}",
                            headers={"Lock-Token": r.headers["Lock-Token"]}).status_code == 204
    press(browser, "Save")
    assert "Saved." in browser.text()
    assert ok(note_get(server, service, agent, path))["content"] == "my edit in the browser\n"


def test_a_new_note_at_a_name_finder_has_locked_is_refused(boot, server, operator, service) -> None:
    """Finder LOCKs a new name before it uploads (a lock-null name): New note in the web app at
    that name is refused with the holder's name, creating nothing, as the mount refuses it."""
    org = boot["org_id"]
    path = f"org/{org}/pending.md"
    r = operator.request("LOCK", f"{server.url}/dav/{path}", data=LOCK_BODY, headers={"Timeout": "Second-300"})
    assert r.status_code in (200, 201), r.text
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(f"{server.url}/notes/new").text)
    made = s.post(f"{server.url}/notes/new",
                  data={"csrf_token": token, "scope": "org", "name": "pending", "content": "typed here\n"})
    assert made.status_code == 423 and f"/{path} is locked by a WebDAV client of {boot['email']}" in made.text
    assert "typed here" in made.text
    assert note_get(server, service, boot["agent_id"], path).status_code == 404   # nothing was created
    assert operator.get(f"{server.url}/dav/{path}").content == b""   # still Finder's empty locked name


def test_a_side_files_name_is_refused_for_a_new_note_and_a_rename(boot, server, service, operator) -> None:
    """WebDAV and the mount keep names like tmpab12cd34.md (Python's temporary files) as side
    files: the web app gives such a name to no note. A rename to one used to answer "Renamed."
    while the note stayed where it was, hidden from its author's file clients for two minutes."""
    org, agent = boot["org_id"], boot["agent_id"]
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(f"{server.url}/notes/new").text)
    made = s.post(f"{server.url}/notes/new",
                  data={"csrf_token": token, "scope": "org", "name": "tmpab12cd34", "content": "typed here\n"})
    assert made.status_code == 422 and "choose another name" in made.text and "typed here" in made.text
    assert note_get(server, service, agent, f"org/{org}/tmpab12cd34.md").status_code == 404
    made = s.post(f"{server.url}/notes/new",
                  data={"csrf_token": token, "scope": "org", "name": "styles", "content": "s\n"})
    assert made.status_code == 200 and "Note created." in made.text
    renamed = s.post(f"{server.url}/notes/rename/org/{org}/styles.md",
                     data={"csrf_token": token, "scope": "org", "name": "tmp_st1leno.md"})
    assert renamed.status_code == 422 and "choose another name" in renamed.text
    assert operator.get(f"{server.url}/dav/org/{org}/styles.md").content == b"s\n"
    assert operator.get(f"{server.url}/dav/org/{org}/tmp_st1leno.md").status_code == 404
    # Onto a name another note has: the page's own words, not WebDAV's "Overwrite is off".
    operator.put(f"{server.url}/dav/org/{org}/taken.md", data=b"t\n")
    renamed = s.post(f"{server.url}/notes/rename/org/{org}/styles.md",
                     data={"csrf_token": token, "scope": "org", "name": "taken.md"})
    assert renamed.status_code == 409 and "A note named taken.md already exists there" in renamed.text
    assert "Overwrite" not in renamed.text


def test_a_new_note_over_the_owners_cap_keeps_what_was_typed(boot, server, db) -> None:
    """At 10 000 live notes the store refuses one more with its sentence; the New note form comes
    back with the text still in it."""
    org = boot["org_id"]
    with db.transaction() as conn:
        conn.execute("INSERT INTO artifacts (org_id, kind, level, key, display_path, content)"
                     " SELECT %s, 'note', 'org', 'n' || i || '.md', %s || 'n' || i || '.md', 'x'"
                     " FROM generate_series(1, 10000) AS i", (org, f"org/{org}/"))
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(f"{server.url}/notes/new").text)
    made = s.post(f"{server.url}/notes/new", data={"csrf_token": token, "scope": "org", "name": "one more",
                                                   "content": "a long draft typed here\n"})
    assert made.status_code == 422 and "10,000" in made.text and "a long draft typed here" in made.text


def test_a_refused_save_of_a_note_deleted_meanwhile_keeps_the_text(boot, server, service) -> None:
    """A save refused for its content (too large, a NUL) over a note someone deleted meanwhile
    shows the refusal with the typed text, not a 404 that loses it."""
    org, agent = boot["org_id"], boot["agent_id"]
    write(server, service, agent, "org", "gone.md", "here\n")
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(f"{server.url}/notes/org/{org}/gone.md").text)
    ok(call_tool(server, service, agent, "note_delete", path=f"org/{org}/gone.md"))
    r = s.post(f"{server.url}/notes/org/{org}/gone.md",
               data={"csrf_token": token, "version": "1", "content": "typed with a NUL \x00 here"})
    assert r.status_code == 422 and "NUL" in r.text and "typed with a NUL" in r.text


def test_a_refused_new_note_keeps_what_was_typed_after_leaving(browser: Browser, boot, server) -> None:
    """The refusal page shows the text; leaving it (a link, the back button) keeps it as this
    tab's draft, offered again on New note."""
    login(browser, boot)
    browser.open("/notes/new")
    browser.fill({"name": "tmpab12cd34", "content": "a draft worth keeping\n"})
    press(browser, "Save")
    assert "choose another name" in browser.text()
    browser.open("/notes")
    browser.open("/notes/new")
    assert "was not saved" in browser.find(".flash.draft").text
    browser.button("Restore it").click()
    assert browser.find('[name="content"]').get_attribute("value") == "a draft worth keeping\n"


def test_the_draft_of_a_refused_new_note_says_why_it_was_not_saved(browser: Browser, boot, server) -> None:
    """A draft kept from a save the page refused says what is known, the refusal's sentence, and
    guesses no other reason (it blamed the session, which had not ended)."""
    login(browser, boot)
    browser.open("/notes/new?scope=org")
    browser.fill({"name": "a/b", "content": "some content\n"})
    press(browser, "Save")
    refusal = browser.find(".flash.error strong").text
    assert "notes are flat" in refusal
    browser.open("/notes/new?scope=org")
    notice = browser.find(".flash.draft").text
    browser.shot("draft-after-a-refusal")
    assert "was not saved" in notice and "session" not in notice, notice
    assert refusal in notice, notice


def test_text_typed_before_a_rename_is_offered_at_the_new_name(browser: Browser, boot, server, service) -> None:
    """Rename is a form of its own: what the editor held unsaved stayed the draft of the old
    name's page, which shows no editor after the move, and was never offered again. It goes with
    the note, and saved at the new name it is a save of the renamed note, not a conflict."""
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    write(server, service, agent, "guild", "sources.md", "- one\n")
    login(browser, boot)
    browser.open(f"/notes/org/{org}/guilds/{guild}/sources.md")
    browser.fill({"content": "- one\n- UNSAVED WORK\n"})
    browser.driver.execute_script("window.onbeforeunload = null; window.addEventListener('beforeunload',"
                                  " (e) => e.stopImmediatePropagation(), true);")   # (no dialog to answer)
    rename = browser.find("#rename-form")
    browser.fill({"name": "sources2.md"}, within=rename)
    browser.navigate(browser.button("Rename", within=rename))
    assert browser.path == f"/notes/org/{org}/guilds/{guild}/sources2.md?done=renamed"
    notice = browser.find(".flash.draft").text
    assert "was not saved: the note was renamed before it was saved." in notice, notice
    browser.shot("draft-after-a-rename")
    browser.button("Restore it").click()
    assert browser.find('textarea[name="content"]').get_attribute("value") == "- one\n- UNSAVED WORK\n"
    press(browser, "Save")
    assert not browser.finds(".conflict"), browser.text()
    got = ok(note_get(server, service, agent, f"org/{org}/guilds/{guild}/sources2.md"))
    assert got["content"] == "- one\n- UNSAVED WORK\n"


def test_new_rename_and_delete(browser: Browser, boot, server, service, operator) -> None:
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    login(browser, boot)
    browser.open("/notes")
    follow(browser, browser.find(f"#scope-guild-{guild} a.button"))
    browser.fill({"name": "ideas", "content": "- one\n- two\n"})
    browser.shot("note-new")
    press(browser, "Save")
    assert browser.path.startswith(f"/notes/org/{org}/guilds/{guild}/ideas.md") and "Note created." in browser.text()
    assert ok(note_get(server, service, agent, f"org/{org}/guilds/{guild}/ideas.md"))["content"] == "- one\n- two\n"
    # The same name again is refused with a sentence for the form, keeping what was typed.
    browser.open(f"/notes/new?scope=guild-{guild}")
    browser.fill({"name": "ideas.md", "content": "again"})
    press(browser, "Save")
    assert browser.find(".flash.error").text == ("A note named ideas.md already exists in this scope; choose "
                                                 "another name, or open that note to change it.")
    assert browser.find('textarea[name="content"]').get_attribute("value") == "again"
    browser.check_console()
    # A name that cannot be a note says why.
    browser.fill({"name": "a/b.md"})
    press(browser, "Save")
    assert "notes are flat" in browser.find(".flash.error").text
    browser.check_console()
    # Rename, and move to the organisation; a name with a folder in it is refused on the note's
    # page, saying why, with the name as typed.
    browser.open(f"/notes/org/{org}/guilds/{guild}/ideas.md")
    browser.fill({"name": "a/brainstorm.md"}, within=browser.find("#rename-form"))
    press(browser, "Rename")
    assert "notes are flat" in browser.find(".flash.error").text
    assert browser.find('#rename-form [name="name"]').get_attribute("value") == "a/brainstorm.md"
    browser.fill({"name": "brainstorm.md", "scope": "org"}, within=browser.find("#rename-form"))
    press(browser, "Rename")
    # A move to another scope says it moved, and where (a bare "Renamed." said neither).
    assert browser.path.startswith(f"/notes/org/{org}/brainstorm.md")
    assert browser.find(".flash.ok").text == "Moved from guild Research to the organisation, renamed from ideas.md."
    browser.shot("note-moved")
    assert ok(note_get(server, service, agent, f"org/{org}/brainstorm.md"))["version"] == 2
    assert note_get(server, service, agent, f"org/{org}/guilds/{guild}/ideas.md").status_code == 404
    assert [c["operation"] for c in changes(operator, server, f"org/{org}/guilds/{guild}/ideas.md")][0] == "move"
    # Its history at the new path says where it came from (it began with a bare "Create v2").
    arrival = changes(operator, server, f"org/{org}/brainstorm.md")[0]
    assert (arrival["operation"], arrival["moved_from"]) == ("create", f"org/{org}/guilds/{guild}/ideas.md")
    strip = browser.find("#provenance")
    browser.driver.execute_script("arguments[0].scrollIntoView()", strip)
    latest = browser.find("#provenance .latest").text
    assert f"Moved here from org/{org}/guilds/{guild}/ideas.md" in latest, latest
    browser.shot("note-renamed-strip")
    # Delete behind a confirmation naming the note.
    follow(browser, browser.link("Delete…"))
    assert "Delete the note brainstorm.md?" in browser.text()
    browser.shot("note-delete")
    press(browser, "Delete brainstorm.md")
    assert browser.path.startswith("/notes")
    assert browser.find(".flash.ok").text == "Note brainstorm.md deleted from the organisation."
    assert note_get(server, service, agent, f"org/{org}/brainstorm.md").status_code == 404
    removed = browser.find("#scope-org tr.removed")
    assert "brainstorm.md" in removed.text and "deleted" in removed.text
    # Its last version is said beside what happened to it; the Size column holds sizes only.
    cells = removed.find_elements(browser.By.TAG_NAME, "td")
    assert cells[0].text.endswith("deleted at v2") and cells[1].text == "", [c.text for c in cells]
    moved = browser.find(f"#scope-guild-{guild} tr.removed")
    assert "ideas.md" in moved.text and "moved away" in moved.text
    browser.shot("note-deleted")
    # A rename within the scope says from what; a path that was not deleted is not said to be.
    write(server, service, agent, "org", "draft.md", "d\n")
    browser.open(f"/notes/org/{org}/draft.md")
    browser.fill({"name": "final"}, within=browser.find("#rename-form"))
    press(browser, "Rename")
    assert browser.path.startswith(f"/notes/org/{org}/final.md")
    assert browser.find(".flash.ok").text == "Renamed from draft.md."
    browser.open(f"/notes?done=deleted&path=org/{org}/final.md")
    assert browser.find(".flash.ok").text == "Note deleted."


def test_a_rename_or_delete_refused_by_a_webdav_lock_or_the_cap_says_so_on_the_note_page(
        browser: Browser, boot, server, service, operator, db) -> None:
    """A note Word holds open over WebDAV (a lock) is neither renamed nor deleted, and a rename into
    a scope at its 10 000-note cap is refused: each refusal is the note's page with the store's
    sentence and the right status (423, 422), not the generic error page; nothing moves."""
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    path = f"org/{org}/report.md"
    write(server, service, agent, "org", "report.md", "draft from Word\n")
    r = operator.request("LOCK", f"{server.url}/dav/{path}", data=LOCK_BODY,
                         headers={"Timeout": "Second-300", "Depth": "0"})
    assert r.status_code == 200, r.text
    lock_token = r.headers["Lock-Token"]
    locked = f"/{path} is locked by a WebDAV client of {boot['email']}"
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(f"{server.url}/notes/{path}").text)
    renamed = s.post(f"{server.url}/notes/rename/{path}", data={"csrf_token": token, "scope": "org",
                                                                  "name": "final.md"})
    assert renamed.status_code == 423 and locked in renamed.text
    assert 'id="note-editor"' in renamed.text and 'value="final.md"' in renamed.text  # the note's page
    deleted = s.post(f"{server.url}/notes/delete/{path}", data={"csrf_token": token})
    assert deleted.status_code == 423 and locked in deleted.text and 'id="note-editor"' in deleted.text
    assert ok(note_get(server, service, agent, path))["version"] == 1
    assert note_get(server, service, agent, f"org/{org}/final.md").status_code == 404
    login(browser, boot)
    browser.open(f"/notes/delete/{path}")
    press(browser, "Delete report.md")
    assert locked in browser.find(".flash.error").text
    assert browser.find("h1").text.startswith("report.md")
    browser.shot("delete-refused-locked")
    assert operator.request("UNLOCK", f"{server.url}/dav/{path}",
                            headers={"Lock-Token": lock_token}).status_code == 204
    # The organisation holds 10 000 notes: a guild's note cannot move there.
    write(server, service, agent, "guild", "ideas.md", "- one\n")
    with db.transaction() as conn:
        conn.execute("INSERT INTO artifacts (org_id, kind, level, key, display_path, content)"
                     " SELECT %s, 'note', 'org', 'n' || i || '.md', %s || 'n' || i || '.md', 'x'"
                     " FROM generate_series(1, 9999) AS i", (org, f"org/{org}/"))
    ideas = f"org/{org}/guilds/{guild}/ideas.md"
    moved = s.post(f"{server.url}/notes/rename/{ideas}", data={"csrf_token": token, "scope": "org",
                                                                "name": "ideas.md"})
    assert moved.status_code == 422 and "the destination already holds 10,000 live files" in moved.text
    assert 'id="note-editor"' in moved.text
    assert ok(note_get(server, service, agent, ideas))["version"] == 1
    browser.open(f"/notes/{ideas}")
    browser.fill({"scope": "org"}, within=browser.find("#rename-form"))
    press(browser, "Rename")
    assert "the limit is 10,000 per owner; delete files there first" in browser.find(".flash.error").text
    browser.shot("rename-refused-cap")


def test_a_refused_rename_says_its_sentence_once(browser: Browser, boot, server, service) -> None:
    """The refusal's sentence is the heading of the error; it is not listed again under it as the
    problem of the name field."""
    org, agent = boot["org_id"], boot["agent_id"]
    write(server, service, agent, "org", "styles.md", "s\n")
    login(browser, boot)
    browser.open(f"/notes/org/{org}/styles.md")
    browser.fill({"name": "tmpzz12yy34"}, within=browser.find("#rename-form"))
    press(browser, "Rename")
    alert = browser.find(".flash.error")
    sentence = "has the form editors and programs give their temporary, backup and lock files"
    assert sentence in alert.text and browser.text().count(sentence) == 1, alert.text
    assert not alert.find_elements(browser.By.CSS_SELECTOR, "ul.problems")
    browser.shot("rename-refused-once")
    # An empty name, the same way.
    browser.fill({"name": " "}, within=browser.find("#rename-form"))
    press(browser, "Rename")
    assert browser.text().count("type the note's new name, such as plan.md") == 1


def test_deleting_or_moving_an_embedded_note_is_refused_with_links(browser: Browser, boot, server, service,
                                                                    operator) -> None:
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    path = f"org/{org}/guilds/{guild}/plan.md"
    write(server, service, agent, "guild", "plan.md", "the plan\n")
    login(browser, boot)
    # The task comes to embed the note while its delete page is open: the delete is refused.
    browser.open(f"/notes/delete/{path}")
    ok(operator.put(f"{server.url}/api/agents/{agent}/task", json={"task": f"Follow ![[{path}]] daily."}))
    press(browser, "Delete plan.md")
    refusal = browser.find("#embedded")
    assert f"cannot delete {path}: the task org/{org}/agents/{agent}/task.md embeds it" in refusal.text
    browser.shot("note-embedded-refusal")
    browser.check_console()
    assert ok(note_get(server, service, agent, path))["version"] == 1
    # Opened now, the note names its embedding task, and its delete page offers no Delete button.
    browser.open(f"/notes/{path}")
    assert f"org/{org}/agents/{agent}/task.md" in browser.find(".note-meta").text
    follow(browser, browser.link("Delete…"))
    assert "so it cannot be deleted" in browser.text()
    browser.shot("delete-page-of-an-embedded-note")
    assert not [b for b in browser.finds("button") if b.text == "Delete plan.md"]
    # Moving is refused the same way, on the note's page.
    browser.open(f"/notes/{path}")
    browser.fill({"name": "renamed.md"}, within=browser.find("#rename-form"))
    press(browser, "Rename")
    assert "cannot move" in browser.find("#embedded").text
    browser.check_console()
    assert note_get(server, service, agent, f"org/{org}/guilds/{guild}/renamed.md").status_code == 404
    # The link opens the embedding task's editor.
    follow(browser, browser.find("#embedded a"))
    assert browser.path == f"/agents/{agent}#task"
    assert browser.find("#task-content").get_attribute("value") == f"Follow ![[{path}]] daily."


def test_history_is_paged(boot, server, service, operator, db) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    path = f"org/{org}/log.md"
    for i in range(23):
        write(server, service, agent, "org", "log.md", f"entry {i}\n")
    s = web_login(server, boot["email"], boot["password"])
    first = s.get(f"{server.url}/notes/{path}")
    assert first.status_code == 200 and first.text.count("<td>update</td>") == 20 and 'rel="next"' in first.text
    older = re.search(r'<a href="([^"]+)" rel="next">', first.text).group(1).replace("&amp;", "&")
    second = s.get(server.url + older)
    assert second.text.count("<td>update</td>") == 2 and second.text.count("<td>create</td>") == 1
    assert 'rel="first"' in second.text and 'rel="next"' not in second.text
    api = changes(operator, server, path)
    assert len(api) == 23 and api[20]["version"] == 3


def test_history_reaches_the_first_change_of_a_long_list(boot, server, service, db) -> None:
    """History expands the FULL change list (spec: File provenance): Older follows the store's
    cursor to the create, however many changes came after it."""
    org, agent = boot["org_id"], boot["agent_id"]
    path = f"org/{org}/long.md"
    write(server, service, agent, "org", "long.md", "first\n")
    with db.transaction() as conn:  # 1 200 later saves, seeded as their provenance rows
        conn.execute("""INSERT INTO file_changes (org_id, display_path, operation, version, actor_type, actor_name)
                        SELECT %s, %s, 'update', g, 'user', 'seed' FROM generate_series(2, 1201) AS g""", (org, path))
    s = web_login(server, boot["email"], boot["password"])
    url, seen, pages = f"/notes/{path}", 0, 0
    while True:
        page = s.get(server.url + url)
        assert page.status_code == 200
        seen += page.text.count("<td>update</td>") + page.text.count("<td>create</td>")
        pages += 1
        m = re.search(r'<a href="([^"]+)" rel="next">', page.text)
        if m is None:
            break
        url = m.group(1).replace("&amp;", "&")
    assert seen == 1201 and "<td>create</td>" in page.text and pages == 61


def test_other_organisations_and_forms_without_the_token(boot, server, db) -> None:
    other = admin.bootstrap(db, org_name="Other", email="bob@example.com", password="another good password")
    with db.transaction() as conn:
        from store import notes
        from store.access import SYSTEM
        notes.write_note(conn, other["org_id"], "org", None, "secret.md", "theirs", SYSTEM)
    s = web_login(server, boot["email"], boot["password"])
    for url in (f"/notes/org/{other['org_id']}/secret.md", f"/notes/delete/org/{other['org_id']}/secret.md",
                f"/agents/{other['agent_id']}", f"/notes/org/{boot['org_id']}/agents/{other['agent_id']}/x.md",
                f"/notes/org/{boot['org_id']}/nothing.md", f"/agents/{other['agent_id']}/task/revisions/1"):
        r = s.get(server.url + url)
        assert r.status_code == 404, (url, r.status_code)
        assert "theirs" not in r.text and "Other" not in r.text
    page = s.get(f"{server.url}/notes")
    assert "secret.md" not in page.text
    token = csrf_of(page.text)
    # Writing into another organisation: 404, nothing written.
    r = s.post(f"{server.url}/notes/org/{other['org_id']}/secret.md",
               data={"csrf_token": token, "content": "mine now", "version": "1"})
    assert r.status_code == 404
    r = s.post(f"{server.url}/notes/new", data={"csrf_token": token, "scope": f"agent-{other['agent_id']}",
                                                "name": "x.md", "content": "x"})
    assert r.status_code == 422 and "is not one of this organisation" in r.text
    # A form without the CSRF token is refused.
    ok(requests.post(f"{server.url}/api/agents/{boot['agent_id']}/tools/note_write",
                     headers={"Authorization": f"Bearer {boot['service_token']}"},
                     json={"level": "org", "key": "mine.md", "content": "v1"}))
    r = s.post(f"{server.url}/notes/org/{boot['org_id']}/mine.md", data={"content": "changed", "version": "1"})
    assert r.status_code == 403 and "security token" in r.text
    r = s.post(f"{server.url}/notes/delete/org/{boot['org_id']}/mine.md")
    assert r.status_code == 403
    with db.connection() as conn:
        from store import notes
        row = notes.get_note(conn, boot["org_id"], "org", None, "mine.md")
        other_row = notes.get_note(conn, other["org_id"], "org", None, "secret.md")
    assert row["content"] == "v1" and other_row["content"] == "theirs"


def test_names_with_spaces_marks_and_accents_round_trip(boot, server, service) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(f"{server.url}/notes/new").text)
    for name in ("Q&A #3 ?50% off.md", "résumé.md", "100%.md"):
        r = s.post(f"{server.url}/notes/new", data={"csrf_token": token, "scope": "org", "name": name,
                                                    "content": f"about {name}"})
        assert r.status_code == 200 and "Note created." in r.text, (name, r.status_code)
        got = ok(note_get(server, service, agent, f"org/{org}/{name}"))
        assert got["content"] == f"about {name}"
        # The index links it, and the link opens it.
        index = s.get(f"{server.url}/notes").text
        href = re.search(r'<a href="([^"]+)">' + re.escape(name.replace("&", "&amp;")) + "</a>", index)
        assert href, name
        page = s.get(server.url + href.group(1).replace("&amp;", "&"))
        assert page.status_code == 200 and f"about {name}".replace("&", "&amp;") in page.text
        saved = s.post(server.url + href.group(1).replace("&amp;", "&"),
                       data={"csrf_token": token, "content": "changed", "version": "1"})
        assert saved.status_code == 200 and "Saved." in saved.text
        assert ok(note_get(server, service, agent, f"org/{org}/{name}"))["content"] == "changed"


def test_saving_a_note_deleted_meanwhile_or_too_large(boot, server, service) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    path = f"org/{org}/gone.md"
    write(server, service, agent, "org", "gone.md", "v1\n")
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(f"{server.url}/notes/{path}").text)
    ok(call_tool(server, service, agent, "note_delete", path=path))
    r = s.post(f"{server.url}/notes/{path}", data={"csrf_token": token, "content": "my edit\n", "version": "1"})
    assert r.status_code == 409 and "the note was deleted meanwhile" in r.text
    assert note_get(server, service, agent, path).status_code == 404
    # Saving again is a deliberate create from the text that was kept.
    assert 'name="version" value="0"' in r.text and "my edit" in r.text
    r = s.post(f"{server.url}/notes/{path}", data={"csrf_token": token, "content": "my edit\n", "version": "0"})
    assert r.status_code == 200 and "Saved." in r.text
    assert ok(note_get(server, service, agent, path))["content"] == "my edit\n"
    # Over 256 KB: refused with the store's sentence, nothing written, the text kept in the editor.
    big = "x" * 262_145
    r = s.post(f"{server.url}/notes/{path}", data={"csrf_token": token, "content": big, "version": "1"})
    assert r.status_code == 413 and "at most 262,144 bytes" in r.text and big in r.text
    assert ok(note_get(server, service, agent, path))["content"] == "my edit\n"
    # A form without the version it started from is refused, not saved blindly.
    r = s.post(f"{server.url}/notes/{path}", data={"csrf_token": token, "content": "blind"})
    assert r.status_code == 422 and "which version" in r.text
    assert ok(note_get(server, service, agent, path))["content"] == "my edit\n"


def test_the_strip_names_the_run_and_tool_call_of_an_agent_change(boot, server, service, operator) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    run = ok(service.post(f"{server.url}/api/runs", json={"agent_id": agent, "kind": "schedule",
                                                          "routine": "morning"}), 201)
    ok(service.post(f"{server.url}/api/agents/{agent}/tools/note_write",
                    json={"level": "org", "key": "daily.md", "content": "today\n"},
                    headers={"X-Run-Id": str(run["id"]), "X-Tool-Call-Id": "toolu_42"}))
    s = web_login(server, boot["email"], boot["password"])
    page = s.get(f"{server.url}/notes/org/{org}/daily.md").text
    latest = page[page.index('<div class="latest">'):page.index("</div>", page.index('<div class="latest">'))]
    assert f"run {run['id']} (schedule, morning, running)" in latest
    assert "note_write" in latest and "toolu_42" in latest and "Scout" in latest and "v1" in latest
    api = ok(operator.get(f"{server.url}/api/file-changes/latest", params={"display_paths": f"org/{org}/daily.md"}))
    change = api["latest"][f"org/{org}/daily.md"]
    assert change["run_id"] == run["id"] and change["tool_call_id"] == "toolu_42"


def test_open_step_opens_the_run_at_that_tool_call(browser: Browser, boot, server, service, db) -> None:
    """The strip's Open step leads to the writing run, with the changes of that tool call marked
    among the run's other steps; a run of another organisation is unknown."""
    org, agent = boot["org_id"], boot["agent_id"]
    run = ok(service.post(f"{server.url}/api/runs", json={"agent_id": agent, "kind": "chat"}), 201)
    for key, call in (("before.md", "toolu_1"), ("daily.md", "toolu_2"), ("after.md", "toolu_3")):
        ok(service.post(f"{server.url}/api/agents/{agent}/tools/note_write",
                        json={"level": "org", "key": key, "content": f"{key}\n"},
                        headers={"X-Run-Id": str(run["id"]), "X-Tool-Call-Id": call}))
    login(browser, boot)
    browser.open(f"/notes/org/{org}/daily.md")
    browser.driver.execute_script("document.getElementById('provenance').scrollIntoView()")
    browser.shot("strip-with-open-step")
    follow(browser, browser.find("#provenance .latest a.open-step"))
    assert browser.path == f"/runs/{run['id']}#call-toolu_2"
    assert f"Run {run['id']}" in browser.find("h1").text and "chat" in browser.find("h1").text
    rows = browser.finds("table.steps tbody tr")
    assert [r.find_elements(browser.By.TAG_NAME, "td")[3].text for r in rows] == [
        f"org/{org}/before.md", f"org/{org}/daily.md", f"org/{org}/after.md"]
    assert [("step" in (r.get_attribute("class") or "")) for r in rows] == [False, True, False]
    browser.shot("run")
    follow(browser, browser.link(f"org/{org}/after.md"))
    assert browser.path == f"/notes/org/{org}/after.md"
    # A record the run added links to its form (it was plain text), as a table's path to the table.
    from test_records_support import LEADS, make_collection
    leads = make_collection(db, org, "leads", LEADS, guild_id=boot["guild_id"])
    added = ok(service.post(f"{server.url}/api/agents/{agent}/tools/record_add",
                            json={"collection": "leads", "body": {"email": "ada@example.com"}},
                            headers={"X-Run-Id": str(run["id"]), "X-Tool-Call-Id": "toolu_4"}))
    browser.open(f"/runs/{run['id']}")
    record_path = f"org/{org}/collections/leads/{added['record']['id']}"
    follow(browser, browser.link(record_path))
    assert browser.path == f"/databases/{leads['id']}/records/{added['record']['id']}", browser.path
    theirs = admin.create_run(db, agent_id=admin.bootstrap(db, org_name="Other")["agent_id"], kind="chat")
    browser.open(f"/runs/{theirs['id']}")
    assert "Not found" in browser.text() and f"unknown run {theirs['id']}" in browser.text()


def test_removed_notes_lists_only_notes_still_gone(db, boot) -> None:
    from datetime import datetime, timedelta, timezone

    from store import files, notes
    from store.access import Actor
    from store.errors import NotFound
    org, guild = boot["org_id"], boot["guild_id"]
    ada = Actor("user", boot["user_id"], boot["email"])
    with db.transaction() as conn:
        for key in ("gone.md", "back.md", "moved.md"):
            notes.write_note(conn, org, "guild", guild, key, "x", ada)
        notes.delete_note(conn, org, "guild", guild, "gone.md", ada)
        notes.delete_note(conn, org, "guild", guild, "back.md", ada)
        notes.write_note(conn, org, "guild", guild, "back.md", "again", ada)
        notes.move_note(conn, (org, "guild", guild, "moved.md"), (org, "org", None, "moved.md"), ada, replace=False)
    since = datetime.now(timezone.utc) - timedelta(days=1)
    with db.connection() as conn:
        removed = files.removed_notes(conn, frozenset({org}), org, since=since)
        later = files.removed_notes(conn, frozenset({org}), org, since=datetime.now(timezone.utc) + timedelta(hours=1))
        with pytest.raises(NotFound):
            files.removed_notes(conn, frozenset({org}), org + 1, since=since)
    assert [(r["key"], r["operation"], r["level"], r["owner_id"]) for r in removed] == [
        ("moved.md", "move", "guild", guild), ("gone.md", "delete", "guild", guild)]
    assert removed[1]["actor_name"] == boot["email"] and removed[1]["version"] == 1
    assert later == []


def test_a_deleted_note_stays_listed_however_many_changes_follow(db, boot) -> None:
    """The list read the organisation's newest 5 000 changes of any kind, so a delete fell out of
    "recently deleted" after a few minutes of agents' writes (the page promises 7 days). The
    writes that follow are stood in for by their change rows, 6 000 of them."""
    from datetime import datetime, timedelta, timezone

    from store import files, notes
    from store.access import Actor
    org, guild = boot["org_id"], boot["guild_id"]
    ada = Actor("user", boot["user_id"], boot["email"])
    with db.transaction() as conn:
        notes.write_note(conn, org, "guild", guild, "gone.md", "x", ada)
        notes.delete_note(conn, org, "guild", guild, "gone.md", ada)
        conn.execute("INSERT INTO file_changes (org_id, display_path, operation, version, actor_type, actor_name)"
                     " SELECT %s, 'org/' || %s || '/busy.md', 'update', n, 'system', 'agent traffic'"
                     "   FROM generate_series(1, 6000) AS n", (org, org))
    with db.connection() as conn:
        removed = files.removed_notes(conn, frozenset({org}), org,
                                      since=datetime.now(timezone.utc) - timedelta(days=7))
    assert [(r["key"], r["operation"]) for r in removed] == [("gone.md", "delete")]


def test_a_name_with_dots_gets_md_added_as_the_form_says(boot, server, service) -> None:
    """".md is added when you leave it out": also when the name has a dot of its own ("Release
    1.2" was refused as not ending in .md); a name ending in .MD is left for the store to judge."""
    org, agent = boot["org_id"], boot["agent_id"]
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(f"{server.url}/notes/new").text)
    for name in ("Release 1.2", "Dr. Smith", "Meeting 2026.12.01", "plan.md"):
        r = s.post(f"{server.url}/notes/new", data={"csrf_token": token, "scope": "org", "name": name,
                                                    "content": name})
        key = name if name.endswith(".md") else name + ".md"
        assert r.status_code == 200 and "Note created." in r.text, (name, r.status_code, r.text[:300])
        assert ok(note_get(server, service, agent, f"org/{org}/{key}"))["content"] == name
    r = s.post(f"{server.url}/notes/rename/org/{org}/Release 1.2.md",
               data={"csrf_token": token, "scope": "org", "name": "Release 1.3"})
    assert r.status_code == 200 and "Renamed from Release 1.2.md." in r.text
    assert ok(note_get(server, service, agent, f"org/{org}/Release 1.3.md"))["content"] == "Release 1.2"
    r = s.post(f"{server.url}/notes/new", data={"csrf_token": token, "scope": "org", "name": "shout.MD",
                                                "content": "x"})
    assert note_get(server, service, agent, f"org/{org}/shout.MD.md").status_code == 404, r.status_code


def test_a_scripts_and_an_archived_memorys_paths_lead_to_their_pages(boot, server, service, db) -> None:
    """/notes/<display path> of a script or of an archived memory version goes to its page on the
    agent's State, as task.md and memory.md do, and a table's or a record's to the Databases page
    (they were 404s naming the page without a link)."""
    org, agent = boot["org_id"], boot["agent_id"]
    s = web_login(server, boot["email"], boot["password"])
    base = f"{server.url}/notes/org/{org}/agents/{agent}"
    for path, page in ((f"{base}/scripts/fetch.py", f"/agents/{agent}/scripts/fetch.py"),
                       (f"{base}/history-archive/20260101T000000Z-agent.md",
                        f"/agents/{agent}/memory/history/20260101T000000Z-agent.md"),
                       (f"{base}/task.md", f"/agents/{agent}#task"), (f"{base}/memory.md", f"/agents/{agent}#memory")):
        r = s.get(path, allow_redirects=False)
        assert r.status_code in (302, 303) and r.headers["Location"].endswith(page), (path, r.status_code)
    ok(service.post(f"{server.url}/api/agents/{agent}/tools/script_write",
                    json={"name": "fetch.py", "content": "print('hello')\n"}))
    r = s.get(f"{base}/scripts/fetch.py")
    assert r.status_code == 200 and r.url.endswith(f"/agents/{agent}/scripts/fetch.py") and "hello" in r.text
    # A table's and a record's paths go to the Databases page while the table is there.
    from test_records_support import LEADS, make_collection
    table = make_collection(db, org, "leads", LEADS)
    for path, page in ((f"org/{org}/collections/leads", f"/databases/{table['id']}"),
                       (f"org/{org}/collections/leads/7", f"/databases/{table['id']}/records/7")):
        r = s.get(f"{server.url}/notes/{path}", allow_redirects=False)
        assert r.status_code in (302, 303) and r.headers["Location"].endswith(page), (path, r.status_code)
    assert s.get(f"{server.url}/notes/org/{org}/collections/gone", allow_redirects=False).status_code == 404


def test_embeds_and_run_steps_of_files_gone_are_marked_not_linked(browser: Browser, boot, server, service,
                                                                  db) -> None:
    """A note's Embeds and a run's steps link what is there now; a note deleted, moved away or
    never written, and a record removed, are shown as their path marked so (they linked to 404s
    that said nothing); a note deleted or moved away links to its old path's page, which says
    where it went and shows its History."""
    from test_records_support import LEADS, make_collection
    org, agent = boot["org_id"], boot["agent_id"]
    run = ok(service.post(f"{server.url}/api/runs", json={"agent_id": agent, "kind": "chat"}), 201)
    headers = {"X-Run-Id": str(run["id"]), "X-Tool-Call-Id": "toolu_1"}
    for key in ("kept.md", "gone.md", "away.md"):
        ok(service.post(f"{server.url}/api/agents/{agent}/tools/note_write",
                        json={"level": "org", "key": key, "content": f"{key}\n"}, headers=headers))
    make_collection(db, org, "leads", LEADS, guild_id=boot["guild_id"])
    added = ok(service.post(f"{server.url}/api/agents/{agent}/tools/record_add",
                            json={"collection": "leads", "body": {"email": "ada@example.com"}}, headers=headers))
    record = f"org/{org}/collections/leads/{added['record']['id']}"
    ok(call_tool(server, service, agent, "record_remove", collection="leads", id=added["record"]["id"]))
    ok(call_tool(server, service, agent, "note_delete", path=f"org/{org}/gone.md"))
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(f"{server.url}/notes").text)
    assert s.post(f"{server.url}/notes/rename/org/{org}/away.md",
                  data={"csrf_token": token, "scope": "org", "name": "there.md"}).status_code == 200
    embeds = "".join(f"![[org/{org}/{k}]]\n" for k in ("kept.md", "gone.md", "away.md", "never.md"))
    write(server, service, agent, "org", "index.md", embeds + f"![[{record}]]\n")
    page = s.get(f"{server.url}/notes/org/{org}/index.md").text
    listed = re.search(r'<ul class="embeds">(.*?)</ul>', page, re.S).group(1)
    assert f'<a href="/notes/org/{org}/kept.md">org/{org}/kept.md</a>' in listed
    for path, mark in ((f"org/{org}/never.md", "missing"), (record, "deleted")):
        assert f'<span class="mono">{path}</span> <span class="muted gone-mark">({mark})</span>' in listed, path
        assert f">{path}</a>" not in listed, path
    for path, mark in ((f"org/{org}/gone.md", "deleted"), (f"org/{org}/away.md", "moved away")):
        assert f'<a href="/notes/{path}">{path}</a> <span class="muted gone-mark">({mark})</span>' in listed, path
    steps = s.get(f"{server.url}/runs/{run['id']}").text
    assert f'<a href="/notes/org/{org}/kept.md">' in steps
    assert f'{record} <span class="muted gone-mark">(deleted)</span>' in steps and f">{record}</a>" not in steps
    for path, mark in ((f"org/{org}/gone.md", "deleted"), (f"org/{org}/away.md", "moved away")):
        assert f'<a href="/notes/{path}">{path}</a> <span class="muted gone-mark">({mark})</span>' in steps, path
    gone = s.get(f"{server.url}/notes/org/{org}/away.md")
    assert gone.status_code == 404 and f"it was moved to" in gone.text and f"org/{org}/there.md" in gone.text
    login(browser, boot)
    browser.open(f"/notes/org/{org}/index.md")
    browser.driver.execute_script("document.querySelector('ul.embeds').scrollIntoView({block: 'center'})")
    browser.shot("embeds-gone")
    browser.open(f"/runs/{run['id']}")
    browser.shot("run-steps-gone")


def test_the_strip_stands_as_far_from_the_cards_as_they_do_from_each_other(browser: Browser, boot, server,
                                                                           service) -> None:
    """The provenance strip touched the Embeds card above it (app.css zeroed its margin)."""
    org, agent = boot["org_id"], boot["agent_id"]
    write(server, service, agent, "org", "spaced.md", "text\n")
    login(browser, boot)
    browser.open(f"/notes/org/{org}/spaced.md")
    gap = browser.driver.execute_script(
        "const r = s => document.querySelector(s).getBoundingClientRect();"
        "return [r('#provenance').top - r('.note-meta').bottom, r('.note-meta').top - r('.note-layout').bottom];")
    assert gap[0] == gap[1] == 16, gap
    browser.driver.execute_script("document.getElementById('provenance').scrollIntoView({block: 'center'})")
    browser.shot("strip-spacing")


def test_links_to_display_paths_lead_to_their_pages(boot, server, service) -> None:
    """A memory embedded in a note is shown as a link to its path, and a note may link a path
    itself: as written the link was relative and led to a 404 under the page's own path
    (/notes/org/1/.../org/1/agents/1/memory.md); it leads to that path's page."""
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    write(server, service, agent, "guild", "links.md",
          f"![[org/{org}/agents/{agent}/memory.md]]\n\nSee [the plan](org/{org}/guilds/{guild}/plan.md)"
          " and [elsewhere](https://example.com/x) and [a relative one](plan.md).\n")
    web = web_login(server, boot["email"], boot["password"])
    page = web.get(f"{server.url}/notes/org/{org}/guilds/{guild}/links.md").text
    preview = page[page.index('id="rendered"'):]
    preview = preview[:preview.index("</article>")]
    hrefs = re.findall(r'href="([^"]*)"', preview)
    assert hrefs == [f"/agents/{agent}#memory", f"/notes/org/{org}/guilds/{guild}/plan.md",
                     "https://example.com/x", "plan.md"], preview

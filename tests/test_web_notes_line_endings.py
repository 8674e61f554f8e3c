"""The web editors keep a file's bytes: a note or task written with CRLF line breaks and a byte
order mark (a Windows editor over WebDAV, a client of PUT /api/agents/<id>/task) saved from the
web app unchanged writes nothing, and saved changed keeps its CRLF and its BOM. A browser shows a
textarea's lines with LF and sends them with CRLF whatever the file had, so the editor compares and
saves text as the browser can represent it, and the 256 KB cap is judged on the bytes stored."""
from __future__ import annotations

import requests

from tests.conftest import RunningServer
from tests.web_browser import Browser, browser, chromium, csrf_of, web_login  # noqa: F401 - fixtures
from test_records_support import ok
from test_web_notes import changes, login, press

WINDOWS_NOTE = "\ufeff# T\r\nline\r\n".encode("utf-8")


def dav_bytes(operator: requests.Session, server: RunningServer, path: str) -> bytes:
    r = operator.get(f"{server.url}/dav/{path}")
    assert r.status_code == 200, (r.status_code, r.text[:300])
    return r.content


def test_a_windows_note_saved_unchanged_writes_nothing_and_saved_changed_keeps_crlf_and_bom(
        browser: Browser, boot, server, operator) -> None:
    org = boot["org_id"]
    path = f"org/{org}/windows.md"
    assert operator.put(f"{server.url}/dav/{path}", data=WINDOWS_NOTE).status_code in (201, 204)
    assert dav_bytes(operator, server, path) == WINDOWS_NOTE
    login(browser, boot)
    browser.open(f"/notes/{path}")
    assert browser.find("#rendered h1").text == "T"   # (the BOM does not hide the heading)
    # The browser holds the text with LF (it cannot represent CRLF in a textarea).
    assert browser.find("#note-content").get_attribute("value").lstrip("\ufeff") == "# T\nline\n"
    press(browser, "Save")
    assert "Nothing changed, so nothing was saved." in browser.text()
    assert dav_bytes(operator, server, path) == WINDOWS_NOTE
    assert [c["operation"] for c in changes(operator, server, path)] == ["create"]
    browser.shot("windows-note-unchanged")
    # A change keeps the file's CRLF and its BOM, on every line, the new one too.
    editor = browser.find("#note-content")
    editor.send_keys("added in the browser\n")
    press(browser, "Save")
    assert "Saved." in browser.text()
    assert dav_bytes(operator, server, path) == "\ufeff# T\r\nline\r\nadded in the browser\r\n".encode("utf-8")
    assert [c["operation"] for c in changes(operator, server, path)] == ["update", "create"]
    # A note written with LF stays LF (the browser still sends CRLF).
    s = web_login(server, boot["email"], boot["password"])
    assert operator.put(f"{server.url}/dav/org/{org}/unix.md", data=b"one\ntwo\n").status_code in (201, 204)
    token = csrf_of(s.get(f"{server.url}/notes/org/{org}/unix.md").text)
    r = s.post(f"{server.url}/notes/org/{org}/unix.md",
               data={"csrf_token": token, "version": "1", "content": "one\r\ntwo\r\nthree\r\n"})
    assert r.status_code == 200 and "Saved." in r.text
    assert dav_bytes(operator, server, f"org/{org}/unix.md") == b"one\ntwo\nthree\n"


def test_the_cap_is_judged_on_the_bytes_the_note_is_stored_at(browser: Browser, boot, server, operator) -> None:
    """A CRLF note is stored with two bytes per line break: a text the browser shows under 256 KB
    may be over it once stored, and is refused saying so; an LF note sent with CRLF by the browser
    is judged at its LF size."""
    org = boot["org_id"]
    s = web_login(server, boot["email"], boot["password"])
    line = "x" * 63 + "\r\n"                       # 65 bytes stored, 64 as the browser holds it
    lines = 4_000                                  # 260,000 bytes stored, 256,000 shown
    assert operator.put(f"{server.url}/dav/org/{org}/big.md", data=b"small\r\n").status_code in (201, 204)
    token = csrf_of(s.get(f"{server.url}/notes/org/{org}/big.md").text)
    r = s.post(f"{server.url}/notes/org/{org}/big.md",
               data={"csrf_token": token, "version": "1", "content": line * (lines + 40)})
    stored = (lines + 40) * 65
    assert r.status_code == 413, r.status_code
    assert f"is {stored:,} bytes; a write holds at most 262,144 bytes" in r.text
    assert "Windows line breaks (CRLF)" in r.text
    assert dav_bytes(operator, server, f"org/{org}/big.md") == b"small\r\n"
    login(browser, boot)
    browser.open(f"/notes/org/{org}/big.md")
    browser.driver.execute_script("arguments[0].value = arguments[1];", browser.find("#note-content"),
                                  ("x" * 63 + "\n") * (lines + 40))
    press(browser, "Save")
    alert = browser.find(".flash.error")
    assert f"is {stored:,} bytes" in alert.text and "each line break counts two bytes" in alert.text
    browser.driver.execute_script("window.scrollTo(0, 0)")
    browser.shot("crlf-note-over-the-cap")
    r = s.post(f"{server.url}/notes/org/{org}/big.md",
               data={"csrf_token": token, "version": "1", "content": line * lines})
    assert r.status_code == 200 and "Saved." in r.text
    assert dav_bytes(operator, server, f"org/{org}/big.md") == (line * lines).encode()
    # An LF note: 4 030 lines are 261,950 bytes stored (under the cap), 265,980 as the form sends them.
    assert operator.put(f"{server.url}/dav/org/{org}/lf.md", data=b"small\n").status_code in (201, 204)
    r = s.post(f"{server.url}/notes/org/{org}/lf.md",
               data={"csrf_token": token, "version": "1", "content": ("y" * 64 + "\r\n") * 4_030})
    assert r.status_code == 200 and "Saved." in r.text
    assert dav_bytes(operator, server, f"org/{org}/lf.md") == ("y" * 64 + "\n").encode() * 4_030


def test_a_task_sent_with_crlf_is_kept_by_the_task_editor(browser: Browser, boot, server, operator) -> None:
    """PUT /api/agents/<id>/task keeps the task as sent; the State page's editor does too."""
    agent = boot["agent_id"]
    sent = "\ufeff# Daily\r\n\r\nCall the leads.\r\n"
    ok(operator.put(f"{server.url}/api/agents/{agent}/task", json={"task": sent}))
    login(browser, boot)
    browser.open(f"/agents/{agent}")
    press(browser, "Save")
    assert "Nothing changed, so nothing was saved." in browser.text()
    task = ok(operator.get(f"{server.url}/api/agents/{agent}/task"))
    assert task["task"] == sent and task["version"] == 1
    browser.shot("crlf-task-unchanged")
    browser.find("#task-content").send_keys("Then report.\n")
    press(browser, "Save")
    assert "Task saved" in browser.text()
    task = ok(operator.get(f"{server.url}/api/agents/{agent}/task"))
    assert task["task"] == sent + "Then report.\r\n" and task["version"] == 2

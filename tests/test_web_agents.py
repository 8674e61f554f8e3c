"""The agent's page (State) in a real browser against the real gateway and PostgreSQL, each result
asserted through the API as well: the task with its embeds and its editor, a stale task save,
revisions diffed against the current task, memory with its history-archive, scripts, and the
collections the agent reaches."""
from __future__ import annotations

from typing import Any

import requests

from store import admin
from tests.conftest import RunningServer
from tests.web_browser import Browser, browser, chromium, web_login  # noqa: F401 - fixtures
from test_records_support import LEADS, call_tool, make_collection, ok
from test_web_notes import follow, login, press


def task_api(operator: requests.Session, server: RunningServer, agent_id: int) -> dict[str, Any]:
    return ok(operator.get(f"{server.url}/api/agents/{agent_id}/task"))


def test_task_editor_revisions_and_diff(browser: Browser, boot, server, service, operator) -> None:
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    ok(call_tool(server, service, agent, "note_write", level="guild", key="plan.md", content="Call **ten** leads."))
    ok(operator.put(f"{server.url}/api/agents/{agent}/task",
                    json={"task": f"# Daily\n\nFollow the plan: ![[org/{org}/guilds/{guild}/plan.md]]\n"}))
    login(browser, boot)
    browser.open(f"/agents/{agent}")
    rendered = browser.find("#task-rendered")
    assert rendered.find_element(browser.By.TAG_NAME, "h1").text == "Daily"
    assert "Follow the plan: Call ten leads." in rendered.text
    assert rendered.find_element(browser.By.TAG_NAME, "strong").text == "ten"
    browser.link(f"org/{org}/guilds/{guild}/plan.md")  # the embed links to the note
    state = ok(service.get(f"{server.url}/api/agents/{agent}/state"))
    assert state["task"]["text"] == f"# Daily\n\nFollow the plan: Call **ten** leads.\n"
    browser.shot("state")
    editor = browser.find("#task-content")
    editor.clear()
    editor.send_keys("# Daily\n\nCall twenty leads, then report.\n")
    # Insert note: the box offers the notes the agent reads and puts the embed at the cursor.
    offered = [o.get_attribute("value") for o in browser.finds("#embed-choices option")]
    assert f"org/{org}/guilds/{guild}/plan.md" in offered
    browser.find("#embed-path").send_keys(f"org/{org}/guilds/{guild}/plan.md")
    browser.button("Insert").click()
    browser.shot("task-insert-embed")
    new_text = f"# Daily\n\nCall twenty leads, then report.\n![[org/{org}/guilds/{guild}/plan.md]]\n"
    assert browser.find("#task-content").get_attribute("value") == new_text
    assert not browser.finds(".embed-problems")  # every embed of the task shows its note
    press(browser, "Save")
    assert "Task saved" in browser.text()
    task = task_api(operator, server, agent)
    assert task["task"] == new_text and task["version"] == 2
    assert task["updated_by"] == boot["email"]
    revisions = ok(operator.get(f"{server.url}/api/agents/{agent}/task/revisions"))["revisions"]
    assert [r["version"] for r in revisions] == [1]
    rows = browser.finds("table.revisions tbody tr")
    assert len(rows) == 1 and "v1" in rows[0].text and boot["email"] in rows[0].text
    strip = browser.find("#task-provenance")
    assert "update" in strip.text.lower() and "v2" in strip.text
    follow(browser, browser.link("Diff with current"))
    assert browser.path == f"/agents/{agent}/task/revisions/1"
    diff = browser.find("pre.diff").text
    assert f"-Follow the plan: ![[org/{org}/guilds/{guild}/plan.md]]" in diff
    assert "+Call twenty leads, then report." in diff and " # Daily" in diff
    assert browser.find("pre.source").text.startswith("# Daily")
    browser.shot("task-revision-diff")


def test_insert_takes_only_an_offered_note_or_table_and_puts_it_on_a_line_of_its_own(
        browser: Browser, boot, server, service, operator, db) -> None:
    """Insert refuses what its list does not offer, beside the box and before touching the task;
    an offered note or table goes on a line of its own: at the end of the task until the cursor
    is placed, then at the cursor (a line split there)."""
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    ok(call_tool(server, service, agent, "note_write", level="guild", key="plan.md", content="Call **ten** leads."))
    make_collection(db, org, "leads", LEADS, guild_id=guild, purpose="sales leads")
    ok(operator.put(f"{server.url}/api/agents/{agent}/task", json={"task": "Start here.\nThen go on."}))
    login(browser, boot)
    browser.open(f"/agents/{agent}")
    task, box = browser.find("#task-content"), browser.find("#embed-path")
    problem = browser.find("#embed-problem")
    assert not problem.is_displayed()
    box.send_keys("nonexistent-thing")
    browser.button("Insert").click()
    assert problem.is_displayed() and problem.text.startswith(
        "nonexistent-thing is not one of the notes or tables offered here, so nothing was inserted: choose one "
        "from the list that opens as you type"), problem.text
    assert box.get_attribute("aria-invalid") == "true"
    assert task.get_attribute("value") == "Start here.\nThen go on."
    browser.shot("insert-refused")
    # Typing again clears the complaint; an offered note goes on its own line at the end.
    box.clear()
    box.send_keys(f"org/{org}/guilds/{guild}/plan.md")
    assert not problem.is_displayed()
    browser.button("Insert").click()
    assert task.get_attribute("value") == f"Start here.\nThen go on.\n![[org/{org}/guilds/{guild}/plan.md]]\n"
    # At the cursor, in the middle of a line: the line is split, the embed stands alone.
    browser.driver.execute_script("arguments[0].focus(); arguments[0].setSelectionRange(6, 6);", task)
    box.send_keys(f"org/{org}/collections/leads")
    browser.button("Insert").click()
    assert task.get_attribute("value") == (f"Start \n![[org/{org}/collections/leads]]\nhere.\nThen go on.\n"
                                           f"![[org/{org}/guilds/{guild}/plan.md]]\n")
    browser.shot("insert-at-cursor")
    press(browser, "Save")
    assert "Task saved" in browser.text() and not browser.finds(".embed-problems")
    assert task_api(operator, server, agent)["task"].count("![[") == 2


def test_a_table_embedded_in_the_task_links_to_its_page(browser: Browser, boot, server, operator, db) -> None:
    org, agent = boot["org_id"], boot["agent_id"]
    leads = make_collection(db, org, "leads", LEADS, guild_id=boot["guild_id"], purpose="sales leads")
    ok(operator.put(f"{server.url}/api/agents/{agent}/task", json={"task": f"Work ![[org/{org}/collections/leads]]."}))
    login(browser, boot)
    browser.open(f"/agents/{agent}")
    follow(browser, browser.link(f"org/{org}/collections/leads"))
    assert browser.path == f"/databases/{leads['id']}"


def test_a_task_saved_with_an_embed_that_shows_nothing_says_so(browser: Browser, boot, server, operator) -> None:
    """An embed of a note that does not exist (a typo) or of something embeds do not show is
    saved (the note may come later), and the page says at once what a run will see instead."""
    org, agent = boot["org_id"], boot["agent_id"]
    login(browser, boot)
    browser.open(f"/agents/{agent}")
    browser.fill({"task": f"Read ![[org/{org}/plann.md]] and ![[org/{org}/agents/{agent}/scripts/a.py]]."})
    press(browser, "Save")
    assert "Task saved" in browser.text()
    problems = browser.find(".embed-problems").text
    assert "2 embeds in the task show a run nothing" in problems
    assert f"embed missing: org/{org}/plann.md does not exist" in problems
    assert f"org/{org}/agents/{agent}/scripts/a.py is a script; only notes and collections are embedded" in problems
    browser.shot("embed-problems")
    assert task_api(operator, server, agent)["version"] == 1


def test_a_stale_task_save_shows_both(browser: Browser, boot, server, operator) -> None:
    agent = boot["agent_id"]
    ok(operator.put(f"{server.url}/api/agents/{agent}/task", json={"task": "first\n"}))
    login(browser, boot)
    browser.open(f"/agents/{agent}")
    ok(operator.put(f"{server.url}/api/agents/{agent}/task", json={"task": "second, from elsewhere\n"}))
    editor = browser.find("#task-content")
    editor.clear()
    editor.send_keys("mine\n")
    press(browser, "Save")
    assert "changed since you opened it" in browser.find("#conflict").text
    assert browser.find("pre.theirs").text == "second, from elsewhere"
    assert browser.find("pre.mine").text == "mine"
    assert "-second, from elsewhere" in browser.find("pre.diff").text and "+mine" in browser.find("pre.diff").text
    browser.shot("task-conflict")
    browser.check_console()
    assert task_api(operator, server, agent)["task"] == "second, from elsewhere\n"
    # The conflict page is served at the save's URL; what is typed there is the State page's
    # draft (and that URL leads back to it, as after a login), so leaving does not lose it.
    editor = browser.find("#task-content")
    editor.send_keys("and more")
    browser.open(f"/agents/{agent}/task")
    assert browser.path.split("#")[0] == f"/agents/{agent}"
    assert "was not saved" in browser.find(".flash.draft").text
    browser.button("Restore it").click()
    assert browser.find("#task-content").get_attribute("value") == "mine\nand more"
    press(browser, "Save")
    assert task_api(operator, server, agent)["task"] == "mine\nand more"


def test_memory_history_archive_scripts_and_collections(browser: Browser, boot, server, service, operator,
                                                        db) -> None:
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    ok(call_tool(server, service, agent, "memory_write", content="# Memory\n\nLikes *tea*."))
    ok(call_tool(server, service, agent, "memory_write", content="# Memory\n\nLikes *coffee* now."))
    ok(service.post(f"{server.url}/api/agents/{agent}/tools/script_write",
                    json={"name": "fetch.py", "content": "print('hello')\n"}))
    leads = make_collection(db, org, "leads", LEADS, guild_id=guild, purpose="sales leads")
    make_collection(db, org, "hidden", LEADS, purpose="nobody reaches this")
    login(browser, boot)
    browser.open(f"/agents/{agent}")
    memory = browser.find("#memory-rendered")
    assert "Likes coffee now." in memory.text and memory.find_element(browser.By.TAG_NAME, "em").text == "coffee"
    assert "v2" in browser.find("#memory-provenance").text
    archive = browser.finds("table.archive tbody tr")
    assert len(archive) == 1 and "v1" in archive[0].text and "agent" in archive[0].text
    scripts = browser.finds("table.scripts tbody tr")
    assert len(scripts) == 1 and "fetch.py" in scripts[0].text
    reach = browser.find("table.reach").text
    assert "leads" in reach and "write" in reach and "guild" in reach and "hidden" not in reach
    state = ok(service.get(f"{server.url}/api/agents/{agent}/state"))
    assert [c["name"] for c in state["collections"]] == ["leads"]
    browser.open(f"/agents/{agent}#memory")
    browser.shot("state-memory")
    archive = browser.finds("table.archive tbody tr")
    follow(browser, archive[0].find_element(browser.By.TAG_NAME, "a"))
    assert "/memory/history/" in browser.path and "Likes tea." in browser.find("article.markdown").text
    diff = browser.find("pre.diff").text
    assert "-Likes *tea*." in diff and "+Likes *coffee* now." in diff
    browser.shot("memory-archive")
    # The archived file is the one WebDAV shows under history-archive/.
    name = browser.path.rsplit("/", 1)[1]
    got = operator.get(f"{server.url}/dav/org/{org}/agents/{agent}/history-archive/{name}")
    assert got.status_code == 200 and got.text == "# Memory\n\nLikes *tea*."
    browser.open(f"/agents/{agent}/scripts/fetch.py")
    assert browser.find("#script-source").text == "print('hello')"
    browser.shot("script")
    assert "create" in browser.find("#provenance").text.lower() and "script_write" in browser.find("#provenance").text
    browser.open(f"/agents/{agent}")
    follow(browser, browser.link("leads"))
    assert browser.path == f"/databases/{leads['id']}"


def test_unknown_revisions_and_archive_names_are_404(boot, server) -> None:
    s = web_login(server, boot["email"], boot["password"])
    agent = boot["agent_id"]
    for url in (f"/agents/{agent}/task/revisions/7", f"/agents/{agent}/memory/history/nope.md",
                f"/agents/{agent}/scripts/nope.py", "/agents/999999"):
        r = s.get(server.url + url)
        assert r.status_code == 404, url
    other = admin.bootstrap(server.db, org_name="Elsewhere", email="eve@example.com", password="a password for eve")
    page = s.get(f"{server.url}/agents/{agent}")
    from tests.web_browser import csrf_of
    r = s.post(f"{server.url}/agents/{other['agent_id']}/task",
               data={"csrf_token": csrf_of(page.text), "task": "hijack", "version": "0"})
    assert r.status_code == 404
    with server.db.connection() as conn:
        row = conn.execute("SELECT task FROM agents WHERE id = %s", (other["agent_id"],)).fetchone()
    assert row["task"] == ""


def test_a_task_open_in_a_webdav_client_is_not_saved_over(browser: Browser, boot, server, operator) -> None:
    """task.md locked by a WebDAV client (an editor over WebDAV): the task editor's Save is refused
    with the holder's name and keeps the text; nothing is written; after the unlock, Save works."""
    org, agent = boot["org_id"], boot["agent_id"]
    path = f"org/{org}/agents/{agent}/task.md"
    lock_body = (b'<?xml version="1.0" encoding="utf-8"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/>'
                 b'</D:lockscope><D:locktype><D:write/></D:locktype><D:owner>vim</D:owner></D:lockinfo>')
    login(browser, boot)
    browser.open(f"/agents/{agent}")
    r = operator.request("LOCK", f"{server.url}/dav/{path}", data=lock_body, headers={"Timeout": "Second-300"})
    assert r.status_code == 200, r.text
    editor = browser.find("#task-content")
    editor.clear()
    editor.send_keys("my new task\n")
    press(browser, "Save")
    assert f"/{path} is locked by a WebDAV client of {boot['email']}" in browser.find(".flash.error").text
    assert browser.find("#task-content").get_attribute("value") == "my new task\n"
    browser.shot("task-locked")
    browser.check_console()
    assert task_api(operator, server, agent)["task"] == ""
    assert operator.request("UNLOCK", f"{server.url}/dav/{path}",
                            headers={"Lock-Token": r.headers["Lock-Token"]}).status_code == 204
    press(browser, "Save")
    assert task_api(operator, server, agent)["task"] == "my new task\n"


def in_view(browser: Browser, css: str) -> bool:
    """Whether the element is wholly inside the window as the page is scrolled now."""
    return browser.driver.execute_script(
        "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return r.height > 0 && r.top >= 0 && r.bottom <= window.innerHeight;", css)


def _row(browser: Browser, css: str, name: str) -> Any:
    return next(r for r in browser.finds(f"{css} tbody tr") if r.text.split("\n")[0].startswith(name))


def test_a_guilds_grants_and_an_agents_own_access_are_edited_from_their_state(browser: Browser, boot, server,
                                                                               service, operator, db) -> None:
    # The spec: "a guild's grants and an agent's own access are edited from their State and
    # Databases tabs". Each change is what a run of the agent then reaches (State over the API).
    from selenium.webdriver.support.ui import Select
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    make_collection(db, org, "leads", LEADS, purpose="sales leads")
    make_collection(db, org, "ledger", LEADS, guild_id=guild, purpose="the guild's own book")
    reached = lambda: [(c["name"], c["access"]) for c in ok(service.get(f"{server.url}/api/agents/{agent}/state"))["collections"]]  # noqa: E731
    assert reached() == [("ledger", "write")]
    login(browser, boot)
    # The guild's State, reached from the agent's.
    browser.open(f"/agents/{agent}")
    follow(browser, browser.find("h1 a"))
    assert browser.path == f"/guilds/{guild}"
    own = browser.find("table.guild-own").text
    assert "ledger" in own and "write" in own
    row = _row(browser, "table.guild-grants", "leads")
    Select(row.find_element(browser.By.NAME, "mode")).select_by_value("read")
    browser.navigate(browser.button("Save", within=row))
    assert "Access saved." in browser.text() and browser.path.startswith(f"/guilds/{guild}?")
    assert Select(_row(browser, "table.guild-grants", "leads").find_element(browser.By.NAME, "mode")
                  ).first_selected_option.text == "read"
    browser.shot("guild-state-databases")
    assert sorted(reached()) == [("leads", "read"), ("ledger", "write")]
    # The agent's own row, from its State: none on its guild's own table, write on leads.
    browser.open(f"/agents/{agent}#collections")
    row = _row(browser, "table.agent-access", "leads")
    assert "read" in row.find_element(browser.By.XPATH, "td[3]").text  # from the guild
    Select(row.find_element(browser.By.NAME, "mode")).select_by_value("write")
    browser.navigate(browser.button("Save", within=row))
    assert "Access saved." in browser.text()
    # The page opens at its Databases section, and the confirmation is there, on screen (it was
    # drawn at the top of the page, scrolled out of sight).
    assert browser.path.endswith("#collections")
    assert in_view(browser, "#collections .flash.ok"), browser.find("#collections .flash.ok").rect
    assert not browser.finds(".pagehead + .flash.ok")
    browser.shot("agent-access-saved")
    row = _row(browser, "table.agent-access", "ledger")
    Select(row.find_element(browser.By.NAME, "mode")).select_by_value("none")
    browser.navigate(browser.button("Save", within=row))
    assert _row(browser, "table.agent-access", "ledger").find_element(browser.By.CSS_SELECTOR, ".effective").text \
        == "no access"
    assert reached() == [("leads", "write")]
    assert "ledger" not in browser.find("table.reach").text
    browser.shot("agent-state-access")
    # Back to inheriting: the guild's mode again.
    row = _row(browser, "table.agent-access", "leads")
    Select(row.find_element(browser.By.NAME, "mode")).select_by_value("")
    browser.navigate(browser.button("Save", within=row))
    assert sorted(reached()) == [("leads", "read")]


def test_a_refused_access_change_says_why_on_the_state_page(boot, server, db) -> None:
    from tests.web_browser import csrf_of
    org = boot["org_id"]
    sales = admin.create_guild(db, org_id=org, name="Sales")
    theirs = make_collection(db, org, "pipeline", LEADS, guild_id=sales["id"])
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(f"{server.url}/agents/{boot['agent_id']}").text)
    r = s.post(f"{server.url}/agents/{boot['agent_id']}/access",
               data={"csrf_token": token, "collection_id": str(theirs["id"]), "mode": "read"})
    assert r.status_code == 422 and "accepted only for an agent of that guild" in r.text
    r = s.post(f"{server.url}/guilds/{boot['guild_id']}/access",
               data={"csrf_token": token, "collection_id": str(theirs["id"]), "mode": "read"})
    assert r.status_code == 422 and "takes no guild grant" in r.text
    r = s.post(f"{server.url}/guilds/{boot['guild_id']}/access", data={"csrf_token": token, "collection_id": "x", "mode": "read"})
    assert r.status_code == 422 and "collection_id must be a whole number" in r.text
    other = admin.bootstrap(db, org_name="Other", email="o@example.com", password="correct horse battery")
    assert s.get(f"{server.url}/guilds/{other['guild_id']}").status_code == 404
    assert s.get(f"{server.url}/guilds/999999").status_code == 404


def test_a_first_task_save_does_not_promise_an_earlier_text_in_the_revisions(boot, server, db) -> None:
    """The first save keeps no earlier text (there was none): its sentence says so, where it said
    "the previous text is kept in the revisions" over an empty Revisions list. The second save's
    sentence is true, and Revisions lists the first."""
    from tests.web_browser import csrf_of
    agent = admin.create_agent(db, org_id=boot["org_id"], guild_id=boot["guild_id"], name="Fresh")["id"]
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(f"{server.url}/agents/{agent}").text)
    first = s.post(f"{server.url}/agents/{agent}/task", data={"csrf_token": token, "task": "one", "version": "0"})
    assert first.status_code == 200 and "It is the task&#39;s first version" in first.text, first.text[:500]
    assert "kept in the revisions" not in first.text and "No earlier saves yet." in first.text
    second = s.post(f"{server.url}/agents/{agent}/task", data={"csrf_token": token, "task": "two", "version": "1"})
    assert "Task saved; the previous text is kept in the revisions." in second.text
    assert "No earlier saves yet." not in second.text

"""The notes browser at scale. Its pages run a bounded number of SQL queries: not one per note,
scope or agent (counted on the real gateway's own connections, tests/test_dav_scale.py). One
scope's list (a guild's Files, an agent's Notes) is paged, with a find box and a sort in its
URL and the notes deleted lately above it; the overview reads only the notes it shows; and the
task editor's Insert box finds any note or table the task may embed, however many notes the
agent has."""
from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlsplit

from selenium.webdriver.support.ui import Select

from store import admin, notes
from store.access import Actor
from tests.conftest import insert_notes, running_gateway
from tests.test_dav_scale import _RUN, counted_db  # noqa: F401 - fixture
from tests.web_browser import Browser, browser, chromium, phone, viewport, web_login  # noqa: F401 - fixtures
from test_records_support import LEADS, call_tool, make_collection, ok
from test_web_notes import follow, login, press
from test_web_phone import WIDTH, sideways

def test_notes_pages_run_a_bounded_number_of_queries(counted_db, boot: dict[str, Any]) -> None:
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    insert_notes(counted_db, org, "guild", guild, [f"note {i}" for i in range(1, 10_001)])
    with running_gateway(counted_db, threads=2) as running:
        s = web_login(running, boot["email"], boot["password"])

        def queries(url: str) -> tuple[int, str]:
            before = _RUN[0]
            r = s.get(running.url + url)
            assert r.status_code == 200, (url, r.status_code)
            return _RUN[0] - before, r.text

        few_agents, page = queries("/notes")
        assert "all 10000 notes of Research" in page and page.count('class="note') == 100
        for i in range(5):
            admin.create_agent(counted_db, org_id=org, guild_id=guild, name=f"Helper {i}")
        many_agents, page = queries("/notes")
        assert page.count('data-scope="agent-') == 6
        assert many_agents == few_agents <= 8, (few_agents, many_agents)
        # One scope's list: a page of 100, whichever page, find or sort (its count, one page).
        first, page = queries(f"/notes?scope=guild-{guild}")
        assert page.count('class="note') == 100 and "page 1 of 100" in page and first <= few_agents + 2
        last, page = queries(f"/notes?scope=guild-{guild}&sort=changed&page=100")
        assert page.count('class="note') == 100 and "page 100 of 100" in page and last == first
        found, page = queries(f"/notes?scope=guild-{guild}&q=N99")
        assert page.count('class="note') == 100 and "111</strong> of 10000 notes have" in page and found == first + 1
        one, page = queries(f"/notes/org/{org}/guilds/{guild}/n5000.md")
        assert "note 5000" in page and one <= 10, one
        state, page = queries(f"/agents/{agent}")
        # (23: one of them the Databases tab's access rows, added with its editor.)
        assert "Scout" in page and state <= 23, state
        # The Insert box's list: the first 50; the others are found by typing (its own route).
        assert page.count("<option value=\"org/") == 50 and "type part of a name to find" in page
        embeds, _ = queries(f"/agents/{agent}/embeds?q=n500")
        assert embeds <= 8, embeds


# --- one scope's list, paged ------------------------------------------------------------------------

OP = Actor("user", None, "ada@example.com")
PLANS = [f"Launch plan {i}.md" for i in range(1, 11)]
REPORTS = [f"report-{i:04d}.md" for i in range(1, 441)]
GONE = ["report-0007.md", "Launch plan 5.md"]
CHANGED = ["Launch plan 3.md", "report-0100.md", "Launch plan 7.md"]  # changed in this order, after the rest


def busy_scope(db: Any, org: int, level: str, owner: int) -> list[str]:
    """450 notes written through the store in one transaction (each change's time is its own, so
    the later written is the newer), two of them deleted and three changed afterwards; the live
    keys by name, in the database's (byte) order."""
    with db.transaction() as conn:
        for key in PLANS + REPORTS:
            notes.write_note(conn, org, level, owner, key, f"# {key}\n", OP)
    for key in GONE:
        with db.transaction() as conn:
            notes.delete_note(conn, org, level, owner, key, OP)
    for key in CHANGED:
        with db.transaction() as conn:
            notes.write_note(conn, org, level, owner, key, f"# {key}\n\nchanged\n", OP)
    return sorted((k for k in PLANS + REPORTS if k not in GONE), key=str.encode)


def names(browser: Browser, css: str = "tr.note") -> list[str]:
    return [a.text for a in browser.finds(f"{css} td.name a")]


def args(browser: Browser) -> dict[str, list[str]]:
    return parse_qs(urlsplit(browser.driver.current_url).query)


def test_a_guilds_files_are_paged_found_by_name_and_sorted(browser: Browser, db, boot, server) -> None:
    """A guild of 448 notes: its Files view shows 100 a page with its count and page, the pager
    reaches the last page and it holds the last notes by name; a find narrows by name (any case)
    and keeps the sort; sort by last change puts the newest first; the notes deleted lately are
    above the list. Every view is its URL, and the page works as a plain GET form."""
    org, guild = boot["org_id"], boot["guild_id"]
    live = busy_scope(db, org, "guild", guild)
    assert len(live) == 448
    login(browser, boot)
    browser.open(f"/guilds/{guild}")
    follow(browser, browser.link("Files"))
    assert browser.path == f"/notes?scope=guild-{guild}"
    assert names(browser) == live[:100]
    summary = browser.find("#summary").text
    assert "448 notes" in summary and "page 1 of 5" in summary, summary
    assert "448 notes" in browser.find(".pagehead h1").text
    # The notes deleted lately, above the list, each saying so and leading to where it went.
    removed = browser.finds("#scope-guild-%d tr.removed" % guild)
    assert sorted(names(browser, "tr.removed")) == sorted(GONE)
    assert all("deleted" in r.text for r in removed)
    assert removed[-1].rect["y"] < browser.find("tr.note").rect["y"]
    assert browser.find("#recently-deleted").rect["y"] < browser.find("form.notes-find").rect["y"]
    with viewport(browser, 1366, 768, mobile=False):
        browser.open(f"/notes?scope=guild-{guild}")
        browser.shot("files-desktop-1366")
        browser.driver.execute_script("document.querySelector('.pager.bottom').scrollIntoView({block: 'end'})")
        browser.shot("files-desktop-1366-bottom")
    # The pager: Last, then Previous; each page its notes by name.
    follow(browser, browser.find("#summary a[rel=last]"))
    assert args(browser)["page"] == ["5"] and names(browser) == live[400:]
    assert "page 5 of 5" in browser.find("#summary").text and not browser.finds("#summary a[rel=next]")
    assert not browser.finds("tr.removed")  # (above the first page's list only)
    follow(browser, browser.find("#summary a[rel=prev]"))
    assert args(browser)["page"] == ["4"] and names(browser) == live[300:400]
    follow(browser, browser.find(".pager.bottom a[rel=first]"))
    assert "page" not in args(browser) and names(browser) == live[:100]
    # Sort by last change: the newest first, then the rest (all written at once) by name.
    Select(browser.find("select[name=sort]")).select_by_value("changed")
    browser.wait(lambda d: args(browser).get("sort") == ["changed"])
    browser.wait(lambda d: d.execute_script("return document.readyState") == "complete")
    by_change = list(reversed(CHANGED)) + [k for k in reversed(PLANS + REPORTS) if k not in GONE + CHANGED]
    assert names(browser) == by_change[:100]
    # Find, any case, anywhere in the name: it keeps the sort, and the deleted plan is above.
    field = browser.find("input[name=q]")
    field.send_keys("PLAN")
    press(browser, "Find")
    assert args(browser)["q"] == ["PLAN"] and args(browser)["sort"] == ["changed"]
    plans = [k for k in PLANS if k not in GONE]
    assert names(browser) == [k for k in by_change if "plan" in k]
    assert names(browser)[:3] == ["Launch plan 7.md", "Launch plan 3.md", "Launch plan 10.md"]
    assert "9 of 448 notes have “PLAN” in the name" in browser.find("#summary").text
    assert names(browser, "tr.removed") == ["Launch plan 5.md"]
    assert not browser.finds("#summary a[rel=next]")
    browser.shot("files-find-plan")
    # Sort by name again keeps the find.
    Select(browser.find("select[name=sort]")).select_by_value("name")
    browser.wait(lambda d: args(browser).get("sort") == ["name"])
    browser.wait(lambda d: d.execute_script("return document.readyState") == "complete")
    assert args(browser)["q"] == ["PLAN"] and names(browser) == sorted(plans, key=str.encode)
    # A find nothing has; Clear leads back to every note.
    browser.open(f"/notes?scope=guild-{guild}&q=nothing-like-this")
    assert not browser.finds("tr.note") and "has “nothing-like-this” in its name" in browser.text()
    follow(browser, browser.link("Show every note"))
    assert names(browser) == live[:100]


def test_the_list_works_without_javascript_and_says_what_a_wrong_address_asks(db, boot, server) -> None:
    """The find and the sort are a plain GET form (?q=, ?sort=, ?page= in the URL); a page past
    the end leads to the last, and a page or sort the list does not have is said, not shown as
    some other page."""
    org, guild = boot["org_id"], boot["guild_id"]
    live = busy_scope(db, org, "guild", guild)
    s = web_login(server, boot["email"], boot["password"])
    page = s.get(f"{server.url}/notes", params={"scope": f"guild-{guild}"}).text
    assert '<form method="get" action="/notes"' in page and 'name="q"' in page and 'name="sort"' in page
    r = s.get(f"{server.url}/notes", params={"scope": f"guild-{guild}", "q": "report-04", "page": "2"})
    assert r.status_code == 200 and "41</strong> of 448 notes have" in r.text and "page 2 of 1" not in r.text
    assert "Page 2 is past the last page (1)" in r.text and r.text.count('class="note') == 0
    r = s.get(f"{server.url}/notes", params={"scope": f"guild-{guild}", "q": "report-04"})
    assert r.text.count('class="note') == 41 and [k for k in live if "report-04" in k][-1] in r.text
    for bad in ({"page": "0"}, {"page": "x"}, {"sort": "size"}):
        r = s.get(f"{server.url}/notes", params={"scope": f"guild-{guild}", **bad})
        assert r.status_code == 400 and r.text.count('class="note') == 0, bad
        assert "This address asks for a page or an order this list does not have" in r.text, bad
    assert s.get(f"{server.url}/notes", params={"scope": "guild-999999"}).status_code == 404


def test_a_guilds_files_on_a_phone(phone: Browser, db, boot, server) -> None:
    """At 390 px the list is cards (name, then size, last change and by, labelled), the find box,
    the sort and the pager fit the screen, and the page is 100 notes long, not 448."""
    org, guild = boot["org_id"], boot["guild_id"]
    live = busy_scope(db, org, "guild", guild)
    login(phone, boot)
    phone.open(f"/notes?scope=guild-{guild}")
    assert sideways(phone) == 0 and names(phone) == live[:100]
    cell = phone.find("tr.note td[data-label='Last change']")
    assert phone.driver.execute_script("return getComputedStyle(arguments[0], '::before').content", cell) \
        not in ("none", "normal", "")
    for css in ("form.notes-find input[name=q]", "form.notes-find select", "#summary a[rel=next]",
                "#summary a[rel=last]"):
        box = phone.find(css).rect
        assert box["x"] >= 0 and box["x"] + box["width"] <= WIDTH, (css, box)
    phone.shot("files-phone-390")
    phone.driver.execute_script("document.querySelector('form.notes-find').scrollIntoView()")
    phone.shot("files-phone-390-find")
    phone.driver.execute_script("document.querySelector('.pager.bottom').scrollIntoView({block: 'end'})")
    phone.shot("files-phone-390-bottom")


def test_the_overview_shows_each_scopes_count_and_first_notes(browser: Browser, db, boot, server) -> None:
    """The overview reads only what it shows: each scope's count (in the jump list and its "all N
    notes" link) and its first 100 notes by name, the notes deleted lately first in its box."""
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    live = busy_scope(db, org, "guild", guild)
    insert_notes(db, org, "agent", agent, [f"mine {i}\n" for i in range(1, 131)])
    insert_notes(db, org, "org", None, ["shared\n"] * 3)
    login(browser, boot)
    browser.open("/notes")
    jumps = {a.get_attribute("hash"): a.find_element(browser.By.CSS_SELECTOR, ".n").text
             for a in browser.finds("nav.scope-jump a")}
    assert jumps == {"#scope-org": "3", f"#scope-guild-{guild}": "448", f"#scope-agent-{agent}": "130"}
    assert names(browser, f"#scope-guild-{guild} tr.note") == live[:100]
    assert sorted(names(browser, f"#scope-guild-{guild} tr.removed")) == sorted(GONE)
    rows = browser.finds(f"#scope-guild-{guild} tbody tr")
    assert {r.get_attribute("class") for r in rows[:2]} == {"removed"}
    browser.link("all 448 notes of Research →")
    browser.link("all 130 notes of Scout →")
    assert names(browser, "#scope-org tr.note") == ["n1.md", "n2.md", "n3.md"]
    assert "Showing the first" not in browser.find("#scope-org").text
    assert "581 notes" in browser.find(".pagehead h1").text  # 3 + 448 + 130


# --- the task editor's Insert box -------------------------------------------------------------------

def test_insert_finds_a_table_and_a_guild_note_for_an_agent_with_many_notes(browser: Browser, db, boot, server,
                                                                            service, operator) -> None:
    """An agent with 1 050 notes of its own: the Insert box still offers its tables and its
    guild's and the organisation's notes (tables first), finds any of them by typing part of the
    name, takes one of its own typed whole that no list showed, and refuses another guild's."""
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    insert_notes(db, org, "agent", agent, [f"mine {i}\n" for i in range(1, 1_051)])
    insert_notes(db, org, "org", None, [f"shared {i}\n" for i in range(1, 61)])
    ok(call_tool(server, service, agent, "note_write", level="guild", key="quarterly-plan.md", content="The plan."))
    make_collection(db, org, "leads", LEADS, guild_id=guild, purpose="sales leads")
    sales = admin.create_guild(db, org_id=org, name="Sales")
    with db.transaction() as conn:
        notes.write_note(conn, org, "guild", sales["id"], "secret.md", "theirs\n", OP)
    ok(operator.put(f"{server.url}/api/agents/{agent}/task", json={"task": "Start here."}))
    table, plan = f"org/{org}/collections/leads", f"org/{org}/guilds/{guild}/quarterly-plan.md"
    login(browser, boot)
    browser.open(f"/agents/{agent}")
    offered = [o.get_attribute("value") for o in browser.finds("#embed-choices option")]
    assert len(offered) == 50 and offered[0] == table and plan not in offered
    box, task = browser.find("#embed-path"), browser.find("#task-content")
    hint = browser.find("#embed-hint")
    assert "type part of a name to find" in hint.text

    def listed() -> list[str]:  # (read at once: the box replaces its options as answers come)
        return browser.driver.execute_script(
            "return [...document.querySelectorAll('#embed-choices option')].map(o => o.value)")

    # Type part of the guild note's name: the list then holds it, and it goes in.
    box.send_keys("quarterly")
    browser.wait(lambda d: listed() == [plan])
    assert hint.text == "one has “quarterly” in its path: choose it from the list"
    browser.shot("insert-box-found")
    box.clear()
    box.send_keys(plan)
    browser.button("Insert").click()
    assert task.get_attribute("value") == f"Start here.\n![[{plan}]]\n"
    # The table, found by part of its name.
    box.send_keys("lead")
    browser.wait(lambda d: table in listed())
    box.clear()
    box.send_keys(table)
    browser.button("Insert").click()
    assert task.get_attribute("value") == f"Start here.\n![[{plan}]]\n![[{table}]]\n"
    # One of its own 1 050, typed whole without waiting for a list: the server says it may.
    mine = f"org/{org}/agents/{agent}/n1049.md"
    box.send_keys(mine + "\n")
    browser.wait(lambda d: task.get_attribute("value").endswith(f"![[{mine}]]\n"))
    # Another guild's note, typed whole: refused beside the box, the task untouched.
    theirs = f"org/{org}/guilds/{sales['id']}/secret.md"
    box.send_keys(theirs)
    browser.button("Insert").click()
    problem = browser.find("#embed-problem")
    browser.wait(lambda d: problem.is_displayed())
    assert problem.text.startswith(f"{theirs} is not a note or table this task can embed, so nothing was "
                                   "inserted: a task embeds its agent's own notes, its guild's"), problem.text
    assert "secret.md" not in task.get_attribute("value")
    browser.shot("insert-box-refused")
    box.clear()
    press(browser, "Save")
    assert "Task saved" in browser.text() and not browser.finds(".embed-problems")
    saved = ok(operator.get(f"{server.url}/api/agents/{agent}/task"))["task"]
    assert saved == f"Start here.\n![[{plan}]]\n![[{table}]]\n![[{mine}]]\n"
    browser.shot("insert-box-saved")


def test_the_insert_find_answers_only_what_the_task_may_embed(db, boot, server) -> None:
    """GET /agents/<id>/embeds?q=: at most 50 paths holding q (any case), tables first; exact
    for a path typed whole the task may embed, not for another guild's or agent's note."""
    org, guild, agent = boot["org_id"], boot["guild_id"], boot["agent_id"]
    insert_notes(db, org, "agent", agent, [f"mine {i}\n" for i in range(1, 1_051)])
    insert_notes(db, org, "guild", guild, ["g\n"] * 3)
    make_collection(db, org, "n1_leads", LEADS, guild_id=guild)
    other = admin.create_agent(db, org_id=org, guild_id=guild, name="Other")
    insert_notes(db, org, "agent", other["id"], ["x\n"])
    s = web_login(server, boot["email"], boot["password"])

    def find(q: str) -> dict[str, Any]:
        r = s.get(f"{server.url}/agents/{agent}/embeds", params={"q": q})
        assert r.status_code == 200 and r.headers["Content-Type"].startswith("application/json")
        return r.json()

    got = find("N1")
    assert len(got["paths"]) == 50 and got["more"] and not got["exact"]
    assert got["paths"][:3] == [f"org/{org}/collections/n1_leads", f"org/{org}/guilds/{guild}/n1.md",
                                f"org/{org}/agents/{agent}/n1.md"]
    assert find(f"org/{org}/agents/{agent}/n1050.md") == {
        "q": f"org/{org}/agents/{agent}/n1050.md", "paths": [f"org/{org}/agents/{agent}/n1050.md"],
        "more": False, "exact": True}
    assert find(f"org/{org}/agents/{agent}/n1051.md")["exact"] is False
    theirs = find(f"org/{org}/agents/{other['id']}/n1.md")
    assert theirs["paths"] == [] and theirs["exact"] is False
    assert s.get(f"{server.url}/agents/999999/embeds", params={"q": "x"}).status_code == 404

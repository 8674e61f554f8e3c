"""Layout defects a reviewer found in headless Chromium, each asserted as a person sees it: the notes
overview with a guild of 300 notes (the agents' scopes were 5 200 px down the page), selects and
the organisation switcher as wide as a long name on a phone (the page scrolled sideways), the
login page's focus after a wrong password, the table search's cut-off hint, and column names
split mid-identifier in the list of tables."""
from __future__ import annotations

from typing import Any

from store import admin
from tests.conftest import insert_notes
from tests.web_browser import Browser, browser, chromium, phone  # noqa: F401 - fixtures
from test_records_support import LEADS, make_collection
from test_web_notes import login, press
from test_web_phone import WIDTH, overflowing, sideways

LONG_GUILD = "The regional partnerships and channel sales guild of the northern hemisphere offices"
LONG_ORG = "Northern Hemisphere Regional Partnerships Holding Company Limited"


def busy_guild(db: Any, boot: dict[str, Any]) -> dict[str, Any]:
    """A guild with a long name holding 300 notes, and two more agents (Closer and Curator, beside
    the bootstrap's Scout): the organisation the reviewer looked at."""
    org = boot["org_id"]
    guild = admin.create_guild(db, org_id=org, name=LONG_GUILD)
    insert_notes(db, org, "guild", guild["id"], [f"note {i}\n" for i in range(1, 301)])
    for name in ("Closer", "Curator"):
        admin.create_agent(db, org_id=org, guild_id=guild["id"], name=name)
    return guild


def scope_tops(browser: Browser) -> dict[str, int]:
    """Each scope's card on the notes overview, in the page's order: how far down the page it
    starts, in px."""
    return dict(browser.driver.execute_script(
        "return [...document.querySelectorAll('section.scope')].map(s =>"
        " [s.dataset.scope, Math.round(s.getBoundingClientRect().top + window.scrollY)])"))


def test_every_scope_of_the_notes_overview_starts_on_the_first_screen(browser: Browser, db, boot, server) -> None:
    """A guild of 300 notes made its grid row 4 500 px tall: the column beside it stood blank and
    the agents' scopes started 5 200 px down. Its list now scrolls in its own box, the cards pack
    in columns, and every scope starts on the first screen of a desktop."""
    guild = busy_guild(db, boot)
    login(browser, boot)
    browser.open("/notes")
    tops = scope_tops(browser)
    assert len(tops) == 6, tops  # the organisation, two guilds, three agents
    screen = browser.driver.execute_script("return window.innerHeight")
    below = {key: top for key, top in tops.items() if top >= screen}
    assert not below, f"scopes starting below the first {screen} px screen: {below}"
    card = browser.find(f"#scope-guild-{guild['id']}").rect
    assert card["height"] < screen, card
    # The overview still previews the guild's first 100 notes (in its box), and the way to the
    # rest is on screen, below the box, not after it.
    rows = browser.finds(f"#scope-guild-{guild['id']} tr.note")
    assert len(rows) == 100
    more = browser.link(f"all 300 notes of {LONG_GUILD} →")
    assert more.rect["y"] + more.rect["height"] <= screen, more.rect
    browser.shot("notes-overview")
    browser.navigate(more)
    assert browser.path == f"/notes?scope=guild-{guild['id']}"
    assert len(browser.finds("tr.note")) == 100   # a page of it (tests/test_web_notes_scale.py)
    # One scope's page is its list, not a box.
    assert browser.find(f"#scope-guild-{guild['id']}").rect["height"] > screen
    browser.shot("one-scope")


def test_the_notes_overview_on_a_phone_lists_every_scope_at_the_top(phone: Browser, db, boot, server) -> None:
    """On a phone the scopes stack: behind the 300-note guild the agents were 10 000 px down. A
    list of the scopes at the top jumps to each, and no scope starts more than three screens
    down."""
    guild = busy_guild(db, boot)
    login(phone, boot)
    phone.open("/notes")
    assert sideways(phone) == 0
    tops = scope_tops(phone)
    far = {key: top for key, top in tops.items() if top > 3 * 844}
    assert not far, f"scopes more than three screens down: {far}"
    jumps = phone.finds("nav.scope-jump a")
    assert [a.get_attribute("hash") for a in jumps] == [f"#scope-{key}" for key in tops]
    assert all(a.rect["y"] + a.rect["height"] <= 844 and a.rect["x"] + a.rect["width"] <= WIDTH for a in jumps)
    # The guild's long name is cut in the list (its title holds it), not the list widened.
    long = next(a for a in jumps if a.get_attribute("hash") == f"#scope-guild-{guild['id']}")
    assert LONG_GUILD in long.get_attribute("title")
    phone.shot("notes-phone-top")
    # Scout, the last scope, starts below the first screen; its link brings its card into view.
    scout = f"#scope-agent-{boot['agent_id']}"
    in_view = ("const r = document.querySelector(arguments[0]).getBoundingClientRect();"
               "return r.top >= 0 && r.bottom <= window.innerHeight;")
    assert jumps[-1].text.startswith("Scout") and not phone.driver.execute_script(in_view, scout)
    jumps[-1].click()
    phone.wait(lambda d: d.execute_script(in_view, scout))
    phone.shot("notes-phone-jumped")


def test_selects_and_the_organisation_switcher_fit_a_phone(phone: Browser, db, boot, server) -> None:
    """The Owner select (New table, a table's Columns) was 553 px wide, as wide as a long guild's
    name, and the organisation switcher ran off the bar's right edge; a table's 63-character name
    widened its heading past the screen, and in the list of tables pushed the other columns out
    of sight. No page scrolls sideways at 390 px."""
    org = boot["org_id"]
    other = admin.create_org(db, name=LONG_ORG)
    admin.add_member(db, org_id=other["id"], email=boot["email"])
    guild = admin.create_guild(db, org_id=org, name=LONG_GUILD)
    deals = make_collection(db, org, "deals", LEADS, guild_id=guild["id"])
    named = make_collection(db, org, "partner_agreements_and_renewals_of_the_northern_offices_2026", LEADS,
                            guild_id=guild["id"])
    login(phone, boot)
    pages = {"new-table": "/databases/new", "columns": f"/databases/{deals['id']}/columns",
             "databases": "/databases", "notes": "/notes", "new-note": "/notes/new",
             "long-table-name": f"/databases/{named['id']}", "guild": f"/guilds/{guild['id']}"}
    too_wide = {}
    for name, path in pages.items():
        phone.open(path)
        phone.shot(name)
        width = phone.driver.execute_script("return document.documentElement.scrollWidth")
        if width > WIDTH:
            too_wide[name] = width
        switcher = phone.find("#org-switch").rect
        assert switcher["x"] >= 0 and switcher["x"] + switcher["width"] <= WIDTH, (name, switcher)
        logout = phone.button("Log out").rect
        assert logout["x"] + logout["width"] <= WIDTH, (name, logout)
        if name == "databases":
            # The 63-character table name wraps in its cell: the list does not scroll inside its
            # box, hiding its Purpose, Records and Columns to the right.
            assert not overflowing(phone, "table.tables"), name
        if name in ("new-table", "columns"):
            select = phone.find('select[name="owner"]')
            owner, form = select.rect, select.find_element(phone.By.XPATH, "./ancestor::form").rect
            assert owner["x"] + owner["width"] <= form["x"] + form["width"], (name, owner, form)
            # The guild's long name is an option, cut in the closed select, not left out.
            assert any(LONG_GUILD in o.text for o in select.find_elements(phone.By.TAG_NAME, "option"))
    assert not too_wide, f"pages wider than a {WIDTH} px screen (scrollWidth): {too_wide}"
    # The switcher still offers the long name whole, and names the current organisation in its title.
    options = [o.text for o in phone.finds("#org-switch option")]
    assert LONG_ORG in options
    assert phone.find("#org-switch").get_attribute("title") == "Bootstrap"


def test_a_refused_login_puts_the_cursor_in_the_password(browser: Browser, boot, server) -> None:
    """After a wrong password the email is kept and the cursor belongs in Password, where the
    person types again (it was in Email). A fresh login page starts in Email."""
    browser.open("/")
    assert browser.driver.execute_script("return document.activeElement.name") == "email"
    browser.fill({"email": boot["email"], "password": "not the password"})
    press(browser, "Log in")
    assert "do not match" in browser.find(".flash.error").text
    assert browser.find('input[name="email"]').get_attribute("value") == boot["email"]
    assert browser.driver.execute_script("return document.activeElement.name") == "password"
    browser.shot("refused-login")
    # Typing goes to the password, and logs in.
    from selenium.webdriver.common.action_chains import ActionChains
    ActionChains(browser.driver).send_keys(boot["password"]).perform()
    press(browser, "Log in")
    assert browser.path.startswith("/databases")


def hint_room(browser: Browser, css: str) -> tuple[float, float]:
    """(width of the placeholder text, width inside the box) of the input ``css``."""
    return tuple(browser.driver.execute_script(
        "const el = document.querySelector(arguments[0]), cs = getComputedStyle(el);"
        "const ctx = document.createElement('canvas').getContext('2d');"
        "ctx.font = cs.font;"
        "const inside = ['borderLeftWidth', 'borderRightWidth', 'paddingLeft', 'paddingRight']"
        "  .reduce((w, p) => w - parseFloat(cs[p]), el.getBoundingClientRect().width);"
        "return [ctx.measureText(el.placeholder).width, inside];", css))


def test_the_search_hint_is_not_cut_off(browser: Browser, db, boot, server) -> None:
    """The table search's hint, "Search <table> (words, OR, -word, "phrase")", was cut off mid-hint
    in its 320 px box: the box is now as wide as its hint."""
    org, guild = boot["org_id"], boot["guild_id"]
    login(browser, boot)
    for name in ("leads", "partner_agreements_2026"):
        table = make_collection(db, org, name, LEADS, guild_id=guild)
        browser.open(f"/databases/{table['id']}")
        hint = browser.find('input[name="q"]').get_attribute("placeholder")
        text, room = hint_room(browser, 'input[name="q"]')
        assert text <= room + 0.5, (hint, text, room)  # (the canvas and the layout round apart)
        browser.shot(f"search-{name}")


COLUMNS = [{"name": n, "type": "text", "description": n} for n in
           ("title", "partner_name", "opened_at", "closed_at", "expected_close_day", "owner_email",
            "amount_in_euros", "signed_up_at")]


def test_column_names_in_the_list_of_tables_break_between_names(phone: Browser, db, boot, server) -> None:
    """On a phone the list of tables showed "closed_" at a line's end and "at" on the next: a name
    that fits the Columns column moves to the next line whole; only a longer one breaks."""
    make_collection(db, boot["org_id"], "deals", COLUMNS, guild_id=boot["guild_id"], purpose="open and closed deals")
    login(phone, boot)
    phone.open("/databases")
    phone.shot("column-names")
    names = phone.driver.execute_script("""
        const out = [];
        for (const td of document.querySelectorAll('table.tables td:nth-child(4)')) {
          const nodes = [], walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
          let text = '';
          while (walker.nextNode()) { nodes.push([walker.currentNode, text.length]); text += walker.currentNode.data; }
          const at = (i) => { for (let k = nodes.length - 1; k >= 0; k--) if (nodes[k][1] <= i) return [nodes[k][0], i - nodes[k][1]]; };
          const cs = getComputedStyle(td);
          const room = td.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
          let start = 0;
          for (const name of text.trim().split(', ')) {
            const from = text.indexOf(name, start), range = document.createRange();
            const [sn, so] = at(from), [en, eo] = at(from + name.length - 1);
            range.setStart(sn, so); range.setEnd(en, eo + 1);
            const rects = [...range.getClientRects()].filter(r => r.width > 0);
            out.push([name, new Set(rects.map(r => Math.round(r.top))).size,
                      rects.reduce((sum, r) => sum + r.width, 0), room]);
            start = from + name.length;
          }
        }
        return out;""")
    assert [n[0] for n in names] == [c["name"] for c in COLUMNS]
    # A name that fits the column is on one line; "closed_at" and its like always fit.
    split = [name for name, lines, width, room in names if lines > 1 and (width <= room or len(name) <= 12)]
    assert not split, f"column names split across lines though they fit the column: {names}"

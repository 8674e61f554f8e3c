"""The web app's door: the login form, sessions in PostgreSQL, logout, CSRF and the headers.

Each test drives the real gateway (and, where a person would, the real headless Chromium) against
the real PostgreSQL."""
from __future__ import annotations

from typing import Any

import requests

from store import admin
from tests.conftest import RunningServer
from tests.web_browser import Browser, browser, chromium, csrf_of, web_login  # noqa: F401 - fixtures


def test_the_login_form_is_at_the_root_with_email_and_password(server: RunningServer) -> None:
    r = requests.get(server.url + "/", allow_redirects=False)
    assert r.status_code == 200
    assert 'name="email"' in r.text and 'name="password"' in r.text
    # WebDAV and the API keep their own answers.
    assert requests.get(server.url + "/api/health").json()["store"] == "reachable"
    assert requests.request("PROPFIND", server.url + "/dav/").status_code == 401


def test_log_in_see_the_navigation_and_log_out(browser: Browser, boot: dict[str, Any]) -> None:
    browser.open("/")
    browser.shot("login")
    browser.login(boot["email"], boot["password"])
    assert browser.path.startswith("/databases")
    nav = [a.text for a in browser.finds("nav a")]
    assert "Databases" in nav and "Notes" in nav
    browser.shot("databases-empty")
    cookie = browser.driver.get_cookie("hf_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Lax"
    browser.press("Log out")
    assert browser.find("input[name=password]")
    # The old cookie is worthless now: the row is gone.
    s = requests.Session()
    s.cookies.set("hf_session", cookie["value"])
    r = s.get(browser.base + "/databases", allow_redirects=False)
    assert r.status_code == 302 and r.headers["Location"].startswith("/?next=")


def test_a_wrong_password_says_so_and_keeps_the_email(browser: Browser, boot: dict[str, Any]) -> None:
    browser.login(boot["email"], "not the password")
    assert "do not match" in browser.text()
    assert browser.find("input[name=email]").get_attribute("value") == boot["email"]
    browser.shot("wrong-password")
    r = requests.post(browser.base + "/login", data={"email": boot["email"], "password": "nope"})
    assert r.status_code == 401
    r = requests.post(browser.base + "/login", data={"email": "", "password": ""})
    assert r.status_code == 400 and "Enter your email and your password" in r.text


def test_a_page_asked_for_before_login_opens_after_it(browser: Browser, boot: dict[str, Any]) -> None:
    browser.open("/databases?x=1")
    assert browser.find("input[name=password]")
    browser.fill({"email": boot["email"], "password": boot["password"]})
    browser.press("Log in")
    assert browser.path == "/databases?x=1"


def test_an_api_token_logs_in_and_revoking_it_ends_the_session(server: RunningServer, boot: dict[str, Any]) -> None:
    s = web_login(server, boot["email"], boot["member_token"])
    assert s.get(server.url + "/databases").status_code == 200
    with server.db.connection() as conn:
        conn.execute("UPDATE api_tokens SET revoked_at = now() WHERE prefix = %s", (boot["member_token"][:10],))
    r = s.get(server.url + "/databases", allow_redirects=False)
    assert r.status_code == 302 and "/?next=" in r.headers["Location"]


def test_removing_the_membership_ends_access_at_once(server: RunningServer, boot: dict[str, Any]) -> None:
    s = web_login(server, boot["email"], boot["password"])
    assert s.get(server.url + "/databases").status_code == 200
    with server.db.connection() as conn:
        conn.execute("DELETE FROM memberships WHERE user_id = %s", (boot["user_id"],))
    assert s.get(server.url + "/databases", allow_redirects=False).status_code == 302


def test_unsafe_requests_need_the_csrf_token(server: RunningServer, boot: dict[str, Any]) -> None:
    s = web_login(server, boot["email"], boot["password"])
    page = s.get(server.url + "/databases")
    token = csrf_of(page.text)
    r = s.post(server.url + "/logout", allow_redirects=False)
    assert r.status_code == 403 and "security token" in r.text
    assert s.get(server.url + "/databases", allow_redirects=False).status_code == 200  # still logged in
    forged = ("y" if token[0] == "x" else "x") + token[1:]
    r = s.post(server.url + "/logout", data={"csrf_token": forged}, allow_redirects=False)
    assert r.status_code == 403
    r = s.post(server.url + "/logout", headers={"X-CSRF-Token": token}, allow_redirects=False)
    assert r.status_code == 302
    assert s.get(server.url + "/databases", allow_redirects=False).status_code == 302


def test_a_form_sent_from_another_site_is_refused(server: RunningServer, boot: dict[str, Any]) -> None:
    r = requests.post(server.url + "/login", data={"email": boot["email"], "password": boot["password"]},
                      headers={"Origin": "https://evil.example"}, allow_redirects=False)
    assert r.status_code == 403 and "another site" in r.text
    assert "hf_session" not in r.cookies


def test_headers_allow_only_the_gateways_own_scripts(server: RunningServer, boot: dict[str, Any]) -> None:
    s = web_login(server, boot["email"], boot["password"])
    for path in ("/", "/databases", "/static/app.css", "/no-such-page"):
        r = s.get(server.url + path)
        csp = r.headers["Content-Security-Policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
        assert r.headers["X-Content-Type-Options"] == "nosniff"
    assert s.get(server.url + "/no-such-page").status_code == 404
    assert "<script>" not in s.get(server.url + "/databases").text


def test_the_org_switcher_shows_each_of_the_users_organisations(browser: Browser, boot: dict[str, Any],
                                                                server: RunningServer) -> None:
    other = admin.create_org(server.db, name="Second Org")
    admin.add_member(server.db, org_id=other["id"], email=boot["email"])
    stranger = admin.create_org(server.db, name="Stranger Org")
    browser.login(boot["email"], boot["password"])
    assert "Bootstrap" in browser.find("#org-switch").text
    browser.fill({"org_id": str(other["id"])})  # the select submits itself
    browser.wait(lambda d: "Second Org" in d.find_element(browser.By.CSS_SELECTOR, "#org-switch option[selected]").text)
    browser.shot("org-switched")
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(server.url + "/databases").text)
    r = s.post(server.url + "/org", data={"org_id": str(stranger["id"]), "csrf_token": token})
    assert r.status_code == 404


def test_a_page_of_another_organisation_switches_the_header_to_it(server: RunningServer,
                                                                 boot: dict[str, Any]) -> None:
    """A link or bookmark into a table of the first organisation, opened while the switcher showed
    the second, left the header naming the second while the page edited the first's table, and
    New table then went to the second. The page's organisation is the one in view."""
    from store import collections as colls
    from store.access import Door
    other = admin.create_org(server.db, name="Second Org")
    admin.add_member(server.db, org_id=other["id"], email=boot["email"])
    principal = Door(server.db).principal_for_email(boot["email"])
    table = colls.create_collection(server.db, principal, boot["org_id"], {
        "name": "deals", "purpose": "first org's", "columns": [{"name": "t", "type": "text", "description": "d"}]})
    s = web_login(server, boot["email"], boot["password"])
    token = csrf_of(s.get(server.url + "/databases").text)
    assert s.post(server.url + "/org", data={"org_id": str(other["id"]), "csrf_token": token}).status_code == 200
    assert "deals" not in s.get(server.url + "/databases").text

    def selected(html: str) -> str:
        return html.split('id="org-switch"', 1)[1].split(" selected>", 1)[1].split("<", 1)[0]

    page = s.get(f"{server.url}/databases/{table.id}")
    assert page.status_code == 200 and selected(page.text) != "Second Org", selected(page.text)
    assert "deals" in s.get(server.url + "/databases").text   # the list is the page's organisation's
    for url in (f"/notes/org/{other['id']}/missing.md", f"/agents/{boot['agent_id']}"):
        s.get(server.url + url)
    assert selected(s.get(server.url + "/databases").text) != "Second Org"   # the agent's organisation


def test_an_expired_session_asks_to_log_in_again(server: RunningServer, boot: dict[str, Any]) -> None:
    s = web_login(server, boot["email"], boot["password"])
    old = s.cookies["hf_session"]
    with server.db.connection() as conn:
        conn.execute("UPDATE web_sessions SET expires_at = now() - interval '1 second'")
    r = s.get(server.url + "/databases", allow_redirects=False)
    assert r.status_code == 302 and r.headers["Location"].startswith("/?next=")
    # Logging in again replaces the old session row instead of adding to it.
    r = s.post(server.url + "/login", data={"email": boot["email"], "password": boot["password"]},
               allow_redirects=False)
    assert r.status_code == 302 and s.cookies["hf_session"] != old
    with server.db.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM web_sessions").fetchone()["n"] == 1


def test_failed_logins_are_throttled_like_the_doors_and_a_token_still_logs_in(server: RunningServer,
                                                                            boot: dict[str, Any]) -> None:
    from store.throttle import ACCOUNT_LIMIT
    for _ in range(ACCOUNT_LIMIT):
        r = requests.post(server.url + "/login", data={"email": boot["email"], "password": "wrong guess"})
        assert r.status_code == 401 and "do not match" in r.text
    r = requests.post(server.url + "/login", data={"email": boot["email"], "password": "wrong guess"})
    assert r.status_code == 429 and int(r.headers["Retry-After"]) > 0
    assert "Too many attempts" in r.text
    # The guesser cannot lock the real user out of a token login.
    s = web_login(server, boot["email"], boot["member_token"])
    assert s.get(server.url + "/databases").status_code == 200


def test_a_changed_password_ends_the_users_web_sessions(server: RunningServer, boot: dict[str, Any]) -> None:
    s = web_login(server, boot["email"], boot["password"])
    assert s.get(server.url + "/databases").status_code == 200
    admin.set_password(server.db, email=boot["email"], password="a new long passphrase")
    assert s.get(server.url + "/databases", allow_redirects=False).status_code == 302
    assert web_login(server, boot["email"], "a new long passphrase").get(server.url + "/databases").status_code == 200


def test_a_next_with_a_line_break_leads_to_the_default_page(server: RunningServer, boot: dict[str, Any]) -> None:
    # A crafted login link with CR LF in next made a correct login answer 500, with no session.
    s = requests.Session()
    r = s.post(server.url + "/login", data={"email": boot["email"], "password": boot["password"],
                                           "next": "/notes\r\nSet-Cookie: x=y"}, allow_redirects=False)
    assert r.status_code == 302 and r.headers["Location"] == "/databases", (r.status_code, r.text[:300])
    assert "x" not in s.cookies
    r = s.get(server.url + "/", params={"next": "/\r\nx"}, allow_redirects=False)
    assert r.status_code == 302 and r.headers["Location"] == "/databases", (r.status_code, r.text[:300])

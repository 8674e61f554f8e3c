"""The web app's forms posted by something other than a browser, over real HTTP with a logged-in
session: a field left out altogether is never read as "empty it" (a note's or a task's text, a
record's other columns, a grant's mode, a table's settings and columns), and text that is not
UTF-8 is refused with a 400 and a sentence instead of being stored altered. Each result is read
back through the API or WebDAV: nothing was written."""
from __future__ import annotations

import html
from typing import Any

import pytest
import requests

from tests.conftest import RunningServer
from tests.web_browser import csrf_of, web_login
from test_records_support import grant, make_collection, ok

LEADS = [
    {"name": "email", "type": "text", "description": "contact address", "required": True, "unique": True},
    {"name": "company", "type": "text", "description": "employer", "required": False, "unique": False},
    {"name": "status", "type": "text", "description": "pipeline state", "required": False, "unique": False,
     "values": ["new", "contacted", "won"]},
    {"name": "score", "type": "number", "description": "lead score", "required": False, "unique": False},
    {"name": "tags", "type": "array", "description": "labels", "required": False, "unique": False,
     "values": ["hot", "cold", "vip"]},
    {"name": "signed_up_at", "type": "datetime", "description": "sign-up time", "required": False, "unique": False},
    {"name": "paying", "type": "boolean", "description": "pays us", "required": False, "unique": False},
]
FULL = {"email": "ada@example.com", "company": "Analytical", "status": "new", "score": 7, "tags": ["hot", "vip"],
        "signed_up_at": "2024-05-01T09:30:00Z", "paying": True}


@pytest.fixture
def web(server: RunningServer, boot: dict[str, Any]) -> requests.Session:
    return web_login(server, boot["email"], boot["password"])


@pytest.fixture
def leads(db, boot) -> dict[str, Any]:
    return make_collection(db, boot["org_id"], "leads", LEADS)


def token(web: requests.Session, server: RunningServer) -> str:
    return csrf_of(web.get(f"{server.url}/databases").text)


def text_of(page: str) -> str:
    return html.unescape(page)


def record(operator: requests.Session, server: RunningServer, table: dict[str, Any], rid: int = 1) -> dict[str, Any]:
    return ok(operator.get(f"{server.url}/api/collections/{table['id']}/records/{rid}"))


def add_full(operator: requests.Session, server: RunningServer, table: dict[str, Any]) -> None:
    ok(operator.post(f"{server.url}/api/collections/{table['id']}/records", json={"body": FULL}), 201)


# --- a field left out -------------------------------------------------------------------------------------

def test_a_note_save_without_its_text_is_refused_and_the_note_kept(web, operator, server, boot) -> None:
    path = f"org/{boot['org_id']}/zz-victim.md"
    assert operator.put(f"{server.url}/dav/{path}", data=b"the whole plan\n").status_code in (201, 204)
    url = f"{server.url}/notes/{path}"
    r = web.post(url, data={"csrf_token": csrf_of(web.get(url).text), "version": "1"}, allow_redirects=False)
    assert r.status_code == 400, r.text[:300]
    said = text_of(r.text)
    assert "Nothing was saved: the form did not send the field content." in said
    assert "Send the note's whole text in content (empty to empty the note)" in said
    assert "the whole plan" in said  # the page shows the note as it is
    assert operator.get(f"{server.url}/dav/{path}").content == b"the whole plan\n"
    # Sent empty, on purpose, it empties the note (what a browser's emptied editor sends).
    r = web.post(url, data={"csrf_token": csrf_of(web.get(url).text), "version": "1", "content": ""},
                 allow_redirects=False)
    assert r.status_code == 302
    assert operator.get(f"{server.url}/dav/{path}").content == b""


def test_a_task_save_without_its_text_is_refused_and_the_task_kept(web, operator, server, boot) -> None:
    agent = boot["agent_id"]
    ok(operator.put(f"{server.url}/api/agents/{agent}/task", json={"task": "Call ten leads.\n"}))
    url = f"{server.url}/agents/{agent}"
    r = web.post(f"{url}/task", data={"csrf_token": csrf_of(web.get(url).text), "version": "1"},
                 allow_redirects=False)
    assert r.status_code == 400, r.text[:300]
    said = text_of(r.text)
    assert "Nothing was saved: the form did not send the field task." in said
    assert "Send the task's whole text in task (empty to empty it)" in said
    task = ok(operator.get(f"{server.url}/api/agents/{agent}/task"))
    assert (task["task"], task["version"]) == ("Call ten leads.\n", 1)


def test_a_record_save_leaves_the_columns_it_did_not_send_as_they_are(web, operator, server, leads) -> None:
    add_full(operator, server, leads)
    url = f"{server.url}/databases/{leads['id']}/records/1"
    r = web.post(url, data={"csrf_token": token(web, server), "_version": "1", "email": "ada@example.org",
                            "status": "won"}, allow_redirects=False)
    assert r.status_code == 302, r.text[:300]
    got = record(operator, server, leads)
    assert {k: got[k] for k in FULL} == dict(FULL, email="ada@example.org", status="won")
    assert got["version"] == 2
    # Refused (the email is required), the form shows the columns it did not send as stored, not
    # empty: saved again from that page, they would be emptied.
    r = web.post(url, data={"csrf_token": token(web, server), "_version": "2", "email": ""})
    assert r.status_code == 422
    assert 'name="company" value="Analytical"' in r.text and 'name="score" value="7"' in r.text
    assert record(operator, server, leads)["version"] == 2


def test_a_record_form_with_its_originals_still_empties_a_list_with_nothing_ticked(web, operator, server,
                                                                                  leads) -> None:
    """A browser leaves out a list's checkboxes when none is ticked: the form that showed the list
    (its orig.tags) empties it; a form that did not show it leaves it."""
    add_full(operator, server, leads)
    url = f"{server.url}/databases/{leads['id']}/records/1"
    shown = {"_originals": "1", "orig.email": "ada@example.com", "orig.company": "Analytical", "orig.status": "new",
             "orig.score": "7", "orig.tags": '["hot", "vip"]', "orig.signed_up_at": "2024-05-01T09:30:00",
             "orig.paying": "true"}
    r = web.post(url, data={"csrf_token": token(web, server), "_version": "1", "company": "Engines", **shown},
                 allow_redirects=False)
    assert r.status_code == 302
    got = record(operator, server, leads)
    assert {k: got[k] for k in FULL} == dict(FULL, company="Engines", tags=None)


def test_a_record_save_without_its_version_is_refused(web, operator, server, leads) -> None:
    add_full(operator, server, leads)
    url = f"{server.url}/databases/{leads['id']}/records/1"
    r = web.post(url, data={"csrf_token": token(web, server), "email": "x@example.com"}, allow_redirects=False)
    assert r.status_code == 400
    assert "Nothing was saved: the form did not send the field _version." in text_of(r.text)
    assert record(operator, server, leads)["email"] == "ada@example.com"


def test_an_access_save_without_its_mode_changes_no_grant(web, operator, server, boot, db, leads) -> None:
    grant(db, leads["id"], guild_id=boot["guild_id"], mode="read")
    grant(db, leads["id"], agent_id=boot["agent_id"], mode="write")

    def reach() -> list[tuple[str, str]]:
        got = ok(operator.get(f"{server.url}/api/collections/{leads['id']}"))["access_list"]
        return sorted([("g", g["mode"]) for g in got["guilds"]] + [("a", a["mode"]) for a in got["agents"]])

    before = reach()
    assert before == [("a", "write"), ("g", "read")]
    csrf = token(web, server)
    for url, data in ((f"/databases/{leads['id']}/access", {"guild_id": str(boot["guild_id"])}),
                      (f"/databases/{leads['id']}/access", {"agent_id": str(boot["agent_id"])}),
                      (f"/agents/{boot['agent_id']}/access", {"collection_id": str(leads["id"])}),
                      (f"/guilds/{boot['guild_id']}/access", {"collection_id": str(leads["id"])})):
        r = web.post(server.url + url, data={"csrf_token": csrf, **data}, allow_redirects=False)
        assert r.status_code == 400, (url, r.status_code)
        assert "Nothing was saved: the form did not send the field mode. Send mode as read, write" in text_of(r.text)
        assert reach() == before, url


def test_a_columns_save_without_its_fields_or_rows_changes_nothing(web, operator, server, boot, db) -> None:
    table = make_collection(db, boot["org_id"], "owned", LEADS, guild_id=boot["guild_id"], purpose="guild leads")
    add_full(operator, server, table)
    before = ok(operator.get(f"{server.url}/api/collections/{table['id']}"))
    url = f"{server.url}/databases/{table['id']}/columns"
    csrf = token(web, server)
    r = web.post(url, data={"csrf_token": csrf, "name": "owned"}, allow_redirects=False)
    assert r.status_code == 400, r.text[:300]
    said = text_of(r.text)
    assert ("Nothing was saved: the form did not send the fields purpose and owner and no row for the columns"
            " email, company, status, score, tags, signed_up_at and paying.") in said
    # A row without its description or values.
    r = web.post(url, data={"csrf_token": csrf, "name": "owned", "purpose": "guild leads",
                            "owner": str(boot["guild_id"]), "col-0-name": "email", "col-0-from": "email",
                            "col-0-type": "text"}, allow_redirects=False)
    assert r.status_code == 400
    assert "the form did not send the fields col-0-description and col-0-values" in text_of(r.text)
    after = ok(operator.get(f"{server.url}/api/collections/{table['id']}"))
    assert {k: after[k] for k in ("name", "purpose", "guild_id", "columns")} == {
        k: before[k] for k in ("name", "purpose", "guild_id", "columns")}
    assert {k: record(operator, server, table)[k] for k in FULL} == FULL


# --- text that is not UTF-8 ------------------------------------------------------------------------------

def test_form_text_that_is_not_utf8_is_refused_and_nothing_saved(web, operator, server, boot) -> None:
    path = f"org/{boot['org_id']}/plan.md"
    assert operator.put(f"{server.url}/dav/{path}", data=b"kept\n").status_code in (201, 204)
    url = f"{server.url}/notes/{path}"
    csrf = csrf_of(web.get(url).text)
    form = "application/x-www-form-urlencoded"
    for body in (f"csrf_token={csrf}&version=1&content=a%ff%fe".encode(),   # percent-encoded
                 f"csrf_token={csrf}&version=1&content=a".encode() + b"\xff\xfe"):  # raw
        r = web.post(url, data=body, headers={"Content-Type": form}, allow_redirects=False)
        assert r.status_code == 400, (body, r.status_code, r.text[:300])
        assert ("the form sent bytes that are not UTF-8 text in the field content; send the text as UTF-8"
                in text_of(r.text))
    # Multipart, which no form of the web app sends, is refused whatever its text.
    boundary = "XyZ"
    parts = [("csrf_token", csrf.encode()), ("version", b"1"), ("content", b"a\xff\xfe")]
    body = b"".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{n}"\r\n\r\n'.encode() + v + b"\r\n"
                    for n, v in parts) + f"--{boundary}--\r\n".encode()
    r = web.post(url, data=body, headers={"Content-Type": f"multipart/form-data; boundary={boundary}"},
                 allow_redirects=False)
    assert r.status_code == 415 and "forms are sent as application/x-www-form-urlencoded" in text_of(r.text)
    got = operator.get(f"{server.url}/dav/{path}")
    assert got.content == b"kept\n"
    # A task too; and a query string.
    agent = boot["agent_id"]
    r = web.post(f"{server.url}/agents/{agent}/task", data=f"csrf_token={csrf}&version=0&task=%C3".encode(),
                 headers={"Content-Type": form}, allow_redirects=False)
    assert r.status_code == 400 and "not UTF-8 text in the field task" in text_of(r.text)
    assert ok(operator.get(f"{server.url}/api/agents/{agent}/task"))["version"] == 0
    r = web.get(f"{server.url}/notes?scope=%ff")
    assert r.status_code == 400
    assert "query string has bytes that are not UTF-8 text in the parameter scope" in text_of(r.text)
    # The same forms in UTF-8 save what was typed ("%FF" typed is text).
    r = web.post(url, data={"csrf_token": csrf, "version": "1", "content": "café %FF + 100%\n"},
                 allow_redirects=False)
    assert r.status_code == 302
    assert operator.get(f"{server.url}/dav/{path}").content == "café %FF + 100%\n".encode()
    r = web.post(url, data={"csrf_token": csrf, "version": "2", "content": "naïve ✓\n"}, allow_redirects=False)
    assert r.status_code == 302, r.text[:300]
    assert operator.get(f"{server.url}/dav/{path}").content == "naïve ✓\n".encode()
    assert web.get(f"{server.url}/notes?scope=org&x=caf%C3%A9").status_code == 200


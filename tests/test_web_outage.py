"""The web app while PostgreSQL is down or restarting: its pages say so without suggesting that the
person is logged out, and an open table page's live refresh logs the outage in a line, not a
traceback a second. The outage is made for real, on a private PostgreSQL (tests/test_gateway_outage.py)."""
from __future__ import annotations

import logging
import threading
from typing import Any

from store.events import ChangeListener
from tests.test_gateway_outage import outage, private_pg  # noqa: F401 - fixtures
from tests.web_browser import csrf_of, web_login
from test_records_support import PEOPLE, call_tool, make_collection, ok
from web import live


def test_an_outage_page_offers_to_try_again_not_to_log_in(outage) -> None:  # noqa: F811
    pg, server, boot = outage
    web = web_login(server, boot["email"], boot["password"])
    token = csrf_of(web.get(f"{server.url}/agents/{boot['agent_id']}").text)

    pg.stop()
    page = web.get(f"{server.url}/databases?q=leads", timeout=10)
    assert page.status_code == 503 and page.headers.get("Retry-After")
    assert "cannot be reached just now" in page.text   # the store's sentence
    # The session could not be looked up, which does not mean it ended: no "Log in", but the
    # same page again.
    assert ">Log in<" not in page.text and "/login" not in page.text
    assert '<a class="button" href="/databases?q=leads">Try again</a>' in page.text
    # A form sent meanwhile: back to the form (its draft is kept in the tab), not to a login.
    form = f"{server.url}/agents/{boot['agent_id']}"
    sent = web.post(f"{form}/task", data={"csrf_token": token, "version": "0", "task": "typed during the outage"},
                    headers={"Referer": form}, timeout=10)
    assert sent.status_code == 503 and ">Log in<" not in sent.text
    assert f'<a class="button" href="/agents/{boot["agent_id"]}">Back to the form</a>' in sent.text

    pg.start()
    assert web.get(f"{server.url}/databases", timeout=10).status_code == 200   # still logged in


class _Counted(ChangeListener):
    """The live refresh's LISTEN connection, counting its attempts to connect (what the test waits
    on: the follower tries again once a second while the database is down)."""

    attempts = 0
    connected = 0
    changed = threading.Condition()

    def connect(self) -> None:
        try:
            super().connect()
        except BaseException:
            with self.changed:
                type(self).attempts += 1
                self.changed.notify_all()
            raise
        with self.changed:
            type(self).attempts += 1
            type(self).connected += 1
            self.changed.notify_all()

    @classmethod
    def wait_for(cls, what: Any) -> None:
        with cls.changed:
            assert cls.changed.wait_for(what, timeout=60), (cls.attempts, cls.connected)


def test_live_refresh_logs_an_outage_once_not_a_traceback_a_second(outage, monkeypatch, caplog) -> None:  # noqa: F811
    pg, server, boot = outage
    monkeypatch.setattr(live, "ChangeListener", _Counted)
    monkeypatch.setattr(_Counted, "attempts", 0)
    monkeypatch.setattr(_Counted, "connected", 0)
    caplog.set_level(logging.INFO, logger="web.live")
    caplog.set_level(logging.INFO, logger="store.login_watch")
    caplog.set_level(logging.INFO, logger="store.search_index")
    leads = make_collection(server.db, boot["org_id"], "leads", PEOPLE, guild_id=boot["guild_id"])
    web = web_login(server, boot["email"], boot["password"])
    # An open table page: its stream keeps the follower running for the whole test.
    stream = web.get(f"{server.url}/databases/{leads['id']}/events", stream=True, timeout=10)
    try:
        lines = stream.iter_lines(decode_unicode=True)   # (kept: a discarded one closes the connection)
        assert stream.status_code == 200 and next(lines).startswith("retry:")
        assert _Counted.connected == 1

        pg.stop()
        _Counted.wait_for(lambda: _Counted.attempts >= 5)   # four attempts failed, a second apart
        during = [r for r in caplog.records if r.name == "web.live"]
        # The process's other followers of the database say it once too (each retried every second).
        for name in ("store.login_watch", "store.search_index"):
            said = [r.getMessage() for r in caplog.records if r.name == name and r.levelno >= logging.WARNING]
            assert len(said) <= 1, (name, said)
        assert [r for r in caplog.records if r.name == "store.login_watch" and r.levelno >= logging.WARNING]
        pg.start()
        _Counted.wait_for(lambda: _Counted.connected == 2)
        # Followed again: an agent's new record reaches the open page.
        service = server.session(bearer=boot["service_token"])
        ok(call_tool(server, service, boot["agent_id"], "record_add", collection="leads", body={"name": "After"}))
        assert "event: change" in (line for line in lines if line.startswith("event: "))
    finally:
        stream.close()
    logged = [r for r in caplog.records if r.name == "web.live"]
    assert not [r for r in logged if r.exc_info], "a known outage is no traceback"
    assert [r.getMessage() for r in during] == [during[0].getMessage()], "one line for the outage, not one a second"
    assert "cannot be reached" in during[0].getMessage()
    assert len(logged) == 2 and "following table changes again" in logged[1].getMessage()


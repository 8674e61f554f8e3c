"""Speed rules: PROPFIND depth 1 over 10 000 notes runs a bounded number of SQL queries, and GET of
a note with a remembered login is one query. Queries are counted on the real gateway's own connections."""
from __future__ import annotations

import threading
from typing import Any
from xml.etree import ElementTree as ET

import psycopg
import pytest

from store.db import Database

from tests.conftest import insert_notes, observed_database, running_gateway

_LOCK = threading.Lock()
_RUN = [0]


class CountingConnection(psycopg.Connection):
    """A psycopg connection that counts its round trips: each statement, and a transaction
    block's BEGIN and COMMIT (or SAVEPOINT and RELEASE)."""

    def execute(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        with _LOCK:
            _RUN[0] += 1
        return super().execute(*args, **kwargs)

    def transaction(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        with _LOCK:
            _RUN[0] += 2
        return super().transaction(*args, **kwargs)


@pytest.fixture
def counted_db(db_url: str) -> Any:
    database = observed_database(db_url, CountingConnection)
    yield database
    database.close()


def test_propfind_of_10000_notes_and_get_are_bounded(counted_db: Database, boot: dict[str, Any]) -> None:
    org, guild = boot["org_id"], boot["guild_id"]
    insert_notes(counted_db, org, "guild", guild, [f"note {i}" for i in range(1, 10_001)])
    for read_cache in (False, True):
        with running_gateway(counted_db, threads=2, read_cache=read_cache) as running:
            s = running.session(basic=(boot["email"], boot["password"]))
            base = f"{running.url}/dav/org/{org}/guilds/{guild}"
            assert running.gateway.login_watch.wait_live()
            assert s.get(base + "/n1.md").text == "note 1"  # the login is remembered from here on
            if read_cache:
                assert running.gateway.cache.wait_live()
            seen: list[int] = []

            def counted(method: str, url: str, **kw: Any) -> Any:
                # The server's queries run on its worker threads: count across all of them.
                before = _total(running)
                r = s.request(method, url, **kw)
                seen.append(_total(running) - before)
                return r

            r = counted("PROPFIND", base + "/", headers={"Depth": "1"})
            assert r.status_code == 207 and len(ET.fromstring(r.content).findall("{DAV:}response")) == 10_001
            # A remembered login costs no query: revoking it is announced by NOTIFY instead
            # (store/login_watch.py, tests/test_door_logins.py).
            assert seen[-1] <= 11, f"PROPFIND depth 1 ran {seen[-1]} queries"
            r = counted("GET", base + "/n5000.md")
            assert r.text == "note 5000"
            if not read_cache:
                assert seen[-1] == 1, f"GET ran {seen[-1]} queries"
            else:
                # serve --read-cache: the listing brought the notes' bytes along in one query.
                assert seen[-1] == 0, f"a GET after the listing ran {seen[-1]} queries"


def _total(running: Any) -> int:
    return _RUN[0]


def test_a_put_runs_few_statements(counted_db: Database, boot: dict[str, Any]) -> None:
    """Round trips of one plain PUT over WebDAV (dav_provider/fastput.py), counted on the
    gateway's own connections. With no lock anywhere (known through the watch,
    store/login_watch.py) there is no lock query, and a note's write is one statement with its
    provenance row and its event, so it needs no BEGIN and COMMIT, and it checks the folder (its
    foreign key) and this user's rename-away hiding itself: a create and an overwrite are one
    statement each. A new name in a missing folder is refused with a sentence."""
    org, guild = boot["org_id"], boot["guild_id"]
    with running_gateway(counted_db, threads=2) as running:
        assert running.gateway.login_watch.wait_live()
        s = running.session(basic=(boot["email"], boot["password"]))
        base = f"{running.url}/dav/org/{org}/guilds/{guild}"
        assert s.put(base + "/warm.md", data=b"x").status_code == 201  # the login is remembered

        def statements(name: str, data: bytes) -> tuple[int, int]:
            before = _RUN[0]
            r = s.put(f"{base}/{name}", data=data)
            return r.status_code, _RUN[0] - before

        assert statements("new.md", b"first") == (201, 1)
        assert statements("new.md", b"second") == (204, 1)
        assert s.get(base + "/new.md").text == "second"
        # The one statement refuses a new name in a missing folder (its foreign key), and the
        # full path then answers with its sentence: 409, a missing folder (RFC 4918 9.7.1).
        r = s.put(f"{running.url}/dav/org/{org}/guilds/999999/x.md", data=b"x")
        assert r.status_code == 409 and "999999" in r.text

"""The notes browser's pages run a bounded number of SQL queries: not one per note, scope or
agent. Queries are counted on the real gateway's own connections (tests/test_dav_scale.py)."""
from __future__ import annotations

from typing import Any

from store import admin
from tests.conftest import insert_notes, running_gateway
from tests.test_dav_scale import _RUN, counted_db  # noqa: F401 - fixture
from tests.web_browser import web_login


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
        every, page = queries(f"/notes?scope=guild-{guild}")
        assert page.count('class="note') == 10_000 and every == few_agents
        one, page = queries(f"/notes/org/{org}/guilds/{guild}/n5000.md")
        assert "note 5000" in page and one <= 10, one
        state, page = queries(f"/agents/{agent}")
        # (23: one of them the Databases tab's access rows, added with its editor.)
        assert "Scout" in page and state <= 23, state
        assert page.count("<option value=\"org/") == 1000 and "the first 1000 are offered" in page

"""note_find: lexical search over the notes an agent may read.

websearch_to_tsquery grammar with the 'simple' configuration (terms AND, OR widens, quotes keep a
phrase, - excludes). A note's vector is written after its save, by the indexer
(store/search_index.py); until then the note is note_search_pending (sql/015). The
search has two arms, each answered from its own partial index: notes with a current vector through
the GIN index artifacts_note_search, and notes not yet indexed (a save of the last moment) through
artifacts_note_search_pending, their vector computed on the spot by the same note_vector(). So a
note is found by its new words as soon as its save commits, and never by its old ones.
ts_headline, the expensive part, runs only on the rows returned.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from store.agents import Agent
from store.db import Conn
from store.search_query import websearch_text

DEFAULT_LIMIT = 20
MAX_LIMIT = 100
MAX_QUERY = 1000     # characters, as record_search's: a query of tens of thousands of words
                     # overflows PostgreSQL's parser stack

FIND_SQL = """
SELECT t.display_path, t.level, t.key, t.version, t.updated_at, t.rank,
       ts_headline('simple', t.content, t.q,
                   'MaxWords=24, MinWords=8, MaxFragments=2, FragmentDelimiter=" … ", StartSel=**, StopSel=**')
         AS snippet
  FROM (SELECT a.display_path, a.level, a.key, a.version, a.updated_at, a.content, q.q,
               ts_rank_cd(CASE WHEN a.note_search_pending THEN note_vector(a.key, a.content)
                               ELSE a.note_search END, q.q) AS rank
          FROM artifacts a, websearch_to_tsquery('simple', %(query)s) AS q(q)
         WHERE a.kind = 'note' AND a.deleted_at IS NULL
           AND ((a.note_search @@ q.q AND NOT a.note_search_pending)
             OR (a.note_search_pending AND note_vector(a.key, a.content) @@ q.q))
           AND a.org_id = %(org_id)s
           AND ((a.level = 'agent' AND a.agent_id = %(agent_id)s AND %(agent)s)
             OR (a.level = 'guild' AND a.guild_id = %(guild_id)s AND %(guild)s)
             OR (a.level = 'org' AND %(org)s))
         ORDER BY rank DESC, a.updated_at DESC, a.id
         LIMIT %(limit)s) AS t
 ORDER BY t.rank DESC, t.updated_at DESC
"""


def find_params(agent: Agent, query: str, *, levels: Sequence[str], limit: int) -> dict[str, Any]:
    return {"query": websearch_text(query), "org_id": agent.org_id, "agent_id": agent.id, "guild_id": agent.guild_id,
            "agent": "agent" in levels, "guild": "guild" in levels, "org": "org" in levels, "limit": limit}


def find_notes(conn: Conn, agent: Agent, query: str, *, levels: Sequence[str],
               limit: int = DEFAULT_LIMIT) -> list[dict]:
    """The best ``limit`` notes matching ``query`` among ``levels`` (already checked against the
    agent's grants), best first, each with a short snippet."""
    return conn.execute(FIND_SQL, find_params(agent, query, levels=levels, limit=limit)).fetchall()

"""note_find: lexical search over the notes an agent may read.

websearch_to_tsquery grammar with the 'simple' configuration (terms AND, OR widens, quotes keep a
phrase, - excludes). A note's vector is written after its save, by the indexer
(store/search_index.py), into note_vectors; until then the note waits in note_index_queue
(sql/156). The search has two arms: notes with a current vector (stored at the note's version)
through the GIN index note_vectors_search, and queued notes, their vector computed on the spot by
the same note_vector() (a queued note is taken from that arm alone, so none is listed twice). So
a note is found by its new words as soon as its save commits, and never by its old ones. After a
crash has emptied those unlogged tables (note_index_intact empty), a third arm computes every
note's vector until the indexer has queued them again. ts_headline, the expensive part, runs
only on the rows returned.
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

# The notes the agent may read (its grants decide the levels): every arm below keeps to them.
_IN_SCOPE = """a.kind = 'note' AND a.deleted_at IS NULL AND a.org_id = %(org_id)s
                    AND ((a.level = 'agent' AND a.agent_id = %(agent_id)s AND %(agent)s)
                      OR (a.level = 'guild' AND a.guild_id = %(guild_id)s AND %(guild)s)
                      OR (a.level = 'org' AND %(org)s))"""
_COLUMNS = "a.id, a.display_path, a.level, a.key, a.version, a.updated_at, a.content"

# Three arms, each answered from its own index: current vectors through the GIN index; queued
# notes through the (short) queue; and, only after a crash has emptied the queue's tables, every
# note in scope (each arm's EXISTS is a one-time filter: the arms that do not apply scan nothing).
FIND_SQL = f"""
WITH q AS (SELECT websearch_to_tsquery('simple', %(query)s) AS q),
     matched AS (SELECT {_COLUMNS}, v.vector
                   FROM note_vectors v JOIN artifacts a ON a.id = v.note_id AND a.version = v.version
                  WHERE v.vector @@ (SELECT q FROM q) AND EXISTS (SELECT FROM note_index_intact)
                    AND NOT EXISTS (SELECT FROM note_index_queue w WHERE w.note_id = v.note_id)
                    AND {_IN_SCOPE}
                 UNION ALL
                 SELECT {_COLUMNS}, note_vector(a.key, a.content)
                   FROM note_index_queue w JOIN artifacts a ON a.id = w.note_id
                  WHERE EXISTS (SELECT FROM note_index_intact)
                    AND {_IN_SCOPE}
                    AND note_vector(a.key, a.content) @@ (SELECT q FROM q)
                 UNION ALL
                 SELECT {_COLUMNS}, note_vector(a.key, a.content)
                   FROM artifacts a
                  WHERE NOT EXISTS (SELECT FROM note_index_intact)
                    AND {_IN_SCOPE}
                    AND note_vector(a.key, a.content) @@ (SELECT q FROM q))
SELECT t.display_path, t.level, t.key, t.version, t.updated_at, t.rank,
       ts_headline('simple', t.content, t.q,
                   'MaxWords=24, MinWords=8, MaxFragments=2, FragmentDelimiter=" … ", StartSel=**, StopSel=**')
         AS snippet
  FROM (SELECT m.display_path, m.level, m.key, m.version, m.updated_at, m.content, q.q,
               ts_rank_cd(m.vector, q.q) AS rank
          FROM matched m, q
         ORDER BY rank DESC, m.updated_at DESC, m.id
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

-- Notes, memory, task and scripts (issue 3).
-- Which live tasks embed a note: the Host's delete and move check runs a substring LIKE over the
-- organisation's tasks; a trigram index keeps that from reading every task of a large organisation.
CREATE INDEX agents_task_trgm ON agents USING gin (task gin_trgm_ops);
-- Provenance rows of one organisation, newest first (the latest route's fallback and audits).
CREATE INDEX file_changes_org ON file_changes (org_id, id DESC);
-- note_find reads the GIN index artifacts_note_search. With fastupdate on, fresh entries wait in
-- the index's pending list until a vacuum, which note_find would scan on every query and which
-- makes the planner cost the index above a sequential scan after a burst of writes. Notes are
-- written a few at a time, so paying the index update on each write is the better trade.
ALTER INDEX artifacts_note_search SET (fastupdate = off);

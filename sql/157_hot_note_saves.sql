-- A note's save is a HOT update: its new version needs no entry in any of the table's indexes
-- (issue 14).
--
-- PostgreSQL updates a row in place of its indexes (a heap-only tuple) only when no column that
-- an index reads changes value and the row's page has room for the new version. A save changes
-- content, version and updated_at; updated_at was read by the records' index for `since` and
-- ordering (sql/025), so every note save, though no note is ever in that partial index, wrote a
-- new entry into artifacts_pkey, artifacts_live_path and artifacts_live_owner, each to be vacuumed
-- away later. Measured with a throwaway probe (10 000 notes, 4 000 WebDAV overwrites in-process,
-- pg_stat_statements, two rounds each way): the save statement 252-255 µs and 3 770 B of WAL and
-- 57.3 buffers a call before, 235-238 µs, 3 508 B and 47.8 after; 0 of 4 470 updates HOT before,
-- 93 % after.
--
-- The records' index now reads record_updated_at, which is updated_at for a record and null for
-- everything else: a note's stays null, so the index no longer stops its saves from being HOT.
-- store/record_query.py filters and orders records by it. The table keeps a fifth of each page
-- free for the next versions of its rows (fillfactor, set before the column's rewrite packs the
-- table, so the rewritten pages already have the room).
ALTER TABLE artifacts SET (fillfactor = 80);

ALTER TABLE artifacts
    ADD COLUMN record_updated_at timestamptz
    GENERATED ALWAYS AS (CASE WHEN kind = 'object' THEN updated_at END) STORED;

DROP INDEX artifacts_live_record_updated;

CREATE INDEX artifacts_live_record_updated
    ON artifacts (collection_id, record_updated_at, id) WHERE deleted_at IS NULL AND kind = 'object';

-- A note's search vector leaves the write (issue 14). The generated column computed
-- to_tsvector over every note's body inside each write's statement: about 0.2 ms of a 2.5 KB
-- note's 0.35 ms write in PostgreSQL, on every save from an editor. Notes now carry the vector in
-- note_search, filled after the write by the gateway's indexer (store/search_index.py), together
-- with the version it was computed from. The rule that keeps note_find exact:
--
--   a note's vector is current exactly when note_search_version = version,
--
-- and every change of a note's body or name raises its version (the store's rule for every
-- write and move; WebDAV's ETags rest on it too). note_find (store/note_search.py) matches current
-- vectors through the GIN index and computes the vector of the few notes not yet indexed on the
-- spot (found through artifacts_note_search_pending), so a note is findable by its new words the
-- moment its write commits, and never by its old ones. Records keep their generated vector: the
-- record search reads it and records are written far less often than notes are saved.
--
-- Upgrading: a gateway of an earlier version reads notes' vectors from `search`, which notes no
-- longer fill, so its note_find finds no note once this has run: restart every gateway on this
-- version together. (It rewrites artifacts under an exclusive lock: about 2 s per 100 000 notes.)

-- The one definition of a note's search text: its key as words ('launch-plan.md' indexes launch
-- and plan: the 'simple' parser reads 'plan.md' as one host-like token, so the .md suffix is
-- dropped and '-', '_' and '.' become spaces before parsing) and its body. An inlinable SQL
-- function, so the indexer and note_find cannot disagree about it.
CREATE FUNCTION note_vector(key text, content text) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN to_tsvector('simple', translate(regexp_replace(key, '\.md$', ''), '-_.', '   ')
                                 || ' ' || coalesce(content, ''));

-- 0 (never indexed) puts every existing note in the indexer's queue: the first gateway to start
-- fills them in batches, and note_find is exact in the meantime.
ALTER TABLE artifacts ADD COLUMN note_search tsvector,
                      ADD COLUMN note_search_version integer NOT NULL DEFAULT 0;

-- The record vector, now computed for records only (dropping the column drops both GIN indexes
-- on it; the record one is made again below).
ALTER TABLE artifacts DROP COLUMN search;
ALTER TABLE artifacts ADD COLUMN search tsvector GENERATED ALWAYS AS (
    CASE WHEN kind = 'object' THEN to_tsvector('simple', key || ' ' || coalesce(search_blob, '')) END) STORED;
CREATE INDEX artifacts_record_search ON artifacts USING gin (search) WHERE deleted_at IS NULL AND kind = 'object';

-- fastupdate off for the reason sql/010 gives; the indexer pays the index update, not the write.
CREATE INDEX artifacts_note_search ON artifacts USING gin (note_search) WITH (fastupdate = off)
    WHERE deleted_at IS NULL AND kind = 'note';
-- The indexer's queue and note_find's "not yet indexed" arm: live notes whose vector is behind.
-- A stored column rather than the bare comparison, because ANALYZE keeps statistics on a column:
-- the planner then knows that few notes are waiting and reads this index for them, where for
-- "note_search_version <> version" it would assume nearly every row does and scan the table.
ALTER TABLE artifacts ADD COLUMN note_search_pending boolean
    GENERATED ALWAYS AS (kind = 'note' AND note_search_version <> version) STORED;
CREATE INDEX artifacts_note_search_pending ON artifacts (id) WHERE deleted_at IS NULL AND note_search_pending;

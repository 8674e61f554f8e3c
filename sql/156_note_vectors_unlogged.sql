-- Notes' search vectors leave the artifacts table for unlogged tables of their own (issue 14).
--
-- A vector is derived data: note_vector(key, content) of a row the store keeps durably. Kept in
-- artifacts, every vector the indexer stored was a new version of the whole row (the GIN-indexed
-- column changed, so no HOT update: the row copied, an entry in each of the row's indexes, the
-- vector's TOAST chunks), 26 KB of WAL a note for prose-like notes of 1-4 KB, against 3.2 KB for
-- the save itself. WAL is one stream: each save's commit had to flush the indexer's WAL written
-- before it (a WebDAV overwrite then waited 0.23-0.25 ms on fdatasync and 0.09 ms on writing,
-- 0.13-0.18 and 0.01 with the indexer switched off: a throwaway probe of 2 000 overwrites, with
-- track_wal_io_timing). Unlogged tables write no WAL, and a vector needs none: what a crash takes,
-- the indexer computes again. Measured on 10 000 notes with 2 000 of them rewritten, three rounds:
-- the indexer's WAL 26-27 KB a note before, 0.1 KB after.
--
-- The rule that keeps note_find exact, now across three tables:
--
--   while note_index_intact holds its row, every live note whose vector is not current (no
--   note_vectors row at the note's version) is in note_index_queue;
--
-- the triggers below put a note in the queue in the same transaction that raises its version or
-- creates it (every change of a note's body or name raises its version), and the indexer takes a
-- note out of the queue only in the transaction that stores its vector, holding the note's row so
-- that no save slips between (store/search_index.py). note_find matches current vectors through
-- the GIN index and computes on the spot the vector of each queued note (store/note_search.py).
--
-- A crash (or a failover to a standby) empties all three unlogged tables together: with
-- note_index_intact empty, note_find computes every note's vector on the spot (exact, and slower
-- until the indexer is done), and the indexer's next pass queues every live note again and puts
-- the row back (search_index.index_pending). A clean shutdown keeps them, and pg_dump copies them.
--
-- Upgrading: a gateway of an earlier version reads artifacts.note_search, which this drops:
-- restart every gateway on this version together.

CREATE UNLOGGED TABLE note_vectors (
    note_id bigint PRIMARY KEY REFERENCES artifacts (id) ON DELETE CASCADE,
    version integer NOT NULL,   -- the note's version the vector was computed from
    vector  tsvector            -- NULL: PostgreSQL could not build one (found by no word)
);
-- fastupdate on, as sql/155 set it for the old index: entries wait in the pending list and the
-- indexer merges them in one sweep per pass.
CREATE INDEX note_vectors_search ON note_vectors USING gin (vector) WITH (fastupdate = on);

CREATE UNLOGGED TABLE note_index_queue (
    note_id bigint PRIMARY KEY REFERENCES artifacts (id) ON DELETE CASCADE
);

-- One row while the two tables above are whole; a crash leaves it empty.
CREATE UNLOGGED TABLE note_index_intact (
    intact boolean PRIMARY KEY DEFAULT true CHECK (intact)
);

CREATE FUNCTION note_index_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO note_index_queue (note_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE TRIGGER note_index_created AFTER INSERT ON artifacts FOR EACH ROW
    WHEN (NEW.kind = 'note' AND NEW.deleted_at IS NULL)
    EXECUTE FUNCTION note_index_enqueue();
-- A new version, or a note live again (or a row become a note) whose vector a crash may have
-- taken while it was not: all change what note_vector(key, content) gives or where it applies.
-- A deleted note is queued too, for the indexer to drop its vector (no search reads it).
CREATE TRIGGER note_index_changed AFTER UPDATE ON artifacts FOR EACH ROW
    WHEN (NEW.kind = 'note'
          AND ((NEW.deleted_at IS NULL
                AND (NEW.version <> OLD.version OR OLD.deleted_at IS NOT NULL OR OLD.kind <> 'note'))
               OR (NEW.deleted_at IS NOT NULL AND OLD.deleted_at IS NULL)))
    EXECUTE FUNCTION note_index_enqueue();

-- What artifacts held moves over: current vectors as they are, waiting notes into the queue.
INSERT INTO note_vectors (note_id, version, vector)
SELECT id, note_search_version, note_search FROM artifacts
 WHERE kind = 'note' AND deleted_at IS NULL AND NOT note_search_pending;
INSERT INTO note_index_queue (note_id)
SELECT id FROM artifacts WHERE kind = 'note' AND deleted_at IS NULL AND note_search_pending;
INSERT INTO note_index_intact DEFAULT VALUES;

-- (Dropping the columns drops artifacts_note_search and artifacts_note_search_pending with them.)
ALTER TABLE artifacts DROP COLUMN note_search_pending,
                      DROP COLUMN note_search,
                      DROP COLUMN note_search_version;

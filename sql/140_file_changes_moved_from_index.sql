-- Where a moved note went (store.files.moved_to): the move's row at its new path, found by the
-- path it came from. Only moves carry moved_from, so the index holds those rows alone.
CREATE INDEX IF NOT EXISTS file_changes_moved_from ON file_changes (moved_from, id DESC)
    WHERE moved_from IS NOT NULL;

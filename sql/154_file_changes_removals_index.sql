-- The notes browser's recently deleted notes (store.files.removed_notes) read an organisation's
-- deletes and moves of the last days by this index, however many other changes came after them:
-- a window of the newest 5 000 changes of any kind lost a delete after a few minutes of agents'
-- writes.
CREATE INDEX IF NOT EXISTS file_changes_removals ON file_changes (org_id, id DESC)
    WHERE operation IN ('delete', 'move');

-- A task is kept byte for byte as its operator saved it (an editor or rclone reading it back must
-- find what it wrote; a task typed on macOS is NFD). The search a note's delete runs for tasks
-- embedding it compares NFC forms, so it uses an index of the NFC form (store.embeds.embedding_tasks).
CREATE INDEX agents_task_nfc_trgm ON agents USING gin (normalize(task, NFC) gin_trgm_ops);
DROP INDEX IF EXISTS agents_task_trgm;

-- A run's changes, for the provenance strip's Open step (store.files.run_steps): without it,
-- opening a run would read every change of the store.
CREATE INDEX file_changes_run ON file_changes (run_id, id) WHERE run_id IS NOT NULL;

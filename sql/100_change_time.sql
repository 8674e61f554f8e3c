-- A change is timed when it is written, as the row it records is (updated_at = clock_timestamp()):
-- now() is the transaction's start, so a write that waited for a lock was recorded seconds before
-- the record says it changed, and newest-first by id could show times going backwards.
ALTER TABLE file_changes ALTER COLUMN created_at SET DEFAULT clock_timestamp();

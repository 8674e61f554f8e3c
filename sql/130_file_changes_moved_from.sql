-- A move's row on its new path names the path it came from: the history of a renamed note then
-- says where its earlier changes are (on the old path, whose rows the rename leaves where they are),
-- where it began with a bare 'create' at the new path's first version past 1.
ALTER TABLE file_changes ADD COLUMN IF NOT EXISTS moved_from text;

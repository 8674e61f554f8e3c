-- An editor's rename-away save (vim, Emacs, davfs2: MOVE K.md -> K.md~, then create K.md) must see
-- K.md gone after the MOVE, yet the note must keep its identity, history and embeds. The note is
-- not moved: the side file that received its copy remembers where it came from, and for a short
-- save window that path is hidden from the same user only. A write to the hidden path within the
-- window is the note's next version; when the window passes unused, the note simply shows again.
ALTER TABLE scratch_files
    ADD COLUMN origin         text,
    ADD COLUMN origin_version integer,
    ADD COLUMN hides_until    timestamptz;
CREATE INDEX scratch_files_origin ON scratch_files (user_id, origin) WHERE origin IS NOT NULL;

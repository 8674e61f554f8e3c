-- A guild or an agent deleted by the platform takes its folder with it (the artifacts go by
-- ON DELETE CASCADE, which writes no provenance and sends no event). Announce the folder itself on
-- the change channel, as a 'delete' of its display path, in the deleting transaction: a FUSE
-- mount then forgets the folder at once instead of showing it until its kernel entry expires,
-- and a read cache drops what it kept below it (store/filecache.py).
CREATE FUNCTION hostfinder_folder_deleted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('guild.files.changed', json_build_object(
        'org_id', OLD.org_id, 'display_path', 'org/' || OLD.org_id || '/' || TG_ARGV[0] || '/' || OLD.id,
        'operation', 'delete', 'version', NULL, 'change_id', NULL)::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER guilds_folder_deleted AFTER DELETE ON guilds
    FOR EACH ROW EXECUTE FUNCTION hostfinder_folder_deleted('guilds');
CREATE TRIGGER agents_folder_deleted AFTER DELETE ON agents
    FOR EACH ROW EXECUTE FUNCTION hostfinder_folder_deleted('agents');

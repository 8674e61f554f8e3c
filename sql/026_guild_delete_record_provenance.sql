-- Deleting a guild soft-deletes its own tables with their records (020). Each record now also gets
-- its own 'delete' provenance row, one version up, in the same statement that removes it, so its
-- history ends where it ended (a file-changes lookup of the record answers delete, not its create),
-- as store.records.remove_all does for clearing and deleting a table. The table keeps its one row
-- and event on its own path.
CREATE OR REPLACE FUNCTION collections_on_guild_delete() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    c record;
    change_id bigint;
    who text := 'guild ' || OLD.id || ' deleted';
BEGIN
    -- Inside an organisation's cascade the organisation is already gone and its tables go with it.
    IF NOT EXISTS (SELECT 1 FROM organisations WHERE id = OLD.org_id) THEN
        RETURN OLD;
    END IF;
    FOR c IN SELECT id, org_id, name FROM artifact_collections
              WHERE guild_id = OLD.id AND deleted_at IS NULL FOR UPDATE LOOP
        WITH removed AS (
            UPDATE artifacts SET deleted_at = clock_timestamp(), updated_at = clock_timestamp(),
                   version = version + 1, updated_by = who
             WHERE collection_id = c.id AND kind = 'object' AND deleted_at IS NULL
         RETURNING org_id, display_path, version)
        INSERT INTO file_changes (org_id, display_path, operation, version, actor_type, actor_name)
        SELECT org_id, display_path, 'delete', version, 'system', who FROM removed;
        DELETE FROM collection_access WHERE collection_id = c.id;
        INSERT INTO file_changes (org_id, display_path, operation, actor_type, actor_name)
             VALUES (c.org_id, 'org/' || c.org_id || '/collections/' || c.name, 'delete', 'system', who)
          RETURNING id INTO change_id;
        PERFORM pg_notify('guild.files.changed', json_build_object(
            'org_id', c.org_id, 'display_path', 'org/' || c.org_id || '/collections/' || c.name,
            'operation', 'delete', 'version', NULL, 'change_id', change_id)::text);
    END LOOP;
    UPDATE artifact_collections
       SET deleted_at = coalesce(deleted_at, now()), updated_at = now(), guild_id = NULL
     WHERE guild_id = OLD.id;
    RETURN OLD;
END $$;

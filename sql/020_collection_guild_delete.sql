-- Deleting a guild soft-deletes its own tables with their records (the specification's Access
-- section). A trigger, not a store function, so that every way a guild is deleted (admin, CLI, a
-- future route) keeps the rule. Grants need nothing: collection_access cascades on guild and agent.
-- The soft-deleted tables let go of the guild (guild_id null) so the guild row can go; each gets
-- a provenance row and its event, as store.provenance.record_change would write them.
CREATE FUNCTION collections_on_guild_delete() RETURNS trigger
    LANGUAGE plpgsql AS $$
DECLARE
    c record;
    change_id bigint;
BEGIN
    -- Inside an organisation's cascade the organisation is already gone and its tables go with it.
    IF NOT EXISTS (SELECT 1 FROM organisations WHERE id = OLD.org_id) THEN
        RETURN OLD;
    END IF;
    FOR c IN SELECT id, org_id, name FROM artifact_collections
              WHERE guild_id = OLD.id AND deleted_at IS NULL FOR UPDATE LOOP
        UPDATE artifacts SET deleted_at = now()
         WHERE collection_id = c.id AND kind = 'object' AND deleted_at IS NULL;
        DELETE FROM collection_access WHERE collection_id = c.id;
        INSERT INTO file_changes (org_id, display_path, operation, actor_type, actor_name)
             VALUES (c.org_id, 'org/' || c.org_id || '/collections/' || c.name, 'delete', 'system',
                     'guild ' || OLD.id || ' deleted')
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

CREATE TRIGGER guilds_delete_collections BEFORE DELETE ON guilds
    FOR EACH ROW EXECUTE FUNCTION collections_on_guild_delete();

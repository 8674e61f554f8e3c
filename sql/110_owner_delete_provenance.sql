-- A guild or an agent deleted by the platform takes its files with it: a guild its guild-level
-- notes (and its agents, whose own triggers fire in the same cascade), an agent its notes, memory,
-- scripts and task (ON DELETE CASCADE; 070 announces the folder). Each file's history now ends where
-- it ended, with a 'delete' row at its last version in the deleting transaction, as a note's delete
-- records it (store.notes): /api/file-changes/latest no longer answers 'create' for a file that is gone.
CREATE FUNCTION hostfinder_files_on_owner_delete() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    who text := TG_ARGV[0] || ' ' || OLD.id || ' deleted';
BEGIN
    -- Inside an organisation's cascade the organisation and its history go too.
    IF NOT EXISTS (SELECT 1 FROM organisations WHERE id = OLD.org_id) THEN
        RETURN OLD;
    END IF;
    IF TG_ARGV[0] = 'guild' THEN
        INSERT INTO file_changes (org_id, display_path, operation, version, actor_type, actor_name)
        SELECT org_id, display_path, 'delete', version, 'system', who FROM artifacts
         WHERE org_id = OLD.org_id AND level = 'guild' AND guild_id = OLD.id AND kind = 'note'
           AND deleted_at IS NULL;
    ELSE
        INSERT INTO file_changes (org_id, display_path, operation, version, actor_type, actor_name)
        SELECT org_id, display_path, 'delete', version, 'system', who FROM artifacts
         WHERE org_id = OLD.org_id AND level = 'agent' AND agent_id = OLD.id
           AND kind IN ('note', 'memory', 'script') AND deleted_at IS NULL;
        IF OLD.task_version > 0 THEN
            INSERT INTO file_changes (org_id, display_path, operation, version, actor_type, actor_name)
                 VALUES (OLD.org_id, 'org/' || OLD.org_id || '/agents/' || OLD.id || '/task.md', 'delete',
                         OLD.task_version, 'system', who);
        END IF;
    END IF;
    RETURN OLD;
END
$$;

CREATE TRIGGER guilds_files_deleted BEFORE DELETE ON guilds
    FOR EACH ROW EXECUTE FUNCTION hostfinder_files_on_owner_delete('guild');
CREATE TRIGGER agents_files_deleted BEFORE DELETE ON agents
    FOR EACH ROW EXECUTE FUNCTION hostfinder_files_on_owner_delete('agent');

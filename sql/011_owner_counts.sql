-- The per-owner cap (10 000 live artifacts per owner, records excepted) with constant work per
-- create (issue 14). A create used to count(*) the owner's live artifacts under an advisory lock,
-- so the 10 000th create of a folder read 10 000 index entries. The count now lives in one row per
-- owner, kept by a trigger on artifacts, so every path that adds, removes, restores or moves an
-- artifact (the store, a bulk seed, a cascade) keeps it exact in the writer's own transaction.
-- store/notes.py insert_artifact locks the owner's row (FOR UPDATE) and inserts only while the
-- count is below the cap: concurrent creates of one owner queue on that row, and the second sees
-- the first's increment once it gets the lock (READ COMMITTED re-reads a locked row's newest
-- version), so the cap stays exact without reading the owner's artifacts.

-- owner_id: the guild id (level guild), the agent id (level agent), 0 (level org).
CREATE TABLE owner_counts (
    org_id    bigint NOT NULL REFERENCES organisations (id) ON DELETE CASCADE,
    level     text NOT NULL CHECK (level IN ('agent', 'guild', 'org')),
    owner_id  bigint NOT NULL,
    live      integer NOT NULL,
    PRIMARY KEY (org_id, level, owner_id)
);

CREATE FUNCTION owner_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The old row leaves its owner's count when it was live and counted.
    IF TG_OP IN ('UPDATE', 'DELETE') AND OLD.deleted_at IS NULL AND OLD.kind <> 'object' THEN
        -- Only an UPDATE: on a cascade the counter row may already be gone, and that is fine.
        UPDATE owner_counts SET live = live - 1
         WHERE org_id = OLD.org_id AND level = OLD.level
           AND owner_id = coalesce(OLD.guild_id, OLD.agent_id, 0);
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') AND NEW.deleted_at IS NULL AND NEW.kind <> 'object' THEN
        INSERT INTO owner_counts (org_id, level, owner_id, live)
        VALUES (NEW.org_id, NEW.level, coalesce(NEW.guild_id, NEW.agent_id, 0), 1)
        ON CONFLICT (org_id, level, owner_id) DO UPDATE SET live = owner_counts.live + 1;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER owner_counts_insert AFTER INSERT ON artifacts
    FOR EACH ROW WHEN (NEW.deleted_at IS NULL AND NEW.kind <> 'object')
    EXECUTE FUNCTION owner_counts_track();
-- A content write changes none of these columns and fires nothing.
CREATE TRIGGER owner_counts_update AFTER UPDATE OF deleted_at, org_id, level, guild_id, agent_id, kind ON artifacts
    FOR EACH ROW WHEN (OLD.deleted_at IS DISTINCT FROM NEW.deleted_at OR OLD.org_id <> NEW.org_id
                       OR OLD.level <> NEW.level OR OLD.guild_id IS DISTINCT FROM NEW.guild_id
                       OR OLD.agent_id IS DISTINCT FROM NEW.agent_id OR OLD.kind <> NEW.kind)
    EXECUTE FUNCTION owner_counts_track();
CREATE TRIGGER owner_counts_delete AFTER DELETE ON artifacts
    FOR EACH ROW WHEN (OLD.deleted_at IS NULL AND OLD.kind <> 'object')
    EXECUTE FUNCTION owner_counts_track();

-- Backfill from the live rows. The table lock keeps a gateway still running the previous version
-- from creating or deleting between the count and the triggers taking over.
LOCK TABLE artifacts IN SHARE ROW EXCLUSIVE MODE;
INSERT INTO owner_counts (org_id, level, owner_id, live)
SELECT org_id, level, coalesce(guild_id, agent_id, 0), count(*)
  FROM artifacts WHERE deleted_at IS NULL AND kind <> 'object'
 GROUP BY 1, 2, 3;

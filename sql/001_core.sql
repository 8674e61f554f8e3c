-- The organisation's people and agents, and the artifact store the specification names.
-- Rules PostgreSQL can guarantee live here as constraints: uniqueness among live rows is a
-- partial unique index, ownership is a foreign key, enumerations are CHECKs.

CREATE EXTENSION IF NOT EXISTS pg_trgm;

CREATE TABLE organisations (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE guilds (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id      bigint NOT NULL REFERENCES organisations (id) ON DELETE CASCADE,
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, org_id)  -- target of composite keys that keep children inside one organisation
);
CREATE INDEX guilds_org ON guilds (org_id);

-- The standing task lives here (agents.task); the four note grant bindings carry the
-- specification's defaults: guild read, guild write and org read on, org write off.
CREATE TABLE agents (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id           bigint NOT NULL REFERENCES organisations (id) ON DELETE CASCADE,
    guild_id         bigint NOT NULL,
    name             text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    task             text NOT NULL DEFAULT '',
    task_version     integer NOT NULL DEFAULT 0,
    task_updated_at  timestamptz NOT NULL DEFAULT now(),
    task_updated_by  text,
    read_guild       boolean NOT NULL DEFAULT true,
    write_guild      boolean NOT NULL DEFAULT true,
    read_org         boolean NOT NULL DEFAULT true,
    write_org        boolean NOT NULL DEFAULT false,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, org_id),
    FOREIGN KEY (guild_id, org_id) REFERENCES guilds (id, org_id) ON DELETE CASCADE
);
CREATE INDEX agents_org ON agents (org_id);
CREATE INDEX agents_guild ON agents (guild_id);

-- People who log in. Emails compare case-insensitively; the hash is argon2id.
CREATE TABLE users (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email          text NOT NULL CHECK (position('@' in email) > 1),
    name           text NOT NULL DEFAULT '',
    password_hash  text,
    created_at     timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email ON users (lower(email));

CREATE TABLE memberships (
    org_id      bigint NOT NULL REFERENCES organisations (id) ON DELETE CASCADE,
    user_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (org_id, user_id)
);
CREATE INDEX memberships_user ON memberships (user_id);

-- API tokens are shown once. A token is 32 random bytes, so a fast SHA-256 of it is as strong a
-- lookup key as a slow hash and lets the door find the row by index (argon2 is for passwords,
-- which are guessable). kind 'member' acts as its user; kind 'service' is the orchestrator's.
CREATE TABLE api_tokens (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id      bigint NOT NULL REFERENCES organisations (id) ON DELETE CASCADE,
    kind        text NOT NULL CHECK (kind IN ('member', 'service')),
    user_id     bigint REFERENCES users (id) ON DELETE CASCADE,
    token_hash  bytea NOT NULL UNIQUE,
    prefix      text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz,
    CHECK ((kind = 'member') = (user_id IS NOT NULL)),
    FOREIGN KEY (org_id, user_id) REFERENCES memberships (org_id, user_id) ON DELETE CASCADE
);

-- Routines (schedules.instruction) and runs: provenance expands a run-owned change to the run's
-- agent, guild, kind, status and routine.
CREATE TABLE schedules (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id       bigint NOT NULL,
    agent_id     bigint NOT NULL,
    name         text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
    instruction  text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (agent_id, org_id) REFERENCES agents (id, org_id) ON DELETE CASCADE,
    UNIQUE (agent_id, name)
);

CREATE TABLE runs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id       bigint NOT NULL,
    agent_id     bigint NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('chat', 'schedule', 'studio', 'group', 'manual')),
    status       text NOT NULL DEFAULT 'running'
                 CHECK (status IN ('queued', 'running', 'succeeded', 'failed', 'cancelled')),
    schedule_id  bigint REFERENCES schedules (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (id, org_id),
    FOREIGN KEY (agent_id, org_id) REFERENCES agents (id, org_id) ON DELETE CASCADE
);
CREATE INDEX runs_agent ON runs (agent_id);

-- Collections: typed tables at the organisation. guild_id set = the guild's own table.
CREATE TABLE artifact_collections (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id      bigint NOT NULL REFERENCES organisations (id) ON DELETE CASCADE,
    guild_id    bigint,
    name        text NOT NULL CHECK (name ~ '^[a-z][a-z0-9_-]{0,62}$'),
    purpose     text NOT NULL CHECK (length(purpose) BETWEEN 1 AND 400),
    columns     jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(columns) = 'array'),
    next_id     bigint NOT NULL DEFAULT 1 CHECK (next_id >= 1),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz,
    UNIQUE (id, org_id),
    FOREIGN KEY (guild_id, org_id) REFERENCES guilds (id, org_id)
);
CREATE UNIQUE INDEX artifact_collections_live_name
    ON artifact_collections (org_id, name) WHERE deleted_at IS NULL;

-- One grant per subject and collection. Exactly one of guild_id / agent_id is set; deleting the
-- guild or agent deletes its grants by cascade. A guild grants read or write; an agent row may
-- also be 'none', the explicit refusal.
CREATE TABLE collection_access (
    collection_id  bigint NOT NULL REFERENCES artifact_collections (id) ON DELETE CASCADE,
    guild_id       bigint REFERENCES guilds (id) ON DELETE CASCADE,
    agent_id       bigint REFERENCES agents (id) ON DELETE CASCADE,
    mode           text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    CHECK ((guild_id IS NULL) <> (agent_id IS NULL)),
    CHECK (CASE WHEN guild_id IS NOT NULL THEN mode IN ('read', 'write')
                ELSE mode IN ('read', 'write', 'none') END)
);
CREATE UNIQUE INDEX collection_access_guild ON collection_access (collection_id, guild_id) WHERE guild_id IS NOT NULL;
CREATE UNIQUE INDEX collection_access_agent ON collection_access (collection_id, agent_id) WHERE agent_id IS NOT NULL;
CREATE INDEX collection_access_by_guild ON collection_access (guild_id) WHERE guild_id IS NOT NULL;
CREATE INDEX collection_access_by_agent ON collection_access (agent_id) WHERE agent_id IS NOT NULL;

-- Every durable datum but the task: notes (agent, guild, org), records (object), memory, scripts.
-- A row is live while deleted_at is null; the display path is unique among live rows.
CREATE TABLE artifacts (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id           bigint NOT NULL REFERENCES organisations (id) ON DELETE CASCADE,
    kind             text NOT NULL CHECK (kind IN ('note', 'object', 'memory', 'script')),
    level            text NOT NULL CHECK (level IN ('agent', 'guild', 'org')),
    guild_id         bigint,
    agent_id         bigint,
    collection_id    bigint,
    key              text NOT NULL CHECK (length(key) BETWEEN 1 AND 255 AND position('/' in key) = 0),
    display_path     text NOT NULL,
    content          text,
    content_json     jsonb,
    identity         text,
    search_blob      text,
    version          integer NOT NULL DEFAULT 1 CHECK (version >= 1),
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    created_by       text,
    updated_by       text,
    deleted_at       timestamptz,
    -- Full-text vector: a note's key and body; a record's id and values (search_blob, no keys).
    -- A note's key is searchable as words ('launch-plan.md' indexes launch and plan): the 'simple'
    -- parser reads 'plan.md' as one host-like token, so the .md suffix is dropped and '-', '_' and
    -- '.' become spaces before parsing.
    search           tsvector GENERATED ALWAYS AS (
        CASE kind
            WHEN 'note' THEN to_tsvector('simple', translate(regexp_replace(key, '\.md$', ''), '-_.', '   ')
                                                   || ' ' || coalesce(content, ''))
            WHEN 'object' THEN to_tsvector('simple', key || ' ' || coalesce(search_blob, ''))
        END) STORED,
    FOREIGN KEY (guild_id, org_id) REFERENCES guilds (id, org_id) ON DELETE CASCADE,
    FOREIGN KEY (agent_id, org_id) REFERENCES agents (id, org_id) ON DELETE CASCADE,
    FOREIGN KEY (collection_id, org_id) REFERENCES artifact_collections (id, org_id) ON DELETE CASCADE,
    -- Which owner columns each kind and level carries.
    CHECK (CASE
        WHEN kind = 'object' THEN level = 'org' AND collection_id IS NOT NULL AND content_json IS NOT NULL
                                  AND guild_id IS NULL AND agent_id IS NULL AND key ~ '^[1-9][0-9]*$'
        WHEN kind IN ('memory', 'script') THEN level = 'agent' AND agent_id IS NOT NULL
                                               AND guild_id IS NULL AND collection_id IS NULL
        WHEN level = 'agent' THEN agent_id IS NOT NULL AND guild_id IS NULL AND collection_id IS NULL
        WHEN level = 'guild' THEN guild_id IS NOT NULL AND agent_id IS NULL AND collection_id IS NULL
        ELSE guild_id IS NULL AND agent_id IS NULL AND collection_id IS NULL
    END),
    CHECK (kind <> 'note' OR key ~ '\.md$'),
    CHECK (identity IS NULL OR kind = 'object')
);
CREATE UNIQUE INDEX artifacts_live_path ON artifacts (display_path) WHERE deleted_at IS NULL;
CREATE UNIQUE INDEX artifacts_live_identity
    ON artifacts (collection_id, identity) WHERE deleted_at IS NULL AND identity IS NOT NULL;
CREATE UNIQUE INDEX artifacts_one_memory ON artifacts (agent_id) WHERE kind = 'memory' AND deleted_at IS NULL;
-- Listing a folder: the live children of one owner, in key order.
CREATE INDEX artifacts_live_owner ON artifacts (org_id, level, guild_id, agent_id, kind, key) WHERE deleted_at IS NULL;
CREATE INDEX artifacts_live_collection ON artifacts (collection_id, (key::bigint)) WHERE deleted_at IS NULL AND kind = 'object';
CREATE INDEX artifacts_note_search ON artifacts USING gin (search) WHERE deleted_at IS NULL AND kind = 'note';
CREATE INDEX artifacts_record_search ON artifacts USING gin (search) WHERE deleted_at IS NULL AND kind = 'object';
CREATE INDEX artifacts_record_blob_trgm ON artifacts USING gin (search_blob gin_trgm_ops)
    WHERE deleted_at IS NULL AND kind = 'object';

-- Provenance: one row per successful mutation, written in the writer's transaction.
CREATE TABLE file_changes (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    org_id        bigint NOT NULL REFERENCES organisations (id) ON DELETE CASCADE,
    display_path  text NOT NULL,
    operation     text NOT NULL CHECK (operation IN ('create', 'update', 'delete', 'move', 'clear')),
    version       integer,
    actor_type    text NOT NULL CHECK (actor_type IN ('user', 'agent', 'run', 'system')),
    actor_id      bigint,
    actor_name    text NOT NULL,
    run_id        bigint,
    tool_call_id  text,
    tool_name     text,
    created_at    timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (run_id, org_id) REFERENCES runs (id, org_id) ON DELETE SET NULL (run_id)
);
CREATE INDEX file_changes_path ON file_changes (display_path, id DESC);

CREATE TABLE memory_revisions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent_id    bigint NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    content     text NOT NULL,
    version     integer NOT NULL,
    source      text NOT NULL CHECK (source ~ '^[a-z0-9][a-z0-9-]{0,40}$'),
    saved_at    timestamptz NOT NULL,
    saved_by    text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_revisions_agent ON memory_revisions (agent_id, id DESC);

-- Previous operator saves of agents.task, at most 50 per agent (the store trims older ones).
CREATE TABLE task_revisions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    agent_id    bigint NOT NULL REFERENCES agents (id) ON DELETE CASCADE,
    task        text NOT NULL,
    version     integer NOT NULL,
    saved_at    timestamptz NOT NULL,
    saved_by    text,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX task_revisions_agent ON task_revisions (agent_id, id DESC);

-- WebDAV and FUSE state that must be shared by every gateway process: clients' side files
-- (per user, expiring), path leases (WebDAV locks) and dead properties. Paths are Host tree paths
-- (NFC, no leading '/', e.g. 'org/1/agents/2/notes.md').

-- Side files (._x, .DS_Store, x.swp, 4913...) that clients write beside the files they touch.
-- They are never artifacts: no provenance, no events, no search.
CREATE TABLE scratch_files (
    user_id     bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    path        text NOT NULL,
    parent      text NOT NULL,
    content     bytea NOT NULL,
    version     integer NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL DEFAULT now() + interval '1 day',
    PRIMARY KEY (user_id, path)
);
CREATE INDEX scratch_files_parent ON scratch_files (user_id, parent);
CREATE INDEX scratch_files_expiry ON scratch_files (expires_at);

-- Leases on paths (a WebDAV lock: token, root, depth, scope, owner; the rest in data).
CREATE TABLE path_leases (
    token       text PRIMARY KEY,
    path        text NOT NULL,
    data        jsonb NOT NULL,
    expires_at  timestamptz NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX path_leases_path ON path_leases (path text_pattern_ops);

-- Dead properties (PROPPATCH), keyed by path and the property's Clark name '{ns}local'.
CREATE TABLE path_properties (
    path        text NOT NULL,
    name        text NOT NULL,
    value       text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (path, name)
);
CREATE INDEX path_properties_prefix ON path_properties (path text_pattern_ops);

-- The web app's login sessions, shared by every gateway process so that logging out, revoking a
-- token or removing a membership ends access everywhere at once. The cookie holds a random token;
-- only its SHA-256 is kept here (like api_tokens: 32 random bytes need no slow hash).
CREATE TABLE web_sessions (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_hash    bytea NOT NULL UNIQUE,
    user_id       bigint NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    -- Set when the person logged in with an API token instead of a password: revoking or deleting
    -- that token ends the session (revoked_at is checked on every lookup, deletion cascades).
    api_token_id  bigint REFERENCES api_tokens (id) ON DELETE CASCADE,
    -- The organisation the pages show (the org switcher); checked against current memberships.
    org_id        bigint,
    -- Per-session CSRF secret sent back in forms and the X-CSRF-Token header; not a credential.
    csrf_token    text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    last_seen_at  timestamptz NOT NULL DEFAULT now(),
    expires_at    timestamptz NOT NULL
);
CREATE INDEX web_sessions_user ON web_sessions (user_id);
CREATE INDEX web_sessions_expiry ON web_sessions (expires_at);

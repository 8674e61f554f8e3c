-- Every change that can end (or widen) a login announces itself on the channel
-- 'hostfinder.logins.changed', in the transaction that makes it: a password set, a user deleted
-- or renamed, a membership added or removed, a token revoked or deleted (store/login_watch.py).
-- Each gateway process remembers verified logins only while it follows this channel, and forgets
-- them all when anything arrives on it, so a remembered login costs no query and a revocation
-- still ends access on every process at once. NOTIFY is delivered on commit only, so a change
-- that rolls back ends nothing. Statement-level: a bulk change is one message, not one per row.
CREATE FUNCTION hostfinder_logins_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hostfinder.logins.changed', TG_TABLE_NAME);
    RETURN NULL;
END
$$;

CREATE TRIGGER users_logins_changed AFTER UPDATE OR DELETE OR TRUNCATE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION hostfinder_logins_changed();
CREATE TRIGGER memberships_logins_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON memberships
    FOR EACH STATEMENT EXECUTE FUNCTION hostfinder_logins_changed();
CREATE TRIGGER api_tokens_logins_changed AFTER UPDATE OR DELETE OR TRUNCATE ON api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION hostfinder_logins_changed();

-- WebDAV locks: any change to path_leases announces itself the same way, so a process that knows
-- there is no live lock anywhere can skip the lock query of a write until one is taken
-- (dav_provider/locks.py). An expiry needs no message: it only ever removes a lock.
CREATE FUNCTION hostfinder_leases_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hostfinder.leases.changed', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER path_leases_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON path_leases
    FOR EACH STATEMENT EXECUTE FUNCTION hostfinder_leases_changed();

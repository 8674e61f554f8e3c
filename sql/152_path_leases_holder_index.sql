-- The leases of one holder (a login's email; NULL for a client without one): a LOCK counts them
-- against the per-login limit (store.locks.check_holder) under the store-wide grant lock, so that
-- count must read the holder's leases only, not every organisation's.
CREATE INDEX IF NOT EXISTS path_leases_holder ON path_leases ((data->>'principal'));

-- The leases on a folder's direct members, found by the folder they lie in (the path up to its
-- last '/', "" for a path without one): a WebDAV Depth 1 PROPFIND shows each member's locks
-- (store.locks.near, children) and reads none of the leases further below the folder, however
-- many a member holds there. The expression is near()'s own.
CREATE INDEX IF NOT EXISTS path_leases_folder ON path_leases ((left(path, -strpos(reverse(path), '/'))));

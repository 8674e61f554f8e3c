-- Dead properties of clients' side files (._x, .DS_Store, x.swp ...: store/scratch.py) are their
-- user's, as the side files are. path_properties was keyed by path alone, so two members of one
-- organisation who both wrote org/1/._shared read and overwrote each other's properties (Finder
-- keeps its tags and metadata there), and a property outlived its side file (DELETE, expiry) for
-- whoever wrote that name next. A side file's properties now hang off the side file itself: its
-- user's row in scratch_files, so the database ends them with it (its DELETE, a move away, the
-- purge of an expired one, the user's deletion); reads also ask that the file be live
-- (store/properties.py). path_properties keeps the shared files' and folders' properties.
CREATE TABLE side_file_properties (
    user_id     bigint NOT NULL,
    path        text NOT NULL,
    name        text NOT NULL,
    value       text NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, path, name),
    FOREIGN KEY (user_id, path) REFERENCES scratch_files (user_id, path) ON DELETE CASCADE
);

-- The rows path_properties holds for side paths are dropped, not given to a user: nothing says
-- whose they are (any member with a side file of that name may have set them, or overwritten
-- another's), they are the scratch metadata of files that are each user's own and live a day,
-- and to keep them under a path anyone may write was the leak itself. A client sets them again
-- on its next save. The test is store.host.is_side_path as of this migration: a name of
-- store.paths.is_side_file (SIDE_FILE_PATTERNS, Python's tempfile names, a name without an
-- extension, vim's probes, sed's temporaries) at a path that is not a folder of the layout
-- (store.layout.folder_of); tests/test_dav_side_properties.py checks the two agree.
DELETE FROM path_properties
 WHERE path !~ '^org(/[1-9][0-9]{0,17}(/(guilds|agents|collections)|/guilds/[1-9][0-9]{0,17}|/agents/[1-9][0-9]{0,17}(/(scripts|history-archive))?|/collections/[^/]+)?)?$'
   AND (SELECT n ~ ('^(\._.*|\.DS_Store|\.localized|Thumbs\.db|desktop\.ini|~\$.*|\.~lock\..*#|.*\.swp|.*\.swx'
                    '|.*\.swo|\..*\.sw.|.*~|4913|.*\.tmp|\.goutputstream-.*|\.sb-.*|.*\.vsctmp|\.#.*|#.*#'
                    '|.*\.crdownload|\.fuse_hidden.*|\.nfs.*|\.Spotlight-V100|\.Trashes|\.fseventsd'
                    '|\.TemporaryItems|\.apdisk|.*\.bak|.*\.orig|\..*\.kate-swp|.*\.part|\.~.*|~.*\.tmp'
                    '|.*\.md\.tmp\..*|\..*\.tmp|\..*\.md\..*|.*\.md\.sb-.*)$')
                   OR n ~ '^tmp(?=[a-z_]*[0-9])[a-z0-9_]{8}(\..*)?$'
                   OR n ~ '^\.?[^.]+$'
                   OR (n ~ '^[0-9]{4,5}$' AND (CASE WHEN n ~ '^[0-9]{4,5}$' THEN (n::int - 4913) % 123 END) = 0)
                   OR n ~ '^sed[A-Za-z0-9]{6}$'
          FROM (SELECT regexp_replace(path, '^.*/', '') AS n) AS last);

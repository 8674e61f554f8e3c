-- A user's side files change what that user's listings show: a new ._x or x.swp appears, a
-- rename-away save hides its note. A follower that keeps listings (the FUSE mount) must hear of
-- it as it hears of a note's change, or keep them only briefly. Side files stay out of provenance
-- and out of 'guild.files.changed' (they are nobody else's business): each change of a row here
-- is announced on its user's own channel, 'host.side_files.<user id>', in the changing
-- transaction. The payload names the side file's path and, when a hiding starts, moves to another
-- note or ends with its side file, the paths whose hiding changed. The end of a hiding by a write
-- of its path needs no mention (the write sends its own event); its end by the clock, and a side
-- file's expiry, send none: a listing states how long it holds by itself
-- (store.scratch.list_folder's lasts), and a purge of expired rows changes no listing.
CREATE FUNCTION hostfinder_side_file_changed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    who   bigint;
    paths text[];
BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.expires_at <= now() THEN
            RETURN NULL;
        END IF;
        who := OLD.user_id;
        paths := ARRAY[OLD.path];
        IF OLD.origin IS NOT NULL AND OLD.hides_until > now() THEN
            paths := paths || OLD.origin;
        END IF;
    ELSE
        who := NEW.user_id;
        paths := ARRAY[NEW.path];
        IF TG_OP = 'UPDATE' AND NEW.origin IS NOT NULL
           AND (NEW.origin IS DISTINCT FROM OLD.origin OR NEW.hides_until IS DISTINCT FROM OLD.hides_until) THEN
            paths := paths || NEW.origin;
            IF OLD.origin IS NOT NULL AND OLD.origin <> NEW.origin AND OLD.hides_until > now() THEN
                paths := paths || OLD.origin;   -- the side file now hides another note: this one shows
            END IF;
        END IF;
    END IF;
    PERFORM pg_notify('host.side_files.' || who,
                      json_build_object('user_id', who, 'paths', paths, 'operation', lower(TG_OP))::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER scratch_files_changed AFTER INSERT OR UPDATE OR DELETE ON scratch_files
    FOR EACH ROW EXECUTE FUNCTION hostfinder_side_file_changed();

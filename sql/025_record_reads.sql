-- Reads of collection records (store/records.py, store/record_query.py).

-- One record by id: key is the decimal id, so an equality on the text key finds it without casting
-- every key of the table (a note's key is not a number, and a cast in a filter could meet one).
CREATE INDEX artifacts_live_record_key
    ON artifacts (collection_id, key) WHERE deleted_at IS NULL AND kind = 'object';

-- record_list with since (a routine picking up what changed since previous_run_at), and its default
-- order updated_at asc.
CREATE INDEX artifacts_live_record_updated
    ON artifacts (collection_id, updated_at, id) WHERE deleted_at IS NULL AND kind = 'object';

-- A stored datetime value as an instant, or null when it is not one. Values are stored in UTC ISO
-- form, but a column retyped to datetime keeps its old values as they were, and a where or order
-- on the column must skip those rather than fail the whole query on a cast.
CREATE FUNCTION record_instant(value jsonb) RETURNS timestamptz
    LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    IF jsonb_typeof(value) <> 'string' OR (value #>> '{}') !~ '^\d{4}-\d\d-\d\d' THEN
        RETURN NULL;
    END IF;
    RETURN (value #>> '{}')::timestamptz;
EXCEPTION WHEN others THEN
    RETURN NULL;
END $$;

-- A stored number value as numeric, or null when the stored value is not a JSON number.
CREATE FUNCTION record_number(value jsonb) RETURNS numeric
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT CASE WHEN jsonb_typeof(value) = 'number' THEN value::numeric END
$$;

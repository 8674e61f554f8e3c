-- A note is found by its own file name: note_find "playbook.md", "style-guide" or "style-guide.md"
-- finds playbook.md and style-guide.md, as "playbook" and "style guide" already did.
--
-- sql/015 indexes the key as words only ('-', '_' and '.' made spaces), while the 'simple' parser
-- reads the same key typed in a query whole: 'playbook.md' and 'style-guide.md' as one host-like
-- token each, 'style-guide' as the hyphenated word 'style-guide' followed by its parts. So the
-- index now holds those whole forms too. Rewriting such query words into the index's form instead
-- would cost no re-indexing, but it would change what a query means everywhere else: the body of
-- a note that says "see playbook.md" is indexed with the token 'playbook.md', which a query cut
-- down to "playbook" no longer asks for; and the query text is shared with record_search
-- (store/search_query.py), whose vectors hold keys and values as typed.
--
-- Ranking stays as it was: each word of the key still counts once. The whole forms add only the
-- lexemes the words lack (the key, and the name without .md where the parser keeps it whole: a
-- hyphenated compound, a dotted name), placed just before the words, so the phrase a hyphenated
-- query makes ('style-guide' <-> 'style' <-> 'guide') matches the key and the body as it did.
--
-- migrate() applies 015 before this file; the guard only lets a database still without 015's
-- note_vector take this file (tests/test_migrations.py builds one to stand for an older store).
DO $migration$
BEGIN
    IF to_regprocedure('note_vector(text, text)') IS NULL THEN
        RETURN;
    END IF;
    CREATE OR REPLACE FUNCTION note_vector(key text, content text) RETURNS tsvector
        LANGUAGE sql IMMUTABLE PARALLEL SAFE
        -- the whole forms, less the words: 'style-guide.md' 'style-guide' ('playbook.md' alone)
        RETURN ts_delete(to_tsvector('simple', key || ' ' || regexp_replace(key, '\.md$', '')),
                         tsvector_to_array(to_tsvector('simple',
                             translate(regexp_replace(key, '\.md$', ''), '-_.', '   '))))
            -- then sql/015's vector, its positions after theirs ('style' 'guide' and the body)
            || to_tsvector('simple', translate(regexp_replace(key, '\.md$', ''), '-_.', '   ')
                                     || ' ' || coalesce(content, ''));

    -- The vectors of live notes indexed with the old definition, computed again here rather than
    -- put back in the indexer's queue, where note_find would compute every one of them on each
    -- search until the indexer caught up. The GIN index is dropped for the update and built again
    -- after it: 10 s for 20 000 notes of 3 KB on the 2-core development machine, where updating
    -- the index in place, row by row (fastupdate is off), took 135 s. Note rows stay locked until
    -- this commits: on a store of hundreds of thousands of notes, start the upgraded gateway when
    -- a few minutes of waiting saves are acceptable. Notes still waiting get
    -- the new definition from the indexer; deleted notes are never searched. The version is left
    -- as it is: no file changed, so no ETag or event does either.
    DROP INDEX artifacts_note_search;
    UPDATE artifacts SET note_search = note_vector(key, content)
     WHERE kind = 'note' AND deleted_at IS NULL AND NOT note_search_pending;
    CREATE INDEX artifacts_note_search ON artifacts USING gin (note_search) WITH (fastupdate = off)
        WHERE deleted_at IS NULL AND kind = 'note';
END $migration$;

-- ragpulse schema: the trace list's `q` filter (a case-insensitive substring of the question, ILIKE '%…%') reads
-- a trigram index instead of every trace (issue 15 item 6: 3.4 s → milliseconds on 3.3 million traces).
-- pg_trgm is in PostgreSQL's contrib (Debian's postgresql package and the embedded PostgreSQL 18 ship it) and is a
-- trusted extension (PostgreSQL 13+: the database owner may create it). When it is not installed on the server or
-- may not be created here, nothing is done and `q` keeps working by scanning; a later CREATE EXTENSION pg_trgm plus
-- the CREATE INDEX below (docs/storage.md) adds the index by hand. Building it on an existing store takes about a
-- minute per 3 million traces and blocks writes to traces meanwhile (the migration runs in one transaction).
DO $$
DECLARE
    trgm_schema name;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm')
       AND EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        BEGIN
            CREATE EXTENSION pg_trgm;
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'ragpulse: pg_trgm not created (%), the q filter scans traces', SQLERRM;
        END;
    END IF;
    -- the operator class is named with the extension's schema: it may live outside the search path
    SELECT n.nspname INTO trgm_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
     WHERE e.extname = 'pg_trgm';
    IF trgm_schema IS NOT NULL THEN
        EXECUTE format('CREATE INDEX IF NOT EXISTS traces_question_trgm_idx ON traces USING gin (question %I.gin_trgm_ops)',
                       trgm_schema);
    END IF;
END
$$;

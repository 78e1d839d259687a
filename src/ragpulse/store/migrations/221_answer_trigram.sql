-- ragpulse schema: the trace list's `text` filter (every word in the question or the answer, ILIKE '%word%',
-- issue 31) reads trigram indexes on both texts: the question's from migration 170, the answer's here. As in 170:
-- when pg_trgm is not installed (or may not be created) nothing is done and the filter scans. Building it on an
-- existing store takes about a minute per million traces with short answers and blocks writes to traces meanwhile.
DO $$
DECLARE
    trgm_schema name;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm')
       AND EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_trgm') THEN
        BEGIN
            CREATE EXTENSION pg_trgm;
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'ragpulse: pg_trgm not created (%), the text filter scans traces', SQLERRM;
        END;
    END IF;
    SELECT n.nspname INTO trgm_schema FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace
     WHERE e.extname = 'pg_trgm';
    IF trgm_schema IS NOT NULL THEN
        EXECUTE format('CREATE INDEX IF NOT EXISTS traces_answer_trgm_idx ON traces USING gin (answer %I.gin_trgm_ops)',
                       trgm_schema);
    END IF;
END
$$;
-- the latency and model filters, newest first
CREATE INDEX IF NOT EXISTS traces_model_received_idx ON traces (model, received_at) WHERE model IS NOT NULL;

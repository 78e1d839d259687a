-- ragpulse schema: replay runs that survive interruption and never overwrite silently (issue 13).

-- who runs a run and whether it is alive: a `running` run whose owner process is gone (same host) or whose
-- heartbeat stopped reads as `interrupted` (heartbeat_at is shared with the portal's run queue, 012)
ALTER TABLE runs ADD COLUMN IF NOT EXISTS heartbeat_at timestamptz;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS owner_host text;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS owner_pid integer;
-- sha256 of the cases the run replayed (ragpulse.model.cases_hash), so history stays interpretable
ALTER TABLE runs ADD COLUMN IF NOT EXISTS cases_hash text;
-- sha256 of a test set's stored cases; NULL = not known (cleared by any change to its cases, recomputed on demand)
ALTER TABLE test_sets ADD COLUMN IF NOT EXISTS content_hash text;

-- Any change to test_cases (a replay, the portal, plain SQL) clears the set's hash, so a stale hash can never
-- say "unchanged". The store's own upsert sets ragpulse.hashing = 'on' for its transaction and writes the new
-- hash itself, so a 100,000-case upsert does not run 100,000 updates of the set row.
CREATE OR REPLACE FUNCTION ragpulse_test_cases_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF coalesce(current_setting('ragpulse.hashing', true), '') = 'on' THEN
        RETURN NULL;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        UPDATE test_sets SET content_hash = NULL
         WHERE content_hash IS NOT NULL AND name IN (SELECT test_set FROM new_rows);
    END IF;
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE test_sets SET content_hash = NULL
         WHERE content_hash IS NOT NULL AND name IN (SELECT test_set FROM old_rows);
    END IF;
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS test_cases_hash_ins ON test_cases;
DROP TRIGGER IF EXISTS test_cases_hash_upd ON test_cases;
DROP TRIGGER IF EXISTS test_cases_hash_del ON test_cases;
CREATE TRIGGER test_cases_hash_ins AFTER INSERT ON test_cases REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ragpulse_test_cases_changed();
CREATE TRIGGER test_cases_hash_upd AFTER UPDATE ON test_cases REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ragpulse_test_cases_changed();
CREATE TRIGGER test_cases_hash_del AFTER DELETE ON test_cases REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ragpulse_test_cases_changed();

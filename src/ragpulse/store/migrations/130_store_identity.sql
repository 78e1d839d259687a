-- ragpulse schema: the database's identity (issue 13). One random id per database, created with it, so
-- `replay --via` can tell whether `serve` writes to the database the replay reads (serve's /readyz reports it;
-- PostgresStore.database_identity adds current_database(), so a copy made with CREATE DATABASE … TEMPLATE differs).
CREATE TABLE IF NOT EXISTS store_identity (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    id          uuid NOT NULL DEFAULT gen_random_uuid(),
    created_at  timestamptz NOT NULL DEFAULT now()
);
INSERT INTO store_identity DEFAULT VALUES ON CONFLICT DO NOTHING;

-- ragpulse schema: exactly-once judgements (issue 11 item 13).
-- A stored ok/skipped judgement is final for (trace id, judge, version, judged content): judgements.content_hash
-- is the hash of the question, contexts and answer it judged (ragpulse.model.judged_content_hash). When the same
-- trace id comes back with different content it is judged again; the row it replaces is kept in
-- judgement_history (superseded_at = when it was replaced). An error judgement is simply replaced.
ALTER TABLE judgements ADD COLUMN IF NOT EXISTS content_hash text;

CREATE TABLE IF NOT EXISTS judgement_history (
    trace_id           text NOT NULL REFERENCES traces (trace_id) ON DELETE CASCADE,
    judge              text NOT NULL,
    version            text NOT NULL,
    content_hash       text,
    app                text,
    declared_version   text,
    backend            text NOT NULL,
    model              text,
    score              double precision,
    passed             boolean,
    threshold          double precision,
    status             text NOT NULL,
    reason             text NOT NULL DEFAULT '',
    flags              jsonb NOT NULL DEFAULT '{}'::jsonb,
    raw_output         text,
    latency_s          double precision NOT NULL DEFAULT 0,
    prompt_tokens      integer NOT NULL DEFAULT 0,
    completion_tokens  integer NOT NULL DEFAULT 0,
    source             text,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    superseded_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS judgement_history_trace_idx ON judgement_history (trace_id, judge, version);

CREATE OR REPLACE FUNCTION ragpulse_keep_superseded_judgement() RETURNS trigger AS $$
BEGIN
    INSERT INTO judgement_history (trace_id, judge, version, content_hash, app, declared_version, backend, model,
        score, passed, threshold, status, reason, flags, raw_output, latency_s, prompt_tokens, completion_tokens,
        source, created_at, updated_at)
    VALUES (OLD.trace_id, OLD.judge, OLD.version, OLD.content_hash, OLD.app, OLD.declared_version, OLD.backend,
        OLD.model, OLD.score, OLD.passed, OLD.threshold, OLD.status, OLD.reason, OLD.flags, OLD.raw_output,
        OLD.latency_s, OLD.prompt_tokens, OLD.completion_tokens, OLD.source, OLD.created_at, OLD.updated_at);
    RETURN NEW;
END
$$ LANGUAGE plpgsql;

DROP TRIGGER IF EXISTS judgements_keep_superseded ON judgements;
CREATE TRIGGER judgements_keep_superseded
    BEFORE UPDATE ON judgements
    FOR EACH ROW
    WHEN (OLD.content_hash IS DISTINCT FROM NEW.content_hash AND OLD.status <> 'error')
    EXECUTE FUNCTION ragpulse_keep_superseded_judgement();

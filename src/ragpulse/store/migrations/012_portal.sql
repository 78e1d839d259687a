-- ragpulse schema: the portal (issue 12). Run statuses queued/cancelled, a run queue in PostgreSQL
-- (claimed with FOR UPDATE SKIP LOCKED), progress, and indexes for the trace list and the score statistics.

ALTER TABLE runs DROP CONSTRAINT IF EXISTS runs_status_check;
ALTER TABLE runs ADD CONSTRAINT runs_status_check CHECK (status IN
    ('queued', 'running', 'completed', 'completed_with_errors', 'failed', 'cancelled'));
-- the run request of a queued run (the portal's POST /runs body, names only: no URL, no secret)
ALTER TABLE runs ADD COLUMN IF NOT EXISTS request jsonb;
-- cases done / total while the run is queued or running (null for runs without progress reports)
ALTER TABLE runs ADD COLUMN IF NOT EXISTS progress_done integer;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS progress_total integer;
-- the worker that claimed a queued run and when it last reported (a stale claim is re-queued)
ALTER TABLE runs ADD COLUMN IF NOT EXISTS claimed_by text;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS heartbeat_at timestamptz;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS cancel_requested boolean NOT NULL DEFAULT false;
CREATE INDEX IF NOT EXISTS runs_queued_idx ON runs (started_at) WHERE status = 'queued';
CREATE INDEX IF NOT EXISTS runs_test_set_started_idx ON runs (test_set, started_at DESC);

-- trace list: newest first with a (received_at, trace_id) keyset, overall and per app / source / outcome
CREATE INDEX IF NOT EXISTS traces_received_id_idx ON traces (received_at DESC, trace_id DESC);
CREATE INDEX IF NOT EXISTS traces_app_received_id_idx ON traces (app, received_at DESC, trace_id DESC);
CREATE INDEX IF NOT EXISTS traces_source_received_id_idx ON traces (source, received_at DESC, trace_id DESC);
CREATE INDEX IF NOT EXISTS traces_outcome_received_id_idx ON traces (outcome, received_at DESC, trace_id DESC);

-- copy of traces.source, so the score statistics can leave out source=api (drafts from POST /evaluate)
-- without a join
ALTER TABLE judgements ADD COLUMN IF NOT EXISTS source text;
UPDATE judgements j SET source = t.source FROM traces t WHERE t.trace_id = j.trace_id AND j.source IS NULL;

-- score statistics per judge and time window (index-only scans over the window)
CREATE INDEX IF NOT EXISTS judgements_judge_created_score_idx
    ON judgements (judge, created_at) INCLUDE (status, score, passed, source, app);

CREATE INDEX IF NOT EXISTS test_sets_kb_idx ON test_sets (knowledge_base);

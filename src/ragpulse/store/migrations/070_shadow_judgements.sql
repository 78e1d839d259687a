-- Shadow judgements (issue 14 §3): verdicts of a judge's shadow configuration (judges.<name>.shadow), stored
-- apart from judgements so that they are never exported, published on the results stream, counted in outcomes
-- or run reports. Keyed like judgements, so a later promotion of the same version can reuse them. No foreign key
-- to traces: the engine writes them beside the main write; retention prunes them by created_at.
CREATE TABLE IF NOT EXISTS shadow_judgements (
    trace_id           text NOT NULL,
    judge              text NOT NULL,
    version            text NOT NULL,
    app                text,
    backend            text NOT NULL,
    model              text,
    score              double precision CHECK (score >= 0 AND score <= 1),
    passed             boolean,
    threshold          double precision,
    status             text NOT NULL CHECK (status IN ('ok', 'skipped', 'error')),
    reason             text NOT NULL DEFAULT '',
    flags              jsonb NOT NULL DEFAULT '{}'::jsonb,
    raw_output         text,
    latency_s          double precision NOT NULL DEFAULT 0,
    prompt_tokens      integer NOT NULL DEFAULT 0,
    completion_tokens  integer NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (trace_id, judge, version)
);
CREATE INDEX IF NOT EXISTS shadow_judgements_judge_time_idx ON shadow_judgements (judge, created_at);

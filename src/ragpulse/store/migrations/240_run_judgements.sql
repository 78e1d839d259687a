-- ragpulse schema: a run's case rows are the judgements that run produced (issue 30 item 10).
-- Before, a run's rows were read live as the newest judgement per judge of its traces, so a later `rejudge`
-- (another judge version on the same traces) changed `runs show`, `runs compare`, `gate` and the run page of a
-- finished run. run_judgements keeps, per run, case and judge, the judgement the run used: written in the
-- transaction that stores the case while the run is `running` (or has no run record), never afterwards.
-- Deleted with the run's link to the trace (a re-used run id, the trace's retention). No raw model output (`ragpulse trace ID` shows the judgements themselves).
CREATE TABLE IF NOT EXISTS run_judgements (
    run_id             text NOT NULL,
    trace_id           text NOT NULL,
    judge              text NOT NULL,
    version            text NOT NULL,
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
    latency_s          double precision NOT NULL DEFAULT 0,
    prompt_tokens      integer NOT NULL DEFAULT 0,
    completion_tokens  integer NOT NULL DEFAULT 0,
    created_at         timestamptz NOT NULL,
    updated_at         timestamptz NOT NULL,
    PRIMARY KEY (run_id, trace_id, judge),
    FOREIGN KEY (run_id, trace_id) REFERENCES run_cases (run_id, trace_id) ON DELETE CASCADE
);

-- Runs stored before: each case's judgement per judge of the run's judges ({judge: version}), at the run's
-- version when stored (else that judge's newest); a run without judges recorded (only events) keeps every
-- judge's newest, as it was read until now.
INSERT INTO run_judgements (run_id, trace_id, judge, version, app, declared_version, backend, model, score, passed,
    threshold, status, reason, flags, latency_s, prompt_tokens, completion_tokens, created_at, updated_at)
SELECT DISTINCT ON (rc.run_id, rc.trace_id, j.judge)
    rc.run_id, j.trace_id, j.judge, j.version, j.app, j.declared_version, j.backend, j.model, j.score, j.passed,
    j.threshold, j.status, j.reason, j.flags, j.latency_s, j.prompt_tokens, j.completion_tokens, j.created_at,
    j.updated_at
FROM run_cases rc
JOIN judgements j ON j.trace_id = rc.trace_id
LEFT JOIN runs r ON r.run_id = rc.run_id
WHERE r.run_id IS NULL OR r.judges = '{}'::jsonb OR r.judges ? j.judge
ORDER BY rc.run_id, rc.trace_id, j.judge, (r.judges ->> j.judge = j.version) DESC NULLS LAST,
    j.updated_at DESC, j.created_at DESC, j.version
ON CONFLICT DO NOTHING;

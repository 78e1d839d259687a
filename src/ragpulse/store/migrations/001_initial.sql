-- ragpulse schema v1: traces, judgements, test sets, runs, dead letters.
-- Runs inside one transaction (see ragpulse.store.migrate). PostgreSQL 14+.

CREATE TABLE traces (
    trace_id         text PRIMARY KEY,
    span_id          text,
    app              text,
    scenario         text,
    -- question/answer/context/expected_answer hold 'sha256:<hex>' when redacted (see redacted)
    question         text,
    answer           text,
    context          text,
    -- [{id, content, score, rank, metadata}]; content is 'sha256:<hex>' when redacted, content_chars its length
    documents        jsonb NOT NULL DEFAULT '[]'::jsonb,
    question_chars   integer,
    answer_chars     integer,
    context_chars    integer,
    redacted         boolean NOT NULL DEFAULT false,
    model            text,
    latency_s        double precision,
    start_time       timestamptz,
    end_time         timestamptz,
    attributes       jsonb NOT NULL DEFAULT '{}'::jsonb,
    source           text NOT NULL,
    outcome          text NOT NULL CHECK (outcome IN ('evaluated', 'not_sampled', 'not_evaluable', 'incomplete')),
    outcome_reason   text,
    incomplete       boolean NOT NULL DEFAULT false,
    run_id           text,
    test_case_id     text,
    expected_answer  text,
    keywords         jsonb,
    received_at      timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX traces_app_received_idx ON traces (app, received_at);
CREATE INDEX traces_received_idx ON traces (received_at);
CREATE INDEX traces_run_idx ON traces (run_id) WHERE run_id IS NOT NULL;

CREATE TABLE judgements (
    trace_id           text NOT NULL REFERENCES traces (trace_id) ON DELETE CASCADE,
    judge              text NOT NULL,
    version            text NOT NULL,
    -- copy of traces.app so "judgements of app X in the last hour" needs no join
    app                text,
    declared_version   text,
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
    updated_at         timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (trace_id, judge, version),
    CONSTRAINT judgements_score_only_when_ok CHECK (
        (status = 'ok' AND score IS NOT NULL AND passed IS NOT NULL)
        OR (status <> 'ok' AND score IS NULL AND passed IS NULL)
    )
);
CREATE INDEX judgements_app_created_idx ON judgements (app, created_at);
CREATE INDEX judgements_judge_created_idx ON judgements (judge, created_at);

CREATE TABLE test_sets (
    name            text PRIMARY KEY,
    knowledge_base  text,
    description     text,
    case_count      integer NOT NULL DEFAULT 0,
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE test_cases (
    test_set            text NOT NULL REFERENCES test_sets (name) ON DELETE CASCADE,
    case_id             text NOT NULL,
    position            integer NOT NULL,
    question            text,
    expected_answer     text,
    keywords            jsonb,
    reference_contexts  jsonb NOT NULL DEFAULT '[]'::jsonb,
    answer              text,
    contexts            jsonb NOT NULL DEFAULT '[]'::jsonb,
    doc_ids             jsonb NOT NULL DEFAULT '[]'::jsonb,
    context_labels      jsonb,
    metadata            jsonb NOT NULL DEFAULT '{}'::jsonb,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (test_set, case_id)
);

CREATE TABLE runs (
    run_id       text PRIMARY KEY,
    test_set     text NOT NULL,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    status       text NOT NULL CHECK (status IN ('running', 'completed', 'completed_with_errors', 'failed')),
    judges       jsonb NOT NULL DEFAULT '{}'::jsonb,
    settings     jsonb NOT NULL DEFAULT '{}'::jsonb,
    report       jsonb,
    updated_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX runs_started_idx ON runs (started_at DESC);

-- which traces belong to a run (no FK to runs: a run id may arrive through Kafka/OTLP before/without a run row)
CREATE TABLE run_cases (
    run_id        text NOT NULL,
    trace_id      text NOT NULL REFERENCES traces (trace_id) ON DELETE CASCADE,
    test_case_id  text,
    PRIMARY KEY (run_id, trace_id)
);
CREATE INDEX run_cases_trace_idx ON run_cases (trace_id);

CREATE TABLE dead_letters (
    id          bigserial PRIMARY KEY,
    source      text NOT NULL,
    reason      text NOT NULL,
    payload     bytea NOT NULL,
    meta        jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX dead_letters_created_idx ON dead_letters (created_at);

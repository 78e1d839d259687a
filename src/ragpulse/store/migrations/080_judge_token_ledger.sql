-- Daily judge-model token budget shared by every replica (issue 15 item 4): tokens spent per UTC day and judge.
-- A call reserves its prompt estimate with one conditional upsert (refused once the day's total reached the
-- budget) and corrects it by the reply's usage, so N replicas spend one budget, not N.
CREATE TABLE IF NOT EXISTS judge_token_ledger (
    day date NOT NULL,
    judge text NOT NULL,
    tokens bigint NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (day, judge)
);

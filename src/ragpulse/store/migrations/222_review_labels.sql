-- ragpulse schema: human review labels (issue 31, the portal's review queue). One label per judgement version:
-- (trace_id, judge, version) names the judgement the reviewer saw; there is no foreign key to judgements, so a
-- rejudge (a new version, or the same version replaced for new content) keeps the label on the version it was
-- given for. judge_passed is the verdict the reviewer saw; label is the human verdict (true = the answer is good):
-- agree keeps the judge's verdict, disagree flips it. content_hash: the judged content the label was given for.
CREATE TABLE IF NOT EXISTS review_labels (
    trace_id      text NOT NULL REFERENCES traces (trace_id) ON DELETE CASCADE,
    judge         text NOT NULL,
    version       text NOT NULL,
    content_hash  text,
    judge_passed  boolean NOT NULL,
    label         boolean NOT NULL,
    reviewer      text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (trace_id, judge, version)
);
-- the counts of one judge version (corrected pass rates, calibrate --from-reviews)
CREATE INDEX IF NOT EXISTS review_labels_judge_idx ON review_labels (judge, version);

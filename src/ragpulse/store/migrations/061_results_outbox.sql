-- Results stream outbox (issue 15 item 5): judgements.published_at is NULL until the judgement was published to
-- the results topic. The store writes NULL only when the stream is on (else the write time), and a replaced
-- judgement (error retried, new content) gets NULL again, so it is published again. Rows stored before this
-- migration count as published.
ALTER TABLE judgements ADD COLUMN IF NOT EXISTS published_at timestamptz;
UPDATE judgements SET published_at = updated_at WHERE published_at IS NULL;
CREATE INDEX IF NOT EXISTS judgements_unpublished_idx ON judgements (updated_at) WHERE published_at IS NULL;

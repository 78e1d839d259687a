-- ragpulse schema: traces.time_replaced (issue 11 item 5). True when the source's time was implausible (before
-- 2000, more than a day ahead, unrepresentable) and was replaced by the receive time (ragpulse.ingest.timestamps);
-- such traces are kept out of the evaluation-lag histogram.
ALTER TABLE traces ADD COLUMN IF NOT EXISTS time_replaced boolean NOT NULL DEFAULT false;

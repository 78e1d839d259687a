-- ragpulse schema: the portal's score statistics over every judge (no judge filter) read a time window of
-- judgements by an index-only range scan on created_at instead of the whole table.
CREATE INDEX IF NOT EXISTS judgements_created_stats_idx
    ON judgements (created_at) INCLUDE (judge, app, source, status, passed, score);

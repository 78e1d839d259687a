-- ragpulse schema: run_judgements (migration 240) without its foreign key to run_cases. The key's check cost a
-- trigger call per pinned judgement: 16 ms of the 38 ms a 200-case write spent pinning its 600 judgements
-- (EXPLAIN ANALYZE at load 6 on 2 cores), on every replay write. The rows it cascaded are now deleted where
-- run_cases rows are: with the run's links when a run id is re-used (store.catalog.create_run), and with
-- their traces by retention (store.postgres._PRUNE_TRACES, through run_cases' trace index).
ALTER TABLE run_judgements DROP CONSTRAINT IF EXISTS run_judgements_run_id_trace_id_fkey;

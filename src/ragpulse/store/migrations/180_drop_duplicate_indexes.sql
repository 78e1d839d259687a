-- ragpulse schema: drop three indexes that another index already serves (issue 15 item 2: every stored trace
-- wrote 23 B-tree entries; each index costs PostgreSQL CPU on every insert and nothing on any query).
--   traces (received_at)           → traces_received_id_idx     (received_at DESC, trace_id DESC), from 012
--   traces (app, received_at)      → traces_app_received_id_idx (app, received_at DESC, trace_id DESC), from 012
--   judgements (judge, created_at) → judgements_judge_created_score_idx (judge, created_at) INCLUDE (…), from 012
-- A B-tree is read in either direction, and a longer key or an INCLUDE list serves every range scan on its
-- leading columns, so the planner picks the kept index for the same queries (checked with EXPLAIN in
-- tests/store/test_store_indexes.py).
DROP INDEX IF EXISTS traces_received_idx;
DROP INDEX IF EXISTS traces_app_received_idx;
DROP INDEX IF EXISTS judgements_judge_created_idx;

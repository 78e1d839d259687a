-- ragpulse schema: a run's case rows a page at a time (issue 13 "Scale"). The first page of a 100,000-case run
-- walks the test set in position order and stops after the page (store/run_rows.py), instead of joining and
-- sorting every case of the run.
CREATE INDEX IF NOT EXISTS test_cases_set_position_idx ON test_cases (test_set, position);
CREATE INDEX IF NOT EXISTS run_cases_run_case_idx ON run_cases (run_id, test_case_id);

-- ragpulse schema: an hourly rollup of judgement counts for the portal's score statistics over long windows
-- (GET /api/v1/stats/scores for 7 d reads ~170 rows per judge instead of every judgement). Filled for whole
-- hours by the portal's refresh job (ragpulse.store.portal.PortalQueries.refresh_score_rollup); the last
-- hours and the edges of a window are read from judgements directly.
CREATE TABLE IF NOT EXISTS judgement_rollup (
    hour       timestamptz NOT NULL,
    judge      text NOT NULL,
    app        text NOT NULL,              -- '' for no app
    source     text NOT NULL,              -- '' for unknown
    status     text NOT NULL,
    passed     smallint NOT NULL,          -- 1 passed, 0 failed, -1 not ok
    k          smallint NOT NULL,          -- bounds >= score (see score_counts); -1 not ok
    n          bigint NOT NULL,
    score_sum  double precision NOT NULL,
    PRIMARY KEY (hour, judge, app, source, status, passed, k)
);
-- how far the rollup is complete: every hour before `upto` is in judgement_rollup
CREATE TABLE IF NOT EXISTS judgement_rollup_state (
    name  text PRIMARY KEY,
    upto  timestamptz NOT NULL
);

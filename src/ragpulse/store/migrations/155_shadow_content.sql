-- ragpulse schema: reusable shadow judgements (issue 14 §3, promotion). content_hash is the judged content of the
-- trace the shadow judged (ragpulse.model.judged_content_hash, as judgements.content_hash, migration 110): when
-- the main configuration becomes the shadow's (same judge version), the engine and `rejudge` copy an `ok` shadow
-- judgement of that version and content into judgements instead of calling the model again. Rows from before
-- this migration have no content hash and are never reused.
ALTER TABLE shadow_judgements ADD COLUMN IF NOT EXISTS content_hash text;
-- which (judge, version) have reusable rows: asked once when an engine starts
CREATE INDEX IF NOT EXISTS shadow_judgements_reusable_idx ON shadow_judgements (judge, version)
    WHERE status = 'ok' AND content_hash IS NOT NULL;

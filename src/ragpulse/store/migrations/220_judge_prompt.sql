-- ragpulse schema: the judge model's prompt beside its raw reply (issue 31, the portal's trace view shows both).
-- judgements.prompt: the messages sent, '[role]' headed, calls joined by '\n---\n', at most 32,768 characters
-- (ragpulse.model.PROMPT_MAX_CHARS); NULL for heuristic judgements, rows stored before this migration and
-- under redact_text (a prompt quotes the judged texts).
ALTER TABLE judgements ADD COLUMN IF NOT EXISTS prompt text;

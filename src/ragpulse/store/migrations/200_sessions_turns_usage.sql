-- Conversations and the app's own token usage (issue 28).
ALTER TABLE traces
    -- the conversation the trace is a turn of (OTLP session.id / Traceloop session_id / gen_ai.conversation.id /
    -- Langfuse session, Kafka sessionId); kept as is when texts are redacted
    ADD COLUMN session_id              text,
    -- [{"question", "answer"}]: the conversation's earlier turns, oldest first ('sha256:<hex>' texts when redacted)
    ADD COLUMN turns                   jsonb NOT NULL DEFAULT '[]'::jsonb,
    -- the app's answering LLM call's tokens, and the sums over every LLM call of the trace (NULL = not reported)
    ADD COLUMN prompt_tokens           integer,
    ADD COLUMN completion_tokens       integer,
    ADD COLUMN total_prompt_tokens     integer,
    ADD COLUMN total_completion_tokens integer,
    -- [{"model", "prompt_tokens", "completion_tokens", "calls"}]: the trace's token usage per model
    ADD COLUMN usage                   jsonb NOT NULL DEFAULT '[]'::jsonb;

-- Rows written before this migration kept the session id in attributes: move it into the column.
UPDATE traces SET session_id = left(btrim(attributes ->> 'session_id'), 256),
                  attributes = attributes - 'session_id'
WHERE attributes ? 'session_id';

-- A session's traces in order (the sessions endpoint, the engine's look-up of earlier turns).
CREATE INDEX traces_session_idx ON traces (session_id, start_time, received_at) WHERE session_id IS NOT NULL;

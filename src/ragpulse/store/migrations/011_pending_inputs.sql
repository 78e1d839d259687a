-- Inputs a source accepted but whose result is not stored yet (OTLP: the spans of a trace, one row per
-- request that carried some of them, as a serialized ExportTraceServiceRequest). Written before the receiver
-- answers 200, deleted once the trace's result is stored (or moved to dead_letters), read back on start.
CREATE TABLE pending_inputs (
    id           bigserial PRIMARY KEY,
    source       text NOT NULL,
    key          text NOT NULL,
    payload      bytea NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pending_inputs_key_idx ON pending_inputs (source, key);

-- ragpulse schema: the portal's sign-in sessions and its signing key (issue 26). Stored here so that a session
-- is valid, and a sign-out ends it, on every replica.
-- portal_sessions: one row per signed-in browser; id_hash = sha256 of the cookie value (the value itself is
-- never stored), token_mac = HMAC-SHA256(key = cookie value, message = API token) so that a changed token ends
-- every session; expires_at = created_at + the session lifetime.
CREATE TABLE IF NOT EXISTS portal_sessions (
    id_hash     bytea PRIMARY KEY,
    token_mac   bytea NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    expires_at  timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS portal_sessions_expires_at ON portal_sessions (expires_at);
-- portal_key: one random key per database (32 bytes, written by the first portal that needs it), the HMAC key
-- of the UI's CSRF tokens (ragpulse.portal.auth).
CREATE TABLE IF NOT EXISTS portal_key (
    singleton   boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    key         bytea NOT NULL CHECK (length(key) >= 32),
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- Idempotency keys (the IETF httpapi draft's Idempotency-Key header): one
-- row per key a caller sent on a write, scoped by tenant and caller, kept
-- 24 hours. A request claims its key (running), then records its answer
-- (done); a retry replays the answer, a request with the same key and
-- another body is refused, and one that arrives while the first still runs
-- waits. A request that creates a file names the file's id here before it
-- writes anything, so a retry after a crash finds what the first one left.
CREATE TABLE uploaded_file_idempotency (
    tenant_code text NOT NULL,
    caller text NOT NULL,
    key text NOT NULL,
    route text NOT NULL,
    state text NOT NULL,
    fingerprint bytea,
    file_id uuid,
    lease_until timestamptz,
    status integer,
    content_type text,
    body bytea,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (tenant_code, caller, key),
    CONSTRAINT uploaded_file_idempotency_state_check CHECK (
        (state = 'running' AND lease_until IS NOT NULL AND status IS NULL)
        OR (state = 'done' AND lease_until IS NULL AND status IS NOT NULL AND fingerprint IS NOT NULL)),
    CONSTRAINT uploaded_file_idempotency_key_check CHECK (octet_length(key) BETWEEN 1 AND 255),
    CONSTRAINT uploaded_file_idempotency_body_check CHECK (body IS NULL OR octet_length(body) <= 65536)
);

-- IdempotencyExpire deletes by expiry, oldest first.
CREATE INDEX uploaded_file_idempotency_expires_idx ON uploaded_file_idempotency (expires_at);

COMMENT ON TABLE uploaded_file_idempotency IS 'Idempotency keys of writes (the Idempotency-Key header): the claim of the request that runs under a key, then its answer, replayed to retries for 24 hours.';
COMMENT ON COLUMN uploaded_file_idempotency.tenant_code IS 'The caller''s tenant: keys of two tenants never meet.';
COMMENT ON COLUMN uploaded_file_idempotency.caller IS 'The caller (the token''s user): keys of two callers never meet.';
COMMENT ON COLUMN uploaded_file_idempotency.key IS 'The Idempotency-Key header, as sent (1 to 255 bytes).';
COMMENT ON COLUMN uploaded_file_idempotency.route IS 'The route the key was first used on (method and pattern).';
COMMENT ON COLUMN uploaded_file_idempotency.state IS 'running: a request holds the key until lease_until; done: its answer is recorded.';
COMMENT ON COLUMN uploaded_file_idempotency.fingerprint IS 'SHA-256 of the request (route, path, content type, body); NULL while the first request runs. A retry with another fingerprint is refused.';
COMMENT ON COLUMN uploaded_file_idempotency.file_id IS 'The id of the file the request creates (uploads, initiates, clones), chosen before anything is written: a retry after a crash answers from that file.';
COMMENT ON COLUMN uploaded_file_idempotency.lease_until IS 'While running: the claim holds until then; past it a retry takes the key over.';
COMMENT ON COLUMN uploaded_file_idempotency.status IS 'done: the HTTP status of the answer.';
COMMENT ON COLUMN uploaded_file_idempotency.content_type IS 'done: the answer''s Content-Type.';
COMMENT ON COLUMN uploaded_file_idempotency.body IS 'done: the answer''s body (at most 64 KiB; NULL for an empty one).';
COMMENT ON COLUMN uploaded_file_idempotency.created_at IS 'When the key was first claimed.';
COMMENT ON COLUMN uploaded_file_idempotency.expires_at IS 'created_at + 24 hours: then the row is deleted (IdempotencyExpire) and the key can be used again.';

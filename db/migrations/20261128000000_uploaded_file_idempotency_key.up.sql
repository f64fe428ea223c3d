-- Idempotency keys of buffer uploads on the file's own row (a key
-- row of its own cost a keyed 64 KiB upload a third of its throughput).
-- POST /uploaded-file with an Idempotency-Key stores the key and the
-- request's fingerprint on the row it inserts; a retry finds the row by
-- the key (uploaded_file_idempotency_key_unique, next migration) and
-- answers from it. Nullable, no default: adding them rewrites nothing.
SET LOCAL lock_timeout = '5s';
ALTER TABLE uploaded_file
    ADD COLUMN IF NOT EXISTS idempotency_key text,
    ADD COLUMN IF NOT EXISTS idempotency_fingerprint bytea;
COMMENT ON COLUMN uploaded_file.idempotency_key IS 'Buffer uploads sent with an Idempotency-Key: the key, unique per tenant and user; a retry answers from this row. Cleared when the row is deleted or the key is reused after 24 hours.';
COMMENT ON COLUMN uploaded_file.idempotency_fingerprint IS 'With idempotency_key: the SHA-256 of the request that used it (route, path, content type, the form without its boundary); a retry with another fingerprint is another request (422).';

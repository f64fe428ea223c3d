SET LOCAL lock_timeout = '5s';
ALTER TABLE uploaded_file
    DROP COLUMN IF EXISTS idempotency_fingerprint,
    DROP COLUMN IF EXISTS idempotency_key;

-- One file per buffer-upload key of a caller (tenant and user): the insert
-- of a retry fails on it and the retry reads the first file by it
-- (FileInsertHidden, FileGetByIdempotencyKey). Partial: unkeyed uploads,
-- almost all of them, add no entry. Built CONCURRENTLY, alone in its
-- migration.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_idempotency_key_unique
    ON uploaded_file (tenant_code, user_id, idempotency_key) WHERE idempotency_key IS NOT NULL;

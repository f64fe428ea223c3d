-- A staging key belongs to one row: the constraint takes over the index
-- 20261122000001 built (a catalog change; no scan). Databases migrated
-- before the build was split out already have the constraint.

-- Writers queue behind a DDL statement waiting for its lock: wait at most
-- 5 s (then nothing is applied and `uploadedfile migrate up` tries again).
SET LOCAL lock_timeout = '5s';
DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'uploaded_file_pending_key_unique' AND conrelid = 'uploaded_file'::regclass) THEN
        ALTER TABLE uploaded_file ADD CONSTRAINT uploaded_file_pending_key_unique UNIQUE USING INDEX uploaded_file_pending_key_unique;
    END IF;
END
$$;

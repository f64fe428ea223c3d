-- Direct uploads still in flight, in the order their cleanup lease runs out,
-- for the pending sweep.
-- Built CONCURRENTLY, alone in its migration (CONCURRENTLY cannot run in
-- a transaction block): writers go on while it builds. A build that failed
-- leaves an INVALID index; `uploadedfile migrate up` drops it and builds it
-- again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_direct_pending_idx ON uploaded_file (upload_pending_at)
    WHERE pending_key IS NOT NULL AND status IN ('pending', 'completing')
        AND deletion_pending_at IS NULL AND deleted_at IS NULL;

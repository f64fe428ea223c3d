-- The rescan walks ready files in id order.
-- Built CONCURRENTLY, alone in its migration (CONCURRENTLY cannot run in
-- a transaction block): writers go on while it builds. A build that failed
-- leaves an INVALID index; `uploadedfile migrate up` drops it and builds it
-- again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_rescan_idx ON uploaded_file (id)
    WHERE status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL;

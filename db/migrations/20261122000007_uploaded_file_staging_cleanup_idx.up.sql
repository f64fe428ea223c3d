-- Retained staging objects of ready S3 uploads, for the staging sweep.
-- Built CONCURRENTLY, alone in its migration (CONCURRENTLY cannot run in
-- a transaction block): writers go on while it builds. A build that failed
-- leaves an INVALID index; `uploadedfile migrate up` drops it and builds it
-- again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_staging_cleanup_idx ON uploaded_file (staging_cleanup_at)
    WHERE staging_cleanup_at IS NOT NULL;

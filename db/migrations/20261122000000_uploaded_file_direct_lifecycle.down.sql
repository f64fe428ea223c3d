-- Reverts the direct upload lifecycle. Rows still in flight (pending,
-- completing, failed) keep their upload marker and so stay hidden, as in the
-- legacy shape; their staging objects are no longer referenced by any row, so
-- run the pending sweep to completion before migrating down.
ALTER TABLE uploaded_file
    DROP CONSTRAINT IF EXISTS uploaded_file_staging_cleanup_check,
    DROP CONSTRAINT IF EXISTS uploaded_file_cleanup_after_upload_check,
    DROP CONSTRAINT IF EXISTS uploaded_file_ready_no_upload_marker_check,
    DROP CONSTRAINT IF EXISTS uploaded_file_completion_lease_check,
    DROP CONSTRAINT IF EXISTS uploaded_file_pending_key_distinct_check,
    DROP CONSTRAINT IF EXISTS uploaded_file_pending_key_length_check,
    DROP CONSTRAINT IF EXISTS uploaded_file_pending_key_unique,
    DROP CONSTRAINT IF EXISTS uploaded_file_disposition_check,
    DROP CONSTRAINT IF EXISTS uploaded_file_status_check,
    DROP COLUMN IF EXISTS staging_cleanup_at,
    DROP COLUMN IF EXISTS completion_lease_until,
    DROP COLUMN IF EXISTS upload_expires_at,
    DROP COLUMN IF EXISTS completed_at,
    DROP COLUMN IF EXISTS disposition,
    DROP COLUMN IF EXISTS etag,
    DROP COLUMN IF EXISTS checksum,
    DROP COLUMN IF EXISTS pending_key,
    DROP COLUMN IF EXISTS status;

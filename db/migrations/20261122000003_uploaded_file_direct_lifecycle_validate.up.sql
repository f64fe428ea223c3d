-- Validates the constraints 20261122000000 added NOT VALID: a scan of the
-- table under SHARE UPDATE EXCLUSIVE, which lets writers go on.
ALTER TABLE uploaded_file
    VALIDATE CONSTRAINT uploaded_file_status_check,
    VALIDATE CONSTRAINT uploaded_file_disposition_check,
    VALIDATE CONSTRAINT uploaded_file_pending_key_length_check,
    VALIDATE CONSTRAINT uploaded_file_pending_key_distinct_check,
    VALIDATE CONSTRAINT uploaded_file_completion_lease_check,
    VALIDATE CONSTRAINT uploaded_file_ready_no_upload_marker_check,
    VALIDATE CONSTRAINT uploaded_file_cleanup_after_upload_check,
    VALIDATE CONSTRAINT uploaded_file_staging_cleanup_check;

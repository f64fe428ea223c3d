-- Validates the constraints 20261123300000 added NOT VALID, each a scan
-- under SHARE UPDATE EXCLUSIVE, which lets writers go on.
ALTER TABLE uploaded_file
    VALIDATE CONSTRAINT uploaded_file_status_check,
    VALIDATE CONSTRAINT uploaded_file_staging_cleanup_check;
ALTER TABLE uploaded_file_event VALIDATE CONSTRAINT uploaded_file_event_type_check;

-- Validates the row checks 20261125000000 added NOT VALID: scans under
-- SHARE UPDATE EXCLUSIVE, which let writers go on.
ALTER TABLE uploaded_file VALIDATE CONSTRAINT uploaded_file_row_check;
ALTER TABLE uploaded_file_event VALIDATE CONSTRAINT uploaded_file_event_row_check;

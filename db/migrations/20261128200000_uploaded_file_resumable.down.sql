DROP TABLE IF EXISTS uploaded_file_chunk;
ALTER TABLE uploaded_file DROP CONSTRAINT IF EXISTS uploaded_file_resumable_offset_check;
ALTER TABLE uploaded_file DROP COLUMN IF EXISTS resumable_lease_until, DROP COLUMN IF EXISTS resumable_offset;
DELETE FROM uploaded_file_schema_compat WHERE version = 20261128200000;

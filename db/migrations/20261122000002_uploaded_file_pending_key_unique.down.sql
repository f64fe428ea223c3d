ALTER TABLE uploaded_file DROP CONSTRAINT IF EXISTS uploaded_file_pending_key_unique;

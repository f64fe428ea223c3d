DROP TABLE IF EXISTS uploaded_file_idempotency;

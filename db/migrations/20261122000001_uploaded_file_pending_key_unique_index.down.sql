DROP INDEX CONCURRENTLY IF EXISTS uploaded_file_pending_key_unique;

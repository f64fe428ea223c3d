DROP INDEX CONCURRENTLY IF EXISTS uploaded_file_key_bytes_idx;

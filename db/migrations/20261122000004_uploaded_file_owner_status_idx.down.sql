DROP INDEX CONCURRENTLY IF EXISTS uploaded_file_owner_status_idx;

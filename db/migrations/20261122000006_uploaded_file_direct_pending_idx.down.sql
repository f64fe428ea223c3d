DROP INDEX CONCURRENTLY IF EXISTS uploaded_file_direct_pending_idx;

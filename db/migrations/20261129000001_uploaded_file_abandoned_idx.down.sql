DROP INDEX CONCURRENTLY IF EXISTS uploaded_file_abandoned_idx;

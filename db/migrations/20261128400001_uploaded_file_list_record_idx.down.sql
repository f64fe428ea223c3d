DROP INDEX CONCURRENTLY IF EXISTS uploaded_file_list_record_idx;

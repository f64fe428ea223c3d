DROP INDEX CONCURRENTLY IF EXISTS uploaded_file_rescan_tenant_idx;

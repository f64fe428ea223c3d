CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_owner_status_idx ON uploaded_file (tenant_code, user_id, status);

CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_attachment_idx ON uploaded_file (tenant_code, entity, entity_id, module)
    WHERE used_at IS NOT NULL AND deleted_at IS NULL;

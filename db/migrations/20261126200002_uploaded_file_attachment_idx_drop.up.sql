-- The index diet: uploaded_file_attachment_idx (tenant_code,
-- entity, entity_id, module) was read by no query: an attached file is
-- found by its id (FileGetAttached, the primary key) and a list filtered
-- by entity walks its list index. Dropped CONCURRENTLY, alone in its
-- migration.
DROP INDEX CONCURRENTLY IF EXISTS uploaded_file_attachment_idx;

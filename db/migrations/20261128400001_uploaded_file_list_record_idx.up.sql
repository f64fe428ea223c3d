-- The files of one record (FileListRecordBy*, db/queries/file_list.sql):
-- tenant, entity, entity id, newest first, holding visible attached rows
-- only. Without it a list of one record's files walked its whole scope's
-- list index and filtered it (20,000 rows read for 3 returned on an owner
-- of 20,000 files). Built CONCURRENTLY, alone in its migration; its schema
-- window is declared by 20261128400000.
CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_list_record_idx ON uploaded_file (tenant_code, entity, entity_id, created_at DESC, id DESC)
    WHERE entity IS NOT NULL AND status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL;

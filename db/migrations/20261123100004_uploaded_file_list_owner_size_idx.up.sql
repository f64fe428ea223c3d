-- Owner lists, largest first. See 20261123100000.
-- Built CONCURRENTLY, alone in its migration (CONCURRENTLY cannot run in
-- a transaction block): writers go on while it builds. A build that failed
-- leaves an INVALID index; `uploadedfile migrate up` drops it and builds it
-- again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_list_owner_size_idx ON uploaded_file (tenant_code, user_id, size_bytes DESC, id DESC)
    WHERE status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL;

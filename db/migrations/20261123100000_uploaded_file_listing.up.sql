-- Listing (db/queries/file_list.sql): keyset-paginated lists of visible
-- files, one index per list shape. Every index holds only visible rows
-- (ready, no upload marker, no deletion claim, not soft-deleted) -- the rows
-- a list may return -- so in-flight and deleted rows cost a list nothing.
-- The name indexes are on lower(original_name) in the "C" collation: byte
-- order, deterministic across servers, and usable for a LIKE 'prefix%'
-- range.

CREATE INDEX uploaded_file_list_owner_created_idx ON uploaded_file (tenant_code, user_id, created_at DESC, id DESC)
    WHERE status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL;
CREATE INDEX uploaded_file_list_tenant_created_idx ON uploaded_file (tenant_code, created_at DESC, id DESC)
    WHERE status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL;
CREATE INDEX uploaded_file_list_owner_name_idx ON uploaded_file (tenant_code, user_id, (lower(original_name) COLLATE "C"), id)
    WHERE status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL;
CREATE INDEX uploaded_file_list_tenant_name_idx ON uploaded_file (tenant_code, (lower(original_name) COLLATE "C"), id)
    WHERE status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL;
CREATE INDEX uploaded_file_list_owner_size_idx ON uploaded_file (tenant_code, user_id, size_bytes DESC, id DESC)
    WHERE status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL;
CREATE INDEX uploaded_file_list_tenant_size_idx ON uploaded_file (tenant_code, size_bytes DESC, id DESC)
    WHERE status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL;

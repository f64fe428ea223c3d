-- Listing (db/queries/file_list.sql): keyset-paginated lists of visible
-- files, one index per list shape, each built in a migration of its own
-- (20261123100000 to 20261123100005). Every index holds only visible rows
-- (ready, no upload marker, no deletion claim, not soft-deleted) -- the rows
-- a list may return -- so in-flight and deleted rows cost a list nothing.
-- The name indexes are on lower(original_name) in the "C" collation: byte
-- order, deterministic across servers, and usable for a LIKE 'prefix%'
-- range.
--
-- Owner lists, newest first.
-- Built CONCURRENTLY, alone in its migration (CONCURRENTLY cannot run in
-- a transaction block): writers go on while it builds. A build that failed
-- leaves an INVALID index; `uploadedfile migrate up` drops it and builds it
-- again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_list_owner_created_idx ON uploaded_file (tenant_code, user_id, created_at DESC, id DESC)
    WHERE status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL;

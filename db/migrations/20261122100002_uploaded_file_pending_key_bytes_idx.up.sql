-- Every staging key in byte order, for reconcile's merge.
-- Built CONCURRENTLY, alone in its migration (CONCURRENTLY cannot run in
-- a transaction block): writers go on while it builds. A build that failed
-- leaves an INVALID index; `uploadedfile migrate up` drops it and builds it
-- again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_pending_key_bytes_idx ON uploaded_file ((pending_key COLLATE "C"))
    WHERE pending_key IS NOT NULL;

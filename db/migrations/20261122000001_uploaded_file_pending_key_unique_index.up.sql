-- The unique index behind uploaded_file_pending_key_unique (a staging key
-- belongs to one row), built CONCURRENTLY, alone in its migration, so
-- writers go on while it builds; 20261122000002 makes it the constraint.
-- A build that failed leaves an INVALID index; `uploadedfile migrate up`
-- drops it and builds it again.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_pending_key_unique ON uploaded_file (pending_key);

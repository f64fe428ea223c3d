-- Every final key in byte order, whatever the database's default
-- collation, for reconcile's merge (ReconcileReferencesFrom).
-- Built CONCURRENTLY, alone in its migration (CONCURRENTLY cannot run in
-- a transaction block): writers go on while it builds. A build that failed
-- leaves an INVALID index; `uploadedfile migrate up` drops it and builds it
-- again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_key_bytes_idx ON uploaded_file ((key COLLATE "C"));

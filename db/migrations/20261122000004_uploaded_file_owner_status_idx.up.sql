-- Owner listings by state (replacing the owner-only index of the legacy
-- shape, dropped by 20261122000005).
-- Built CONCURRENTLY, alone in its migration (CONCURRENTLY cannot run in
-- a transaction block): writers go on while it builds. A build that failed
-- leaves an INVALID index; `uploadedfile migrate up` drops it and builds it
-- again.
CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_owner_status_idx ON uploaded_file (tenant_code, user_id, status);

-- The legacy owner-only index, replaced by uploaded_file_owner_status_idx.
-- Dropped CONCURRENTLY, alone in its migration: no lock on the table's
-- writers.
DROP INDEX CONCURRENTLY IF EXISTS uploaded_file_owner_idx;

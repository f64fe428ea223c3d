-- The index diet: uploaded_file_rescan_idx (id, of visible
-- ready files) duplicated the primary key for the rescan's walk in id
-- order, in which nearly every row is a visible ready file; the primary
-- key serves it, and every point read by id. Dropped CONCURRENTLY, alone
-- in its migration.
DROP INDEX CONCURRENTLY IF EXISTS uploaded_file_rescan_idx;

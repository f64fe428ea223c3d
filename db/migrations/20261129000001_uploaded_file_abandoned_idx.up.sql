-- Buffer uploads whose writer may have gone (an upload marker, no deletion
-- claim yet), by upload marker: the first-claim half of
-- DeletionClaimExpiredTombstones (db/queries/file_sweep.sql). The upload
-- marker index also holds every tombstone passed again, which keeps its old
-- marker: 5,000 such tombstones were read and filtered away on each pass
-- to find no abandoned upload. Built CONCURRENTLY, alone in its migration;
-- its schema window is declared by 20261129000000.
CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_abandoned_idx ON uploaded_file (upload_pending_at)
    WHERE upload_pending_at IS NOT NULL AND deletion_pending_at IS NULL;

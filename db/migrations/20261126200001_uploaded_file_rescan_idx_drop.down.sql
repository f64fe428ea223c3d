CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_rescan_idx ON uploaded_file (id)
    WHERE status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL;

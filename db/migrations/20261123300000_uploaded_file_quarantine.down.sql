-- Reverts quarantine: quarantined files become ready (visible) again.
DELETE FROM uploaded_file_event WHERE type IN ('file.quarantined', 'file.unquarantined');
ALTER TABLE uploaded_file_event DROP CONSTRAINT uploaded_file_event_type_check;
ALTER TABLE uploaded_file_event ADD CONSTRAINT uploaded_file_event_type_check CHECK (type IN (
    'file.ready', 'file.deleted', 'file.purged', 'file.expired',
    'file.attached', 'file.detached', 'upload.failed', 'upload.abandoned'));
UPDATE uploaded_file SET status = 'ready' WHERE status = 'quarantined';
ALTER TABLE uploaded_file DROP CONSTRAINT uploaded_file_staging_cleanup_check;
ALTER TABLE uploaded_file ADD CONSTRAINT uploaded_file_staging_cleanup_check
    CHECK (staging_cleanup_at IS NULL OR (status = 'ready' AND pending_key IS NOT NULL));
ALTER TABLE uploaded_file DROP CONSTRAINT uploaded_file_status_check;
ALTER TABLE uploaded_file ADD CONSTRAINT uploaded_file_status_check
    CHECK (status IN ('pending', 'completing', 'ready', 'failed'));

-- Quarantine: a ready file in which a rescan found malware is hidden from
-- every read by a state of its own. Every read, list, attachment and
-- user deletion requires status = 'ready', so a quarantined file answers
-- exactly as a missing one does; its bytes stay (for the operator) and
-- keep holding their space. `uploadedfile maintenance unquarantine`
-- brings it back.
ALTER TABLE uploaded_file DROP CONSTRAINT uploaded_file_status_check;
ALTER TABLE uploaded_file ADD CONSTRAINT uploaded_file_status_check
    CHECK (status IN ('pending', 'completing', 'ready', 'failed', 'quarantined'));
ALTER TABLE uploaded_file DROP CONSTRAINT uploaded_file_staging_cleanup_check;
ALTER TABLE uploaded_file ADD CONSTRAINT uploaded_file_staging_cleanup_check
    CHECK (staging_cleanup_at IS NULL OR (status IN ('ready', 'quarantined') AND pending_key IS NOT NULL));

ALTER TABLE uploaded_file_event DROP CONSTRAINT uploaded_file_event_type_check;
ALTER TABLE uploaded_file_event ADD CONSTRAINT uploaded_file_event_type_check CHECK (type IN (
    'file.ready', 'file.deleted', 'file.purged', 'file.expired',
    'file.attached', 'file.detached', 'upload.failed', 'upload.abandoned',
    'file.quarantined', 'file.unquarantined'));

-- The rescan walks ready files in id order.
CREATE INDEX uploaded_file_rescan_idx ON uploaded_file (id)
    WHERE status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL;

-- Quarantine: a ready file in which a rescan found malware is hidden from
-- every read by a state of its own. Every read, list, attachment and
-- user deletion requires status = 'ready', so a quarantined file answers
-- exactly as a missing one does; its bytes stay (for the operator) and
-- keep holding their space. `uploadedfile maintenance unquarantine`
-- brings it back.
--
-- The widened constraints are added NOT VALID (no scan under the lock) and
-- validated by 20261123300001; the rescan index is built by 20261123300002.

-- Writers queue behind a DDL statement waiting for its lock: wait at most
-- 5 s (then nothing is applied and `uploadedfile migrate up` tries again).
SET LOCAL lock_timeout = '5s';
ALTER TABLE uploaded_file DROP CONSTRAINT uploaded_file_status_check;
ALTER TABLE uploaded_file ADD CONSTRAINT uploaded_file_status_check
    CHECK (status IN ('pending', 'completing', 'ready', 'failed', 'quarantined')) NOT VALID;
ALTER TABLE uploaded_file DROP CONSTRAINT uploaded_file_staging_cleanup_check;
ALTER TABLE uploaded_file ADD CONSTRAINT uploaded_file_staging_cleanup_check
    CHECK (staging_cleanup_at IS NULL OR (status IN ('ready', 'quarantined') AND pending_key IS NOT NULL)) NOT VALID;

ALTER TABLE uploaded_file_event DROP CONSTRAINT uploaded_file_event_type_check;
ALTER TABLE uploaded_file_event ADD CONSTRAINT uploaded_file_event_type_check CHECK (type IN (
    'file.ready', 'file.deleted', 'file.purged', 'file.expired',
    'file.attached', 'file.detached', 'upload.failed', 'upload.abandoned',
    'file.quarantined', 'file.unquarantined')) NOT VALID;

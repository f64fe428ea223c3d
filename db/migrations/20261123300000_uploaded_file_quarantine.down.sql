-- Reverts quarantine. It refuses while any file is quarantined: before
-- quarantine there is no hidden state to keep such a file in, and turning it
-- back into a ready file would hand malware out again. Delete the
-- quarantined files first (they are hidden from every reader; `uploadedfile
-- maintenance purge-unused` or the API's deletion as the owner), then run
-- the down again. Its table locks wait at most 5 s.
SET LOCAL lock_timeout = '5s';
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM uploaded_file WHERE status = 'quarantined') THEN
        RAISE EXCEPTION 'uploaded_file holds quarantined files: reverting quarantine would make them ready and visible again; delete them first'
            USING ERRCODE = 'UFM01';
    END IF;
END
$$;
DELETE FROM uploaded_file_event WHERE type IN ('file.quarantined', 'file.unquarantined');
ALTER TABLE uploaded_file_event DROP CONSTRAINT uploaded_file_event_type_check;
ALTER TABLE uploaded_file_event ADD CONSTRAINT uploaded_file_event_type_check CHECK (type IN (
    'file.ready', 'file.deleted', 'file.purged', 'file.expired',
    'file.attached', 'file.detached', 'upload.failed', 'upload.abandoned'));
ALTER TABLE uploaded_file DROP CONSTRAINT uploaded_file_staging_cleanup_check;
ALTER TABLE uploaded_file ADD CONSTRAINT uploaded_file_staging_cleanup_check
    CHECK (staging_cleanup_at IS NULL OR (status = 'ready' AND pending_key IS NOT NULL));
ALTER TABLE uploaded_file DROP CONSTRAINT uploaded_file_status_check;
ALTER TABLE uploaded_file ADD CONSTRAINT uploaded_file_status_check
    CHECK (status IN ('pending', 'completing', 'ready', 'failed'));

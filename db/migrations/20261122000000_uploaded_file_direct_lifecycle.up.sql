-- The direct upload lifecycle (docs/behaviour.md, "Uploads"): initiate -> the client writes one staging object -> complete
-- verifies, promotes and finalizes. Additive only: every new column is
-- nullable or has a constant default, so rows written by the legacy shape
-- stay valid and a running legacy writer is not broken by it.
--
-- Nothing here scans the table under a lock: the constraints are added NOT
-- VALID (enforced for every row written from now on) and validated by
-- 20261122000003; the unique staging key and the indexes are built
-- CONCURRENTLY by the migrations after this one.

-- Writers queue behind a DDL statement waiting for its lock: wait at most
-- 5 s (then nothing is applied and `uploadedfile migrate up` tries again).
SET LOCAL lock_timeout = '5s';

ALTER TABLE uploaded_file
    ADD COLUMN status text NOT NULL DEFAULT 'ready',
    ADD COLUMN pending_key text,
    ADD COLUMN checksum text,
    ADD COLUMN etag text,
    ADD COLUMN disposition text NOT NULL DEFAULT 'attachment',
    ADD COLUMN completed_at timestamptz,
    ADD COLUMN upload_expires_at timestamptz,
    ADD COLUMN completion_lease_until timestamptz,
    ADD COLUMN staging_cleanup_at timestamptz;

-- Legacy hidden rows (buffer uploads not yet activated) are pending, not
-- ready; done before the constraints below, which require it.
UPDATE uploaded_file SET status = 'pending' WHERE upload_pending_at IS NOT NULL;

ALTER TABLE uploaded_file
    ADD CONSTRAINT uploaded_file_status_check CHECK (status IN ('pending', 'completing', 'ready', 'failed')) NOT VALID,
    ADD CONSTRAINT uploaded_file_disposition_check CHECK (disposition IN ('inline', 'attachment')) NOT VALID,
    ADD CONSTRAINT uploaded_file_pending_key_length_check CHECK (pending_key IS NULL OR char_length(pending_key) BETWEEN 1 AND 1024) NOT VALID,
    ADD CONSTRAINT uploaded_file_pending_key_distinct_check CHECK (pending_key IS NULL OR pending_key <> key) NOT VALID,
    -- Only a completing row holds a completion lease, and it always holds one.
    ADD CONSTRAINT uploaded_file_completion_lease_check CHECK ((status = 'completing') = (completion_lease_until IS NOT NULL)) NOT VALID,
    -- A ready row carries no upload marker: it is either visible or being deleted.
    ADD CONSTRAINT uploaded_file_ready_no_upload_marker_check CHECK (status <> 'ready' OR upload_pending_at IS NULL) NOT VALID,
    -- A direct upload's cleanup lease never ends before its upload target does.
    ADD CONSTRAINT uploaded_file_cleanup_after_upload_check CHECK (upload_expires_at IS NULL OR upload_pending_at IS NULL OR upload_pending_at >= upload_expires_at) NOT VALID,
    -- Staging cleanup only concerns a ready row that still has its staging key.
    ADD CONSTRAINT uploaded_file_staging_cleanup_check CHECK (staging_cleanup_at IS NULL OR (status = 'ready' AND pending_key IS NOT NULL)) NOT VALID;

COMMENT ON COLUMN uploaded_file.status IS 'Direct-lifecycle state: pending (initiated or hidden buffer upload), completing (a completion lease is held), ready, failed (verification refused; cleanup claimed). Legacy rows are ready.';
COMMENT ON COLUMN uploaded_file.pending_key IS 'Private staging key the client writes during a direct upload; distinct from key. Cleared on local promotion; on S3 kept until the staging sweep deletes the staging object.';
COMMENT ON COLUMN uploaded_file.checksum IS 'Checksum declared at initiation (sha256:<base64>); the staging object must match it.';
COMMENT ON COLUMN uploaded_file.etag IS 'Object version tag: the staging object version verified by the completion claim, then the version of the final object.';
COMMENT ON COLUMN uploaded_file.disposition IS 'inline or attachment: Content-Disposition type for downloads.';
COMMENT ON COLUMN uploaded_file.completed_at IS 'When the upload became ready (database clock); expired_at of a temporary file is completed_at plus 24 hours.';
COMMENT ON COLUMN uploaded_file.upload_expires_at IS 'Direct uploads: end of the upload target lifetime (uploadUrlTtlSeconds); completion is refused after it.';
COMMENT ON COLUMN uploaded_file.completion_lease_until IS 'Completion lease held while status is completing; another instance may take the row over once it has passed.';
COMMENT ON COLUMN uploaded_file.staging_cleanup_at IS 'S3 direct uploads: when the staging sweep may delete the retained staging object (a future value is a claim or a retry marker).';

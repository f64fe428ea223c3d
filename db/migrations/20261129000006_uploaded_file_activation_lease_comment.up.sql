-- Restates upload_pending_at's comment: a buffer upload's activation lease
-- is now 30 seconds, extended by its writer while it scans and stores the
-- bytes (FileExtendActivation), no longer a fixed 15 minutes. A comment
-- changes no statement's result: binaries from the release before run on
-- it.

SET LOCAL lock_timeout = '1s';

COMMENT ON COLUMN uploaded_file.upload_pending_at IS 'Upload marker. Buffer uploads: a future activation lease (30 s, extended by its writer while it scans and stores the bytes), cleared by the activation CAS; once past, an upload tombstone. Direct uploads: the in-flight cleanup lease after which the pending sweep may reclaim the row. NULL for active rows.';

INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES (20261129000006, 20261128000001)
ON CONFLICT (version) DO NOTHING;

-- The comment as it was.

SET LOCAL lock_timeout = '1s';

COMMENT ON COLUMN uploaded_file.upload_pending_at IS 'Upload marker. Buffer uploads: a future 15-minute activation lease, cleared by the activation CAS; once past, an upload tombstone. Direct uploads: the in-flight cleanup lease after which the pending sweep may reclaim the row. NULL for active rows.';

DELETE FROM uploaded_file_schema_compat WHERE version = 20261129000006;

-- Reverts reconcile: claims still in the table are orphans a repair did not
-- finish; run the pending sweep to completion before migrating down.
DROP TABLE IF EXISTS uploaded_file_orphan_claim;
DROP INDEX IF EXISTS uploaded_file_pending_key_bytes_idx;
DROP INDEX IF EXISTS uploaded_file_key_bytes_idx;

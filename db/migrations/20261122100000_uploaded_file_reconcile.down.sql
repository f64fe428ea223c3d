-- Reverts reconcile: claims still in the table are orphans a repair did not
-- finish; run the pending sweep to completion before migrating down.
DROP TABLE IF EXISTS uploaded_file_orphan_claim;

-- Reconcile: the store's listing merge-joined with every storage reference
-- the rows hold, in byte order of the keys (S3 lists in UTF-8 binary order,
-- the local walk in the same order), and durable claims for the orphans a
-- repair deletes.

-- The byte-order key indexes the merge reads are built by 20261122100001
-- and 20261122100002.

-- An orphan object a repair is deleting: the claim is written (after
-- checking that no row still owns the key) before the storage delete and
-- removed after it, so a repair killed in between is finished by the pending
-- sweep once the claim's lease has passed.
CREATE TABLE uploaded_file_orphan_claim (
    key text PRIMARY KEY,
    claimed_until timestamptz NOT NULL,
    found_at timestamptz NOT NULL,
    CONSTRAINT uploaded_file_orphan_claim_key_length_check CHECK (char_length(key) BETWEEN 1 AND 1024)
);

COMMENT ON TABLE uploaded_file_orphan_claim IS 'Objects no row owns that a reconcile repair is deleting (durable claims: written before the storage delete, removed after it).';
COMMENT ON COLUMN uploaded_file_orphan_claim.key IS 'The storage key of the orphan object.';
COMMENT ON COLUMN uploaded_file_orphan_claim.claimed_until IS 'Lease of the repair deleting it; once passed, the pending sweep deletes the object and removes the claim (a retry marker after a failed delete).';
COMMENT ON COLUMN uploaded_file_orphan_claim.found_at IS 'When the reconcile that claimed it found the orphan.';

CREATE INDEX uploaded_file_orphan_claim_until_idx ON uploaded_file_orphan_claim (claimed_until);

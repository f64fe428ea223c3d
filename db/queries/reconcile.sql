-- Reconcile: what the rows say the store holds, read in the store's listing
-- order, and the durable claims of the orphans a repair deletes.
--
--   ReconcileReferencesFrom   every storage reference, in byte order
--   OrphanClaim               (none)            -> claimed (no row owns the key)
--   OrphanSettle              claimed           -> (none), after the delete
--   OrphanRelease             claimed           -> retry marker, after a failed delete
--   OrphanClaimElapsed        lease elapsed     -> claimed again (the pending sweep)
--
-- A row owns its final key until its deletion is settled (deleted_at set,
-- no deletion claim, no upload marker -- an upload tombstone keeps owning
-- it), and its staging key likewise, or for as long as the staging sweep
-- still has to remove it (staging_cleanup_at set); a variant row owns its
-- key for as long as it exists, and a chunk row of a resumable upload its
-- key likewise. A key no row owns is an orphan; a repair
-- claims it here before the storage delete.

-- name: ReconcileReferencesFrom :many
-- One page of every storage reference at or after @start_key in byte order
-- (COLLATE "C", the order S3 lists keys in): final keys and staging keys,
-- each read from its byte-order index (a merge of two bounded index scans),
-- with whether the row still owns the key and, for a final key, whether the
-- file is visible (and so must have its object). Keys are unique across
-- both columns, so the caller pages on: @start_key = the last ref read, dropping
-- it from the next page.
SELECT refs.ref::text AS ref, refs.id, refs.staging::boolean AS staging, refs.owned::boolean AS owned,
    refs.visible::boolean AS visible, refs.size_bytes, refs.checksum, refs.updated_at
FROM (
    (SELECT key COLLATE "C" AS ref, id, false AS staging,
        NOT (deleted_at IS NOT NULL AND deletion_pending_at IS NULL AND upload_pending_at IS NULL) AS owned,
        (status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL) AS visible,
        size_bytes, checksum, updated_at
    FROM uploaded_file
    WHERE key COLLATE "C" >= @start_key::text
    ORDER BY key COLLATE "C"
    LIMIT @max::integer)
    UNION ALL
    (SELECT pending_key COLLATE "C" AS ref, id, true AS staging,
        (NOT (deleted_at IS NOT NULL AND deletion_pending_at IS NULL AND upload_pending_at IS NULL)
            OR staging_cleanup_at IS NOT NULL) AS owned,
        false AS visible,
        size_bytes, checksum, updated_at
    FROM uploaded_file
    WHERE pending_key IS NOT NULL AND pending_key COLLATE "C" >= @start_key::text
    ORDER BY pending_key COLLATE "C"
    LIMIT @max::integer)
    UNION ALL
    -- Image variants: a variant row owns its key in every state (it goes
    -- only after its object is deleted); a ready one must have its object.
    (SELECT key COLLATE "C" AS ref, file_id AS id, false AS staging, true AS owned,
        (status = 'ready') AS visible,
        coalesce(size_bytes, 0) AS size_bytes, NULL::text AS checksum, updated_at
    FROM uploaded_file_variant
    WHERE key COLLATE "C" >= @start_key::text
    ORDER BY key COLLATE "C"
    LIMIT @max::integer)
    UNION ALL
    -- Chunks of resumable uploads: a chunk row owns its key in every state
    -- (it goes only after its object is deleted); none is a visible file.
    (SELECT key COLLATE "C" AS ref, file_id AS id, true AS staging, true AS owned,
        false AS visible,
        coalesce(size_bytes, 0) AS size_bytes, NULL::text AS checksum, created_at AS updated_at
    FROM uploaded_file_chunk
    WHERE key COLLATE "C" >= @start_key::text
    ORDER BY key COLLATE "C"
    LIMIT @max::integer)
) AS refs
ORDER BY refs.ref COLLATE "C"
LIMIT @max::integer;

-- name: DatabaseNow :one
-- The database clock: a reconcile reports a visible file as missing only
-- when it was visible before this instant (a file activated while the
-- listing ran is not missing).
SELECT now()::timestamptz AS now;

-- name: OrphanIsClaimed :one
-- Whether a repair already holds a claim on @key (a reconcile reports such
-- an object as being repaired, not as a new orphan).
SELECT EXISTS (SELECT 1 FROM uploaded_file_orphan_claim WHERE key = @key::text)::boolean AS claimed;

-- name: OrphanClaim :one
-- (none) -> claimed for @lease, only while no row owns @key as its final or
-- its staging key, nor a variant or chunk row its key (re-checked here, in the statement that writes the claim,
-- whatever the listing saw). Keys are generated per row and never reused, so
-- once no row owns a key none ever will. Zero rows: a row owns the key, or
-- another repair holds its claim.
INSERT INTO uploaded_file_orphan_claim (key, claimed_until, found_at)
SELECT @key::text,
    coalesce(sqlc.narg('now')::timestamptz, now()) + @lease::interval,
    coalesce(sqlc.narg('now')::timestamptz, now())
WHERE NOT EXISTS (
        SELECT 1 FROM uploaded_file
        WHERE key = @key::text
            AND NOT (deleted_at IS NOT NULL AND deletion_pending_at IS NULL AND upload_pending_at IS NULL))
    AND NOT EXISTS (
        SELECT 1 FROM uploaded_file
        WHERE pending_key = @key::text
            AND (NOT (deleted_at IS NOT NULL AND deletion_pending_at IS NULL AND upload_pending_at IS NULL)
                OR staging_cleanup_at IS NOT NULL))
    AND NOT EXISTS (SELECT 1 FROM uploaded_file_variant WHERE key = @key::text)
    AND NOT EXISTS (SELECT 1 FROM uploaded_file_chunk WHERE key = @key::text)
ON CONFLICT (key) DO NOTHING
RETURNING *;

-- name: OrphanSettle :one
-- claimed -> (none), once the object is deleted, by the holder of exactly
-- @claim. Zero rows: the claim was taken over; its holder settles it.
DELETE FROM uploaded_file_orphan_claim
WHERE key = @key::text
    AND claimed_until = @claim::timestamptz
RETURNING *;

-- name: OrphanRelease :one
-- claimed -> retry @backoff ahead, after the storage delete failed, by the
-- holder of exactly @claim. Zero rows: the claim was taken over.
UPDATE uploaded_file_orphan_claim
SET claimed_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @backoff::interval
WHERE key = @key::text
    AND claimed_until = @claim::timestamptz
RETURNING *;

-- name: OrphanClaimElapsed :many
-- Orphan claims whose lease or retry marker has passed (the repair died or
-- its delete failed) -> claimed again by this worker, oldest first, with FOR
-- UPDATE SKIP LOCKED so replicas take disjoint claims.
WITH candidate AS (
    SELECT key, claimed_until
    FROM uploaded_file_orphan_claim
    WHERE claimed_until <= coalesce(sqlc.narg('now')::timestamptz, now())
    ORDER BY claimed_until, key
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE uploaded_file_orphan_claim
SET claimed_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @lease::interval
FROM candidate
WHERE uploaded_file_orphan_claim.key = candidate.key
    AND uploaded_file_orphan_claim.claimed_until = candidate.claimed_until
RETURNING uploaded_file_orphan_claim.*;

-- The resumable upload lifecycle (the tus protocol): a pending direct-
-- lifecycle row (FileInsertPending with a resumable offset of 0) receives
-- its bytes in chunks, each written by one request holding the write lease
-- and stored as its own object; the chunk that ends the file streams, after
-- the stored ones, into the row's staging object, whose checksum and
-- version the completion's claim records, and the direct upload's
-- completion takes over.
--
--   FileClaimResumableWrite   pending, offset as asked, no live lease
--                                              -> pending (write lease), the
--                                              chunks at or past the offset
--                                              given up
--   FileExtendResumableWrite  pending (lease)  -> pending (lease moved on)
--   ChunkTrim                 live chunks at or past the offset (a write
--                                              that died, a last chunk whose
--                                              completion did not end, all
--                                              once the upload is over)
--                                              -> given up
--   ChunkBegin                (none)           -> live chunk row, before its
--                                              object
--   ChunkClaimStale           given up an hour ago, or live an hour after
--                                              the upload ended -> claimed
--   ChunkDrop                 claimed          -> (none), after its object
--   FileAdvanceResumable      pending (lease)  -> pending at offset + size,
--                                              lease released, chunk sized
--   ChunkList                 the sized chunks of a file, in offset order
--   FileClaimResumableCompletion pending (lease) -> completing, with the
--                                              assembled staging object's
--                                              checksum and version
--   FileReleaseResumableWrite pending (lease)  -> pending, no lease
--
-- The write lease is matched by its exact value, so a writer whose lease
-- ran out (it stalled, or died and the client came back) can no longer
-- advance the offset: its chunk is given up by the next writer. A chunk row
-- exists from before its object is written until an hour after it was
-- given up and its object deleted -- once more then, for a writer that
-- stalled -- so the store never holds a chunk no row points to.

-- name: FileClaimResumableWrite :one
-- pending at exactly @at_offset, with no write lease in force -> the write
-- lease until now + @lease, for the caller within the scope, before the
-- upload expires; in the same statement the live chunks at or past the
-- offset are given up (ChunkTrim's transition: a write that died before it
-- advanced the offset, a last chunk whose completion did not end), and
-- their keys returned for the caller to delete. Zero rows: missing, out of
-- scope, no longer pending, another offset, expired, or another request is
-- writing (the caller reads the row again to tell which).
WITH claimed AS (
    UPDATE uploaded_file
    SET
        resumable_lease_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @lease::interval
    WHERE uploaded_file.id = @id
        AND uploaded_file.tenant_code = @tenant_code
        AND (sqlc.narg('department_code')::text IS NULL OR uploaded_file.department_code = sqlc.narg('department_code')::text)
        AND (sqlc.narg('owner_user_id')::text IS NULL OR uploaded_file.user_id = sqlc.narg('owner_user_id')::text)
        AND uploaded_file.status = 'pending'
        AND uploaded_file.resumable_offset = @at_offset::bigint
        AND uploaded_file.upload_expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
        AND (uploaded_file.resumable_lease_until IS NULL
            OR uploaded_file.resumable_lease_until <= coalesce(sqlc.narg('now')::timestamptz, now()))
        AND uploaded_file.deletion_pending_at IS NULL
        AND uploaded_file.deleted_at IS NULL
    RETURNING uploaded_file.id, uploaded_file.resumable_lease_until
), trimmed AS (
    UPDATE uploaded_file_chunk
    SET trimmed_at = coalesce(sqlc.narg('now')::timestamptz, now())
    FROM claimed
    WHERE uploaded_file_chunk.file_id = claimed.id
        AND uploaded_file_chunk.start_offset >= @at_offset::bigint
        AND uploaded_file_chunk.trimmed_at IS NULL
    RETURNING uploaded_file_chunk.key
)
SELECT claimed.resumable_lease_until::timestamptz AS lease,
    coalesce((SELECT array_agg(trimmed.key) FROM trimmed), '{}')::text[] AS trimmed_keys
FROM claimed;

-- name: FileExtendResumableWrite :one
-- The write lease moved on to now + @lease by the holder of exactly
-- @claim while its chunk streams in. Zero rows: the lease was taken over
-- or the row left pending.
UPDATE uploaded_file
SET
    resumable_lease_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @lease::interval
WHERE id = @id
    AND status = 'pending'
    AND resumable_lease_until = @claim::timestamptz
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
RETURNING resumable_lease_until::timestamptz AS lease;

-- name: FileReleaseResumableWrite :one
-- The write lease given back by the holder of exactly @claim without
-- moving the offset (a chunk that failed its checksum, a write that stored
-- nothing, a completion that ended without a verdict). Zero rows: the
-- lease was taken over or the row left pending.
UPDATE uploaded_file
SET resumable_lease_until = NULL
WHERE id = @id
    AND status = 'pending'
    AND resumable_lease_until = @claim::timestamptz
RETURNING id;

-- name: ChunkTrim :many
-- The live chunks of @file_id at or past @at_offset -> given up (trimmed):
-- written by a request that died before it advanced the offset, a last
-- chunk whose completion did not end, or every chunk once the upload is
-- over. The caller deletes their objects; the rows stay, owning their
-- keys, until the chunk sweep deletes each object once more and removes
-- the row (ChunkClaimStale): a stalled writer may still write one.
UPDATE uploaded_file_chunk
SET trimmed_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE file_id = @file_id
    AND start_offset >= @at_offset::bigint
    AND trimmed_at IS NULL
RETURNING *;

-- name: ChunkBegin :one
-- A chunk row at @start_offset, written before its object (by the holder
-- of the file's write lease, after ChunkTrim gave up what was at or past
-- the offset), while the file keeps fewer than @max_chunks chunk rows,
-- given up or not. Zero rows: it keeps that many. Fails on a live chunk
-- at the same offset, or a duplicate key.
INSERT INTO uploaded_file_chunk (key, file_id, start_offset, created_at)
SELECT @key, @file_id, @start_offset, coalesce(sqlc.narg('now')::timestamptz, now())
WHERE (SELECT count(*) FROM uploaded_file_chunk WHERE file_id = @file_id) < @max_chunks::integer
RETURNING *;

-- name: ChunkDrop :one
-- (chunk row) -> (none), after its object is deleted, by the chunk sweep
-- that claimed it at exactly @claim. Zero rows: it was dropped already,
-- or claimed again.
DELETE FROM uploaded_file_chunk
WHERE key = @key
    AND trimmed_at = @claim::timestamptz
RETURNING *;

-- name: FileAdvanceResumable :one
-- pending at @at_offset with the write lease @claim -> pending at
-- @new_offset (@at_offset + @size), the lease released, and the chunk at @at_offset sized, in one
-- statement. Zero rows: the lease was lost (its chunk is trimmed by the
-- next writer).
WITH advanced AS (
    UPDATE uploaded_file
    SET
        resumable_offset = @new_offset::bigint,
        resumable_lease_until = NULL,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE uploaded_file.id = @id
        AND uploaded_file.status = 'pending'
        AND uploaded_file.resumable_offset = @at_offset::bigint
        AND uploaded_file.resumable_lease_until = @claim::timestamptz
        AND uploaded_file.deletion_pending_at IS NULL
        AND uploaded_file.deleted_at IS NULL
    RETURNING uploaded_file.id
)
UPDATE uploaded_file_chunk
SET size_bytes = @size::bigint
FROM advanced
WHERE uploaded_file_chunk.file_id = advanced.id
    AND uploaded_file_chunk.start_offset = @at_offset::bigint
    AND uploaded_file_chunk.trimmed_at IS NULL
RETURNING uploaded_file_chunk.file_id;

-- name: ChunkList :many
-- The live, sized chunks of @file_id in offset order: what the assembly
-- reads.
SELECT *
FROM uploaded_file_chunk
WHERE file_id = @file_id
    AND size_bytes IS NOT NULL
    AND trimmed_at IS NULL
ORDER BY start_offset;

-- name: FileClaimResumableCompletion :one
-- pending (write lease @claim) -> completing, once the chunks are
-- assembled into the staging object: the assembled object's checksum and
-- version (@etag) recorded, and a completion lease taken (with the cleanup
-- lease pushed past it), as FileClaimCompletion does for a direct upload;
-- the completion verifies the staging object against them. Zero rows: the
-- write lease was lost, the upload expired or was aborted.
UPDATE uploaded_file
SET
    status = 'completing',
    checksum = @checksum::text,
    etag = @etag,
    completion_lease_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @completion_lease::interval,
    upload_pending_at = greatest(upload_pending_at, coalesce(sqlc.narg('now')::timestamptz, now()) + @completion_lease::interval),
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = @id
    AND status = 'pending'
    AND resumable_lease_until = @claim::timestamptz
    AND upload_expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
RETURNING *;

-- name: ChunkClaimStale :many
-- Chunks whose object may be deleted for good and their row removed:
-- given up more than @grace ago, or live but older than @grace while
-- their upload is over (ready, failed, claimed for deletion or deleted, or
-- past its in-flight cleanup lease: a completion that died before it gave
-- them up). No writer still writes any of them (@grace is far beyond a
-- write lease and a body's read bound). Claimed by setting trimmed_at to
-- now, oldest first, with FOR UPDATE SKIP LOCKED, so replicas take
-- disjoint chunks and a claimed chunk is not claimed again for @grace;
-- the caller deletes each object, then its row (ChunkDrop).
WITH given_up AS (
    SELECT uploaded_file_chunk.key
    FROM uploaded_file_chunk
    WHERE uploaded_file_chunk.trimmed_at <= coalesce(sqlc.narg('now')::timestamptz, now()) - @grace::interval
    ORDER BY uploaded_file_chunk.trimmed_at
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED
), outlived AS (
    SELECT uploaded_file_chunk.key
    FROM uploaded_file_chunk
    JOIN uploaded_file ON uploaded_file.id = uploaded_file_chunk.file_id
    WHERE uploaded_file_chunk.trimmed_at IS NULL
        AND uploaded_file_chunk.created_at <= coalesce(sqlc.narg('now')::timestamptz, now()) - @grace::interval
        AND NOT (uploaded_file.status = 'pending'
            AND uploaded_file.deletion_pending_at IS NULL
            AND uploaded_file.deleted_at IS NULL
            AND uploaded_file.upload_pending_at > coalesce(sqlc.narg('now')::timestamptz, now()))
    ORDER BY uploaded_file_chunk.created_at
    LIMIT @max::integer
    FOR UPDATE OF uploaded_file_chunk SKIP LOCKED
), candidate AS (
    SELECT key FROM given_up
    UNION ALL
    SELECT key FROM outlived
    LIMIT @max::integer
)
UPDATE uploaded_file_chunk
SET trimmed_at = coalesce(sqlc.narg('now')::timestamptz, now())
FROM candidate
WHERE uploaded_file_chunk.key = candidate.key
RETURNING uploaded_file_chunk.*;

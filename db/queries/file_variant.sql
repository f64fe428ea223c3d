-- Image variants (uploaded_file_variant): generated once per (file, preset),
-- stored beside the original, deleted with it.
--
--   (none)      -> generating   VariantClaim (or a takeover of an elapsed
--                               generation: same key, new lease)
--   generating  -> ready        VariantFinish (usage + file.variant-ready)
--   generating  -> (none)       VariantDrop, after the generator deleted
--                               its object
--   ready       -> deleting     VariantClaimForFile, by the worker deleting
--                               the file
--   any elapsed -> deleting     VariantClaimElapsed, by the sweep
--   deleting    -> retry        VariantRelease, after a failed delete
--   deleting    -> (none)       VariantSettle, after the object is deleted
--
-- The row exists before its object is written and is removed only after
-- the object is deleted. Every transition after the claim names the exact
-- lease (@claim) its worker holds: zero rows means the row was taken over,
-- and the worker's storage work is someone else's to finish.

-- name: VariantGet :one
-- The variant of @file_id for @preset, in any state (a request waiting for
-- another's generation polls it). Zero rows: none yet.
SELECT *
FROM uploaded_file_variant
WHERE file_id = @file_id
    AND preset = @preset;

-- name: VariantGetVisible :one
-- A visible file by id within the scope (as FileGetVisible), with its
-- variant for @preset when that is ready: a stored variant is served in
-- one round trip. variant_key is NULL when there is none ready yet (the
-- caller then generates or waits). Zero rows: as FileGetVisible.
SELECT
    sqlc.embed(uploaded_file),
    (uploaded_file.expired_at IS NOT NULL
        AND uploaded_file.expired_at <= coalesce(sqlc.narg('now')::timestamptz, now()))::boolean AS expired,
    coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS db_now,
    variant.id AS variant_id,
    variant.key AS variant_key,
    variant.content_type AS variant_content_type,
    variant.width AS variant_width,
    variant.height AS variant_height,
    variant.size_bytes AS variant_size_bytes,
    variant.created_at AS variant_created_at
FROM uploaded_file
LEFT JOIN uploaded_file_variant AS variant
    ON variant.file_id = uploaded_file.id
    AND variant.preset = @preset
    AND variant.status = 'ready'
WHERE uploaded_file.id = @id
    AND uploaded_file.tenant_code = @tenant_code
    AND (sqlc.narg('department_code')::text IS NULL OR uploaded_file.department_code = sqlc.narg('department_code')::text)
    AND (sqlc.narg('owner_user_id')::text IS NULL OR uploaded_file.user_id = sqlc.narg('owner_user_id')::text)
    AND uploaded_file.status = 'ready'
    AND uploaded_file.upload_pending_at IS NULL
    AND uploaded_file.deletion_pending_at IS NULL
    AND uploaded_file.deleted_at IS NULL;

-- name: VariantGetDownload :one
-- What the download of a stored variant needs, in one round trip: the
-- visible file (as FileGetVisible) with the name, type and disposition the
-- response takes from it and whether it has expired, and its ready
-- variant's key and type for @preset -- VariantGetVisible's predicate, not
-- the whole row (a stored variant is served as often as a download).
-- variant_key is NULL when none is ready yet (the caller then takes
-- VariantGetVisible's path, which generates it). Zero rows: as
-- FileGetVisible.
SELECT
    uploaded_file.id,
    uploaded_file.original_name,
    uploaded_file.content_type,
    uploaded_file.disposition,
    (uploaded_file.expired_at IS NOT NULL
        AND uploaded_file.expired_at <= coalesce(sqlc.narg('now')::timestamptz, now()))::boolean AS expired,
    variant.key AS variant_key,
    variant.content_type AS variant_content_type
FROM uploaded_file
LEFT JOIN uploaded_file_variant AS variant
    ON variant.file_id = uploaded_file.id
    AND variant.preset = @preset
    AND variant.status = 'ready'
WHERE uploaded_file.id = @id
    AND uploaded_file.tenant_code = @tenant_code
    AND (sqlc.narg('department_code')::text IS NULL OR uploaded_file.department_code = sqlc.narg('department_code')::text)
    AND (sqlc.narg('owner_user_id')::text IS NULL OR uploaded_file.user_id = sqlc.narg('owner_user_id')::text)
    AND uploaded_file.status = 'ready'
    AND uploaded_file.upload_pending_at IS NULL
    AND uploaded_file.deletion_pending_at IS NULL
    AND uploaded_file.deleted_at IS NULL;

-- name: VariantClaim :one
-- (none) -> generating, with the key the object will be written at and a
-- lease, for a file that is still visible (its row is share-locked, so a
-- deletion claim waits for this insert and then finds the row). A
-- generation whose lease elapsed is taken over: new lease, same key.
-- Zero rows: the file is not visible any more, another generator holds a
-- live lease, or the variant is ready or being deleted.
INSERT INTO uploaded_file_variant AS variant (id, file_id, preset, key, status, content_type, lease_until, created_at, updated_at)
SELECT
    @id,
    uploaded_file.id,
    @preset,
    @key,
    'generating',
    @content_type,
    coalesce(sqlc.narg('now')::timestamptz, now()) + @lease::interval,
    coalesce(sqlc.narg('now')::timestamptz, now()),
    coalesce(sqlc.narg('now')::timestamptz, now())
FROM uploaded_file
WHERE uploaded_file.id = @file_id
    AND uploaded_file.status = 'ready'
    AND uploaded_file.upload_pending_at IS NULL
    AND uploaded_file.deletion_pending_at IS NULL
    AND uploaded_file.deleted_at IS NULL
FOR SHARE OF uploaded_file
ON CONFLICT (file_id, preset) DO UPDATE
SET
    lease_until = excluded.lease_until,
    content_type = excluded.content_type,
    updated_at = excluded.updated_at
WHERE variant.status = 'generating'
    AND variant.lease_until <= excluded.updated_at
RETURNING *;

-- name: VariantFinish :one
-- generating -> ready, by the holder of @claim, while the file is still
-- visible (share-locked against a concurrent deletion claim). Adds the
-- variant's bytes (no file) to the owner's and the tenant's usage in the
-- same statement and fails with SQLSTATE UFQ01 when either would pass its
-- bytes limit. Writes file.variant-ready: the file's event data with the
-- variant beside it. Zero rows: the lease was taken over or the file is
-- gone; the generator deletes its object and drops the row.
WITH file AS (
    SELECT *
    FROM uploaded_file
    WHERE uploaded_file.id = @file_id
        AND uploaded_file.status = 'ready'
        AND uploaded_file.upload_pending_at IS NULL
        AND uploaded_file.deletion_pending_at IS NULL
        AND uploaded_file.deleted_at IS NULL
    FOR SHARE
), changed AS (
    UPDATE uploaded_file_variant
    SET
        status = 'ready',
        size_bytes = @size_bytes::bigint,
        width = @width::integer,
        height = @height::integer,
        lease_until = NULL,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    FROM file
    WHERE uploaded_file_variant.id = @id
        AND uploaded_file_variant.file_id = file.id
        AND uploaded_file_variant.status = 'generating'
        AND uploaded_file_variant.lease_until = @claim::timestamptz
    RETURNING uploaded_file_variant.*
), limits AS (
    SELECT
        coalesce(uploaded_file_quota.tenant_bytes, @default_tenant_bytes::bigint) AS tenant_bytes,
        coalesce(uploaded_file_quota.owner_bytes, @default_owner_bytes::bigint) AS owner_bytes
    FROM file
    LEFT JOIN uploaded_file_quota ON uploaded_file_quota.tenant_code = file.tenant_code
), reserved AS (
    -- As an upload's reservation, for bytes only, and only once the
    -- variant is this worker's to finish.
    INSERT INTO uploaded_file_usage AS usage (tenant_code, user_id, bytes, files)
    SELECT file.tenant_code, holder.user_id, changed.size_bytes, 0
    FROM changed, file, limits, (SELECT '' AS user_id UNION ALL SELECT file.user_id FROM file) AS holder
    WHERE CASE WHEN holder.user_id = ''
        THEN limits.tenant_bytes = 0 OR changed.size_bytes <= limits.tenant_bytes
        ELSE limits.owner_bytes = 0 OR changed.size_bytes <= limits.owner_bytes
        END
    ORDER BY holder.user_id COLLATE "C"
    ON CONFLICT (tenant_code, user_id) DO UPDATE
    SET bytes = usage.bytes + excluded.bytes
    WHERE CASE WHEN usage.user_id = ''
        THEN (SELECT limits.tenant_bytes FROM limits) = 0 OR usage.bytes + excluded.bytes <= (SELECT limits.tenant_bytes FROM limits)
        ELSE (SELECT limits.owner_bytes FROM limits) = 0 OR usage.bytes + excluded.bytes <= (SELECT limits.owner_bytes FROM limits)
        END
    RETURNING usage.user_id
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'file.variant-ready', file.tenant_code, file.id, changed.updated_at, NULL,
        uploaded_file_event_data(to_jsonb(file)) || jsonb_build_object('variant', jsonb_build_object(
            'preset', changed.preset,
            'contentType', changed.content_type,
            'sizeBytes', changed.size_bytes,
            'width', changed.width,
            'height', changed.height))
    FROM changed, file
)
SELECT changed.*
FROM changed
WHERE CASE WHEN (SELECT count(*) FROM reserved) = 2 THEN true ELSE uploaded_file_quota_exceeded() END;

-- name: VariantDrop :one
-- generating -> (none), by the holder of @claim, after it deleted its
-- object (the file went away, the quota refused the bytes, or generation
-- failed after a write). Nothing was counted. Zero rows: taken over.
DELETE FROM uploaded_file_variant
WHERE id = @id
    AND status = 'generating'
    AND lease_until = @claim::timestamptz
RETURNING *;

-- name: VariantClaimForFile :many
-- The variants of a file whose deletion this worker holds -> deleting:
-- ready ones, and any whose lease elapsed. A generation under a live lease
-- is left to its generator, whose finish now fails (the file is not
-- visible), or, should it die, to the sweep once its lease elapses.
UPDATE uploaded_file_variant
SET
    status = 'deleting',
    lease_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @lease::interval,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE file_id = @file_id
    AND (status = 'ready' OR lease_until <= coalesce(sqlc.narg('now')::timestamptz, now()))
RETURNING *;

-- name: VariantClaimElapsed :many
-- Variants whose lease elapsed (a generator or a deleter died, or a delete
-- failed and its retry marker passed) -> deleting, oldest first, with FOR
-- UPDATE SKIP LOCKED so replicas take disjoint rows. A generation of a
-- still-visible file is deleted too: the next request generates it again.
WITH candidate AS (
    SELECT uploaded_file_variant.id, uploaded_file_variant.lease_until
    FROM uploaded_file_variant
    WHERE uploaded_file_variant.lease_until <= coalesce(sqlc.narg('now')::timestamptz, now())
    ORDER BY uploaded_file_variant.lease_until, uploaded_file_variant.id
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE uploaded_file_variant
SET
    status = 'deleting',
    lease_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @lease::interval,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
FROM candidate
WHERE uploaded_file_variant.id = candidate.id
    AND uploaded_file_variant.lease_until = candidate.lease_until
RETURNING uploaded_file_variant.*;

-- name: VariantRelease :one
-- deleting -> retry marker @backoff ahead, after its storage delete
-- failed, by the holder of @claim. Zero rows: taken over.
UPDATE uploaded_file_variant
SET
    lease_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @backoff::interval,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = @id
    AND status = 'deleting'
    AND lease_until = @claim::timestamptz
RETURNING *;

-- name: VariantSettle :one
-- deleting -> (none), once its object is deleted, by the holder of
-- @claim. Bytes that were counted (a variant that was ready) leave the
-- owner's and the tenant's usage, never below zero. Zero rows: taken over;
-- its new holder settles it.
WITH gone AS (
    DELETE FROM uploaded_file_variant
    WHERE uploaded_file_variant.id = @id
        AND uploaded_file_variant.status = 'deleting'
        AND uploaded_file_variant.lease_until = @claim::timestamptz
    RETURNING *
), released AS (
    -- The space the rows held goes back to their owners and tenants
    -- (uploaded_file_usage_release); the final SELECT reads this CTE,
    -- so it runs.
    SELECT uploaded_file_usage_release(array_agg(uploaded_file.tenant_code), array_agg(uploaded_file.user_id), array_agg(gone.size_bytes), 0) AS usage_rows
    FROM gone
    JOIN uploaded_file ON uploaded_file.id = gone.file_id
    WHERE gone.size_bytes IS NOT NULL
)
SELECT gone.* FROM gone CROSS JOIN released;

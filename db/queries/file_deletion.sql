-- Durable deletion: claim, then storage I/O, then settle. Each transition
-- writes its lifecycle event in the same statement (uploaded_file_event).
--
--   claim       deletion_pending_at = now + lease, before any storage I/O
--   release     deletion_pending_at = now + backoff (one minute): a retry marker
--   settle      deleted_at = now, deletion_pending_at = NULL, upload marker cleared
--   reschedule  deleted_at = now, deletion_pending_at = now + backoff, upload
--               marker kept: an upload tombstone whose writer may still write
--
-- release, settle and reschedule name the exact claim (@claim) the worker
-- set: a worker whose claim was taken over matches zero rows and must treat
-- its storage work as done by someone else. Storage deletes are idempotent,
-- so two workers deleting the same object is harmless; what the claim
-- prevents is metadata coming back, or disappearing, without its bytes.

-- name: FileClaimDeletion :one
-- visible -> claimed for deletion, by id within the scope (deleteById of a
-- ready file). Zero rows: missing, out of scope, hidden or already deleted.
-- Writes file.deleted.
WITH changed AS (
    UPDATE uploaded_file
    SET
        deletion_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @deletion_lease::interval,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE uploaded_file.id = @id
        AND uploaded_file.tenant_code = @tenant_code
        AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
        AND (sqlc.narg('owner_user_id')::text IS NULL OR user_id = sqlc.narg('owner_user_id')::text)
        AND status = 'ready'
        AND upload_pending_at IS NULL
        AND deletion_pending_at IS NULL
        AND deleted_at IS NULL
    RETURNING *
), released AS (
    -- The space the rows held goes back to their owners and tenants
    -- (uploaded_file_usage_release); the final SELECT reads this CTE,
    -- so it runs.
    SELECT uploaded_file_usage_release(array_agg(changed.tenant_code), array_agg(changed.user_id), array_agg(changed.size_bytes), 1) AS usage_rows
    FROM changed
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'file.deleted', changed.tenant_code, changed.id, changed.updated_at, NULL, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
)
SELECT changed.* FROM changed CROSS JOIN released;

-- name: FileClaimDeletionByReferences :many
-- visible -> claimed for deletion, for every exact reference (key or cdn) in
-- @references within the scope (delete, changeFiles). Run in a transaction
-- after FileLockVisibleByReferences has confirmed every reference, so a batch
-- is claimed whole or not at all. Each claimed file gets file.deleted, after
-- file.detached when @detach (changeFiles drops it from its record).
WITH changed AS (
    UPDATE uploaded_file
    SET
        deletion_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @deletion_lease::interval,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE (uploaded_file.key = any(@refs::text[]) OR uploaded_file.cdn = any(@refs::text[]))
        AND uploaded_file.tenant_code = @tenant_code
        AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
        AND (sqlc.narg('owner_user_id')::text IS NULL OR user_id = sqlc.narg('owner_user_id')::text)
        AND status = 'ready'
        AND upload_pending_at IS NULL
        AND deletion_pending_at IS NULL
        AND deleted_at IS NULL
    RETURNING *
), released AS (
    -- The space the rows held goes back to their owners and tenants
    -- (uploaded_file_usage_release); the final SELECT reads this CTE,
    -- so it runs.
    SELECT uploaded_file_usage_release(array_agg(changed.tenant_code), array_agg(changed.user_id), array_agg(changed.size_bytes), 1) AS usage_rows
    FROM changed
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT kind.type, changed.tenant_code, changed.id, changed.updated_at, NULL, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
    CROSS JOIN (VALUES (1, 'file.detached'), (2, 'file.deleted')) AS kind (n, type)
    WHERE kind.type = 'file.deleted' OR @detach::boolean
    ORDER BY changed.id, kind.n
)
SELECT changed.* FROM changed CROSS JOIN released;

-- name: FileClaimAbort :one
-- A direct upload not yet completing (pending, or failed before its claim was
-- set) -> claimed for deletion, by id within the scope (abortUpload, or
-- deleteById of a pending file). The upload marker is kept: while the target
-- is valid the client may still write the staging object, so after the bytes
-- are deleted the row is rescheduled as a tombstone until the window closes.
-- Zero rows: missing, out of scope, completing or finished.
-- Writes upload.abandoned.
WITH changed AS (
    UPDATE uploaded_file
    SET
        deletion_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @deletion_lease::interval,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE uploaded_file.id = @id
        AND uploaded_file.tenant_code = @tenant_code
        AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
        AND (sqlc.narg('owner_user_id')::text IS NULL OR user_id = sqlc.narg('owner_user_id')::text)
        AND upload_expires_at IS NOT NULL
        AND status = 'pending'
        AND deletion_pending_at IS NULL
        AND deleted_at IS NULL
    RETURNING *
), released AS (
    -- The space the rows held goes back to their owners and tenants
    -- (uploaded_file_usage_release); the final SELECT reads this CTE,
    -- so it runs.
    SELECT uploaded_file_usage_release(array_agg(changed.tenant_code), array_agg(changed.user_id), array_agg(changed.size_bytes), 1) AS usage_rows
    FROM changed
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'upload.abandoned', changed.tenant_code, changed.id, changed.updated_at, NULL, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
)
SELECT changed.* FROM changed CROSS JOIN released;

-- name: FileReleaseDeletion :one
-- claimed -> retry marker @backoff ahead (one minute), after a storage or
-- finalization failure. The backoff moves the row out of the eligible window
-- so a bounded sweep moves on to later rows instead of failing on the same
-- object again. Zero rows: the claim was taken over; nothing to release.
UPDATE uploaded_file
SET
    deletion_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @backoff::interval,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = @id
    AND deletion_pending_at = @claim::timestamptz
RETURNING *;

-- name: FileSettleDeletion :one
-- claimed -> deleted, once every object of the row is gone: soft-delete (the
-- first soft-delete time is kept) and clear the claim and the upload marker
-- (@upload_marker, as claimed, possibly NULL). Zero rows: the claim was taken
-- over by another worker, which settles it instead.
-- Writes file.purged for a row that was ready (an upload that never was has
-- nothing to purge in anyone's eyes).
WITH changed AS (
    UPDATE uploaded_file
    SET
        deleted_at = coalesce(deleted_at, coalesce(sqlc.narg('now')::timestamptz, now())),
        deletion_pending_at = NULL,
        upload_pending_at = NULL,
        completion_lease_until = NULL,
        status = CASE WHEN status = 'completing' THEN 'failed' ELSE status END,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE uploaded_file.id = @id
        AND uploaded_file.deletion_pending_at = @claim::timestamptz
        AND uploaded_file.upload_pending_at IS NOT DISTINCT FROM sqlc.narg('upload_marker')::timestamptz
    RETURNING *
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'file.purged', changed.tenant_code, changed.id, changed.updated_at, NULL, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
    WHERE changed.status = 'ready'
)
SELECT * FROM changed;

-- name: FileRescheduleTombstone :one
-- claimed upload tombstone -> soft-deleted tombstone with a future deletion
-- claim (@backoff ahead) and the same upload marker, after its objects were
-- deleted while a writer could still write one (a buffer upload whose writer
-- never reported back, or a direct upload whose target is still valid). A
-- later sweep claims it again, restores it to hidden pending, deletes and
-- reschedules. Zero rows: the claim was taken over (the writer came back).
UPDATE uploaded_file
SET
    deleted_at = coalesce(deleted_at, coalesce(sqlc.narg('now')::timestamptz, now())),
    deletion_pending_at = greatest(
        coalesce(sqlc.narg('now')::timestamptz, now()) + @backoff::interval,
        sqlc.narg('not_before')::timestamptz),
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = @id
    AND deletion_pending_at = @claim::timestamptz
    AND upload_pending_at = @upload_marker::timestamptz
RETURNING *;

-- name: FileDeletedSince :one
-- Whether the file @id, within the scope, was deleted or its upload
-- abandoned at or after @since (its file.deleted or upload.abandoned
-- event): a delete retried under an Idempotency-Key whose first try died
-- after committing is answered as that try would have been, not 404.
-- Reads the file's events through uploaded_file_event_file_idx.
SELECT EXISTS (
    SELECT 1
    FROM uploaded_file f
    JOIN uploaded_file_event e ON e.file_id = f.id
    WHERE f.id = @id
        AND f.tenant_code = @tenant_code
        AND (sqlc.narg('department_code')::text IS NULL OR f.department_code = sqlc.narg('department_code')::text)
        AND (sqlc.narg('owner_user_id')::text IS NULL OR f.user_id = sqlc.narg('owner_user_id')::text)
        AND e.type IN ('file.deleted', 'upload.abandoned')
        AND e.occurred_at >= @since::timestamptz
)::boolean AS deleted;

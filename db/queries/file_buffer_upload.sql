-- Buffer uploads (legacy and managed): the server receives the bytes itself.
--
--   FileInsertHidden             (none)   -> hidden: upload_pending_at = now + 15 min
--   FileActivateUpload           hidden   -> visible (ready), that exact marker only
--   FileSettleFailedUpload       hidden   -> claimed for deletion, marker cleared
--   FileRestoreUploadForCleanup  taken over by maintenance -> claimed for deletion
--
-- The activation lease is a marker, not only a deadline: the activation and
-- the settled cleanup both name the exact upload_pending_at value the writer
-- inserted, so whichever commits first wins and the other matches zero rows.
--
-- Every transition that changes what a file is (ready, attached, deleted,
-- expired, purged, failed, abandoned) writes its lifecycle event in the same
-- statement, a data-modifying CTE into uploaded_file_event (see
-- event_outbox.sql): the event commits, or rolls back, with the transition.

-- name: FileInsertHidden :one
-- Persists a buffer upload before its bytes are written: status pending and a
-- future activation lease in upload_pending_at, so the row is invisible to
-- every normal read and, should the writer die, the deletion-retry sweep finds
-- it once the lease has expired. Fails on a duplicate id, key or cdn.
INSERT INTO uploaded_file (
    id,
    tenant_code,
    department_code,
    user_id,
    key,
    cdn,
    original_name,
    size_bytes,
    content_type,
    visibility,
    disposition,
    is_temporary,
    checksum,
    extra_data,
    module,
    entity,
    entity_id,
    type,
    status,
    upload_pending_at,
    created_at,
    updated_at
) VALUES (
    @id,
    @tenant_code,
    sqlc.narg('department_code'),
    @user_id,
    @key,
    sqlc.narg('cdn'),
    @original_name,
    @size_bytes,
    @content_type,
    @visibility,
    @disposition,
    @is_temporary,
    sqlc.narg('checksum'),
    @extra_data,
    sqlc.narg('module'),
    sqlc.narg('entity'),
    sqlc.narg('entity_id'),
    sqlc.narg('type'),
    'pending',
    coalesce(sqlc.narg('now')::timestamptz, now()) + @activation_lease::interval,
    coalesce(sqlc.narg('now')::timestamptz, now()),
    coalesce(sqlc.narg('now')::timestamptz, now())
)
RETURNING *;

-- name: FileActivateUpload :one
-- hidden -> ready. Clears exactly the marker the writer inserted, only while
-- no deletion claim exists and the row is not soft-deleted; a temporary file
-- expires 24 elapsed hours after this moment (an interval in hours, so a
-- daylight-saving change never stretches it). @size_bytes and @checksum are
-- what the writer measured while streaming. Zero rows: settled cleanup or
-- maintenance got there first; the writer must not report success.
-- Writes file.ready.
WITH changed AS (
    UPDATE uploaded_file
    SET
        status = 'ready',
        upload_pending_at = NULL,
        size_bytes = @size_bytes,
        checksum = @checksum,
        etag = sqlc.narg('etag'),
        completed_at = coalesce(sqlc.narg('now')::timestamptz, now()),
        expired_at = CASE WHEN is_temporary
            THEN coalesce(sqlc.narg('now')::timestamptz, now()) + interval '24 hours'
            ELSE NULL END,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE uploaded_file.id = @id
        AND status = 'pending'
        AND uploaded_file.upload_pending_at = @upload_marker::timestamptz
        AND deletion_pending_at IS NULL
        AND deleted_at IS NULL
    RETURNING *
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'file.ready', changed.tenant_code, changed.id, changed.updated_at, NULL, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
)
SELECT * FROM changed;

-- name: FileSettleFailedUpload :one
-- hidden -> claimed for deletion, when the write or the activation failed.
-- Atomically clears the exact upload marker and sets a fresh future deletion
-- claim before any storage I/O, so a late activation still expecting the
-- marker matches zero rows and cannot bring the metadata back. Zero rows: the
-- activation committed (its response was lost) or maintenance took the row
-- over; the writer reads FileGetUploadState to tell which.
-- Writes upload.failed (@rule: why, NULL when the service failed to store
-- it).
WITH changed AS (
    UPDATE uploaded_file
    SET
        upload_pending_at = NULL,
        deletion_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @deletion_lease::interval,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE uploaded_file.id = @id
        AND status = 'pending'
        AND uploaded_file.upload_pending_at = @upload_marker::timestamptz
        AND deletion_pending_at IS NULL
        AND deleted_at IS NULL
    RETURNING *
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'upload.failed', changed.tenant_code, changed.id, changed.updated_at, sqlc.narg('rule')::text, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
)
SELECT * FROM changed;

-- name: FileRestoreUploadForCleanup :one
-- A slow writer finishing after maintenance reached its expired upload: it
-- settles the exact current state it read with FileGetUploadState (upload
-- marker, deletion marker, soft-delete marker, each matched including NULL)
-- before deleting the object it wrote. A soft-deleted row is restored to the
-- hidden pending state (deleted_at cleared) holding this writer's deletion
-- claim, and the upload marker is cleared because the writer will write no
-- more: a durable claim exists before the terminal storage I/O. A maintenance
-- worker holding the previous claim then loses its own CAS and skips. Zero
-- rows: the state changed since it was read; read it again.
UPDATE uploaded_file
SET
    upload_pending_at = NULL,
    deletion_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @deletion_lease::interval,
    deleted_at = NULL,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = @id
    AND status = 'pending'
    AND upload_pending_at IS NOT DISTINCT FROM sqlc.narg('upload_marker')::timestamptz
    AND deletion_pending_at IS NOT DISTINCT FROM sqlc.narg('deletion_marker')::timestamptz
    AND deleted_at IS NOT DISTINCT FROM sqlc.narg('deleted_marker')::timestamptz
RETURNING *;

-- The direct upload lifecycle: initiate -> the client writes the staging
-- object -> complete verifies, promotes and finalizes.
--
--   FileInsertPending        (none)              -> pending
--   FileLockPendingContent   pending             -> pending (row share-locked
--                                                  while the local target links
--                                                  the staging object)
--   FileClaimCompletion      pending             -> completing (lease)
--   FileTakeOverCompletion   completing, expired -> completing (new lease)
--   FileExtendCompletion     completing (lease)  -> completing (lease moved on,
--                                                  while the completion runs)
--   FileFinalizeCompletion   completing (lease)  -> ready
--   FileFailCompletion       completing (lease)  -> failed, claimed for deletion
--   FileReleaseCompletion    completing (lease)  -> pending (the scanner was down)
--   FileClaimAbort           pending             -> claimed for deletion (in file_deletion.sql)
--
-- A direct row keeps upload_pending_at set until it is ready: it is the
-- in-flight cleanup lease after which the pending sweep may reclaim it, and it
-- keeps the row out of every visible lookup. The completion lease is matched
-- by its exact value, so a completer whose lease was taken over can no longer
-- finalize or fail the row. The lease is short and a live completer extends
-- it as it works, so the one a killed completer leaves is taken over soon.
--
-- Every transition that changes what a file is (ready, attached, deleted,
-- expired, purged, failed, abandoned) writes its lifecycle event in the same
-- statement, a data-modifying CTE into uploaded_file_event (see
-- event_outbox.sql): the event commits, or rolls back, with the transition.

-- name: FileInsertPending :one
-- Reserves its space (@size_bytes, one file) on the tenant's and the
-- owner's usage in the same statement; when either would pass its limit
-- the statement fails with SQLSTATE UFQ01 (quota exceeded) and nothing is
-- written.
-- Persists a direct upload before its target is returned: status pending, a
-- private staging key distinct from the generated final key, the exact
-- expected size and type, the declared checksum, the upload expiry
-- (now + @upload_ttl) and the in-flight cleanup lease (now + @cleanup_lease,
-- which the service makes longer than the upload TTL: room for a write that
-- started before the expiry to land). Fails on a duplicate id, key or pending
-- key, and on a cleanup lease shorter than the TTL. A resumable upload
-- passes @resumable_offset 0 and no checksum (its assembly records one);
-- every other direct upload, NULL and its declared checksum.
WITH limits AS (
    -- The tenant's limits: its override, else the configured default (0:
    -- unlimited).
    SELECT
        coalesce(uploaded_file_quota.tenant_bytes, @default_tenant_bytes::bigint) AS tenant_bytes,
        coalesce(uploaded_file_quota.tenant_files, @default_tenant_files::bigint) AS tenant_files,
        coalesce(uploaded_file_quota.owner_bytes, @default_owner_bytes::bigint) AS owner_bytes,
        coalesce(uploaded_file_quota.owner_files, @default_owner_files::bigint) AS owner_files
    FROM (SELECT 1) AS one
    LEFT JOIN uploaded_file_quota ON uploaded_file_quota.tenant_code = @tenant_code
), reserved AS (
    -- Adds the row to the tenant's ('') and the owner's usage where it
    -- still fits, creating a usage row at its first reservation. An
    -- existing usage row is locked and checked on its latest version, so
    -- concurrent reservations queue on it and none can pass a limit; rows
    -- are taken in key order, as every statement that changes usage does.
    INSERT INTO uploaded_file_usage AS usage (tenant_code, user_id, bytes, files)
    SELECT @tenant_code, holder.user_id, @size_bytes, 1
    FROM limits, (SELECT '' AS user_id UNION ALL SELECT @user_id::text) AS holder
    WHERE CASE WHEN holder.user_id = ''
        THEN (limits.tenant_bytes = 0 OR @size_bytes <= limits.tenant_bytes) AND (limits.tenant_files = 0 OR 1 <= limits.tenant_files)
        ELSE (limits.owner_bytes = 0 OR @size_bytes <= limits.owner_bytes) AND (limits.owner_files = 0 OR 1 <= limits.owner_files)
        END
    ORDER BY holder.user_id COLLATE "C"
    ON CONFLICT (tenant_code, user_id) DO UPDATE
    SET
        bytes = usage.bytes + excluded.bytes,
        files = usage.files + 1
    WHERE CASE WHEN usage.user_id = ''
        THEN ((SELECT limits.tenant_bytes FROM limits) = 0 OR usage.bytes + excluded.bytes <= (SELECT limits.tenant_bytes FROM limits))
            AND ((SELECT limits.tenant_files FROM limits) = 0 OR usage.files + 1 <= (SELECT limits.tenant_files FROM limits))
        ELSE ((SELECT limits.owner_bytes FROM limits) = 0 OR usage.bytes + excluded.bytes <= (SELECT limits.owner_bytes FROM limits))
            AND ((SELECT limits.owner_files FROM limits) = 0 OR usage.files + 1 <= (SELECT limits.owner_files FROM limits))
        END
    RETURNING usage.user_id
), inserted AS (
    INSERT INTO uploaded_file (
        id,
        tenant_code,
        department_code,
        user_id,
        key,
        cdn,
        pending_key,
        original_name,
        size_bytes,
        content_type,
        visibility,
        disposition,
        is_temporary,
        checksum,
        status,
        upload_expires_at,
        upload_pending_at,
        resumable_offset,
        created_at,
        updated_at
    )
    SELECT
        @id,
        @tenant_code,
        sqlc.narg('department_code'),
        @user_id,
        @key,
        sqlc.narg('cdn'),
        @pending_key,
        @original_name,
        @size_bytes,
        @content_type,
        @visibility,
        @disposition,
        @is_temporary,
        @checksum,
        'pending',
        coalesce(sqlc.narg('now')::timestamptz, now()) + @upload_ttl::interval,
        coalesce(sqlc.narg('now')::timestamptz, now()) + @cleanup_lease::interval,
        sqlc.narg('resumable_offset')::bigint,
        coalesce(sqlc.narg('now')::timestamptz, now()),
        coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE CASE WHEN (SELECT count(*) FROM reserved) = 2 THEN true ELSE uploaded_file_quota_exceeded() END
    RETURNING *
)
SELECT * FROM inserted;

-- name: FileLockPendingContent :one
-- The local upload target's guard: share-locks a direct upload, by id
-- within the tenant, that is still pending, unclaimed, not deleted and whose
-- target has not expired. Run in a transaction that links the staging object
-- and commits at once: every transition out of pending (a completion claim,
-- an abort, the pending sweep) updates the row and so waits for that
-- transaction, and a content write that starts after the transition finds no
-- row. A staging object can therefore only appear while the row is pending
-- and names it. Zero rows: not pending any more (the caller reads the row to
-- tell which answer to give), expired, aborted or missing.
SELECT *
FROM uploaded_file
WHERE id = @id
    AND tenant_code = @tenant_code
    AND status = 'pending'
    AND upload_expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
FOR SHARE;

-- name: FileClaimCompletion :one
-- pending -> completing. Guard: still pending, the upload target not yet
-- expired, no deletion claim, not soft-deleted. Records the staging version
-- (@etag) that was verified and takes a completion lease; the cleanup lease
-- is pushed past the completion lease so the pending sweep cannot reclaim a
-- row while its completer is live. Zero rows: another instance claimed it,
-- the upload expired or was aborted; the caller reads the row to tell which.
UPDATE uploaded_file
SET
    status = 'completing',
    etag = @etag,
    completion_lease_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @completion_lease::interval,
    upload_pending_at = greatest(upload_pending_at, coalesce(sqlc.narg('now')::timestamptz, now()) + @completion_lease::interval),
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = @id
    AND tenant_code = @tenant_code
    AND status = 'pending'
    AND upload_expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
RETURNING *;

-- name: FileTakeOverCompletion :one
-- completing -> completing held by this instance, when the previous holder's
-- lease (@expired_lease, as read) has passed: its completer died or stalled.
-- The upload expiry is not checked again: the staging object was verified by
-- the first claim, and the new holder verifies it again before promoting.
-- Zero rows: the lease is still live (core.file.upload-completing), or another
-- instance took it over first, or the row was finalized or claimed for
-- deletion meanwhile.
UPDATE uploaded_file
SET
    etag = @etag,
    completion_lease_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @completion_lease::interval,
    upload_pending_at = greatest(upload_pending_at, coalesce(sqlc.narg('now')::timestamptz, now()) + @completion_lease::interval),
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = @id
    AND tenant_code = @tenant_code
    AND status = 'completing'
    AND completion_lease_until = @expired_lease::timestamptz
    AND completion_lease_until <= coalesce(sqlc.narg('now')::timestamptz, now())
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
RETURNING *;

-- name: FileExtendCompletion :one
-- completing -> completing with the lease moved on to now + @completion_lease
-- (and the in-flight cleanup lease at least as far), by the holder of
-- exactly @lease while its completion runs. Zero rows: the lease was taken
-- over (it had run out: the holder stalled) or the row left completing.
UPDATE uploaded_file
SET
    completion_lease_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @completion_lease::interval,
    upload_pending_at = greatest(upload_pending_at, coalesce(sqlc.narg('now')::timestamptz, now()) + @completion_lease::interval)
WHERE id = @id
    AND status = 'completing'
    AND completion_lease_until = @lease::timestamptz
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
RETURNING completion_lease_until;

-- name: FileFinalizeCompletion :one
-- completing -> ready, by the holder of exactly @lease, after the promoted
-- final object was verified. Sets completed_at; a temporary file expires 24
-- elapsed hours later. @retain_staging: the staging object is still in the
-- store (S3: promotion is a copy) and the staging sweep removes it once the
-- upload target can no longer land -- after the upload expiry plus
-- @clock_skew (the presigned URL's expiry is computed on another clock, and
-- until then a re-PUT could write the staging key again); otherwise (local:
-- a hard link, the staging name already unlinked, and the local target
-- refuses every write once the row left pending) pending_key is cleared.
-- Zero rows: the lease was lost; the caller must not report success and must
-- not delete the final object unless the row is being deleted (the new
-- holder owns it). @width and @height: an image's size read from the
-- final object's header (NULL otherwise).
-- Writes file.ready.
WITH changed AS (
    UPDATE uploaded_file
    SET
        status = 'ready',
        etag = @final_etag,
        completion_lease_until = NULL,
        upload_pending_at = NULL,
        pending_key = CASE WHEN @retain_staging::boolean THEN pending_key ELSE NULL END,
        staging_cleanup_at = CASE WHEN @retain_staging::boolean
            THEN greatest(coalesce(sqlc.narg('now')::timestamptz, now()), upload_expires_at + @clock_skew::interval)
            ELSE NULL END,
        completed_at = coalesce(sqlc.narg('now')::timestamptz, now()),
        expired_at = CASE WHEN is_temporary
            THEN coalesce(sqlc.narg('now')::timestamptz, now()) + interval '24 hours'
            ELSE NULL END,
        width = sqlc.narg('width')::integer,
        height = sqlc.narg('height')::integer,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE uploaded_file.id = @id
        AND status = 'completing'
        AND uploaded_file.completion_lease_until = @lease::timestamptz
        AND deletion_pending_at IS NULL
        AND deleted_at IS NULL
    RETURNING *
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'file.ready', changed.tenant_code, changed.id, changed.updated_at, NULL, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
)
SELECT * FROM changed;

-- name: FileFailCompletion :one
-- completing -> failed, by the holder of exactly @lease, when the staging or
-- final object does not match what was declared. The row is failed durably
-- and, in the same statement, claimed for deletion (a future deletion lease),
-- so its objects are removed by this caller or, should it die, by the
-- deletion-retry sweep. upload_pending_at is kept: while the upload target is
-- still valid the client could write the staging object again, so the row
-- stays a tombstone until that window has closed. Zero rows: the lease was
-- lost to another instance.
-- Writes upload.failed with @rule.
WITH changed AS (
    UPDATE uploaded_file
    SET
        status = 'failed',
        completion_lease_until = NULL,
        deletion_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @deletion_lease::interval,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE uploaded_file.id = @id
        AND status = 'completing'
        AND uploaded_file.completion_lease_until = @lease::timestamptz
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
    SELECT 'upload.failed', changed.tenant_code, changed.id, changed.updated_at, nullif(@rule::text, ''), uploaded_file_event_data(to_jsonb(changed))
    FROM changed
)
SELECT changed.* FROM changed CROSS JOIN released;

-- name: FileLockPendingContentSigned :one
-- FileLockPendingContent for the local driver's signed upload target: the
-- signed URL is the authorization (its HMAC, checked before this query,
-- names this id, size, type and checksum), so the row is found by id
-- alone, with the same guard and the same share lock. Zero rows: the upload
-- left pending, expired, was aborted or does not exist.
SELECT *
FROM uploaded_file
WHERE id = @id
    AND status = 'pending'
    AND upload_expires_at > coalesce(sqlc.narg('now')::timestamptz, now())
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
FOR SHARE;

-- name: FileReleaseCompletion :one
-- completing -> pending, by the holder of exactly @lease, when the
-- completion cannot go on for a reason that is not the upload's (the
-- malware scanner is down or too slow): nothing is final, and the client
-- may complete again while its target is valid. The cleanup lease the
-- claim pushed stays, so the pending sweep still reclaims an upload never
-- completed. Zero rows: the lease was lost.
UPDATE uploaded_file
SET
    status = 'pending',
    completion_lease_until = NULL,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = @id
    AND status = 'completing'
    AND completion_lease_until = @lease::timestamptz
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
RETURNING *;

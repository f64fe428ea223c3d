-- Buffer uploads (legacy and managed): the server receives the bytes itself.
--
--   FileInsertHidden             (none)   -> hidden: upload_pending_at = now + 30 s
--   FileExtendActivation         hidden   -> hidden, the lease moved on by its writer
--   FileActivateUpload           hidden   -> visible (ready), that exact marker only
--   FileSettleFailedUpload       hidden   -> claimed for deletion, marker cleared
--   FileRestoreUploadForCleanup  taken over by maintenance -> claimed for deletion
--
-- An upload with an Idempotency-Key stores the key and its request's
-- fingerprint on the row FileInsertHidden inserts (unique per tenant, user
-- and key: uploaded_file_idempotency_key_unique). A retry's insert fails on
-- that index and FileGetByIdempotencyKey reads the first row: ready, the
-- retry answers with it; hidden under a live lease, the first request is
-- still running; hidden past its lease, the first request died and the
-- retry settles its row as the writer would have (FileSettleFailedUpload
-- with its marker), then inserts again; being deleted, or claimed more than
-- a day ago, FileForgetIdempotencyKey frees the key and the retry inserts
-- again.
--
-- The activation lease is a marker, not only a deadline: the activation and
-- the settled cleanup both name the exact upload_pending_at value the writer
-- holds, so whichever commits first wins and the other matches zero rows.
-- The lease is short and the writer extends it while it scans and stores
-- the bytes (FileExtendActivation): a writer that died lets go of its row,
-- and of its Idempotency-Key, within one lease.
--
-- FileInsertHidden and FileActivateUpload are :batchone queries: under
-- concurrent uploads the service sends up to 32 of one of them as one pgx
-- batch -- one implicit transaction, committed at its end -- inserts in
-- (tenant, owner) order so that their usage-row locks are taken in key
-- order, activations in id order. A batch that fails as a whole is not
-- used: each upload then runs its statement alone (db/groupcommit.go).
-- Alone, an upload runs a batch of one: the same single statement as a
-- :one query.
--
-- Every transition that changes what a file is (ready, attached, deleted,
-- expired, purged, failed, abandoned) writes its lifecycle event in the same
-- statement, a data-modifying CTE into uploaded_file_event (see
-- event_outbox.sql): the event commits, or rolls back, with the transition.

-- name: FileInsertHidden :batchone
-- Reserves its space (@size_bytes, one file) on the tenant's and the
-- owner's usage in the same statement; when either would pass its limit
-- the statement fails with SQLSTATE UFQ01 (quota exceeded) and nothing is
-- written.
-- @width and @height: an image's size read from its header by the file
-- check (NULL otherwise).
-- Persists a buffer upload before its bytes are written: status pending and a
-- future activation lease in upload_pending_at, so the row is invisible to
-- every normal read and, should the writer die, the deletion-retry sweep finds
-- it once the lease has expired. Fails on a duplicate id, key or cdn, or
-- idempotency key (SQLSTATE 23505, uploaded_file_idempotency_key_unique).
-- A keyed upload also writes its key into uploaded_file_idempotency (a
-- done row of route 'POST /uploaded-file', the guard), after its
-- reservation: a request of another route under the same key in flight
-- meets it on that table's primary key, and whichever commits second sees
-- the first. When another route holds the key, the statement fails with
-- SQLSTATE UFK01 and nothing is written or reserved. The usage rows are
-- locked before the guard row, in every statement that takes both.
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
), key_guard AS (
    -- Claims the key for the buffer route, or finds it this route's
    -- already (a retry): a row. Another route's key: no row.
    INSERT INTO uploaded_file_idempotency AS guard (tenant_code, caller, key, route, state, fingerprint, file_id, status, created_at, expires_at)
    SELECT @tenant_code, @user_id, sqlc.narg('idempotency_key')::text, 'POST /uploaded-file', 'done',
        sqlc.narg('idempotency_fingerprint')::bytea, @id::uuid, 201,
        coalesce(sqlc.narg('now')::timestamptz, now()), coalesce(sqlc.narg('now')::timestamptz, now()) + interval '24 hours'
    WHERE sqlc.narg('idempotency_key')::text IS NOT NULL
    ON CONFLICT (tenant_code, caller, key) DO UPDATE
    SET fingerprint = excluded.fingerprint
    WHERE guard.route = excluded.route
    RETURNING 1
), inserted AS (
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
        width,
        height,
        idempotency_key,
        idempotency_fingerprint,
        status,
        upload_pending_at,
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
        sqlc.narg('width')::integer,
        sqlc.narg('height')::integer,
        sqlc.narg('idempotency_key')::text,
        sqlc.narg('idempotency_fingerprint')::bytea,
        'pending',
        coalesce(sqlc.narg('now')::timestamptz, now()) + @activation_lease::interval,
        coalesce(sqlc.narg('now')::timestamptz, now()),
        coalesce(sqlc.narg('now')::timestamptz, now())
    -- CASE tests in order: the reservation (usage rows locked), then the
    -- key's guard (its row locked after them).
    WHERE CASE WHEN (SELECT count(*) FROM reserved) <> 2 THEN uploaded_file_quota_exceeded()
        WHEN sqlc.narg('idempotency_key')::text IS NULL THEN true
        WHEN EXISTS (SELECT 1 FROM key_guard) THEN true
        ELSE uploaded_file_upload_key_taken() END
    RETURNING *
)
SELECT * FROM inserted;

-- name: FileExtendActivation :one
-- hidden -> hidden with the activation lease moved on to now +
-- @activation_lease, by the writer holding exactly @upload_marker while it
-- scans and stores the bytes. Only a lease still running is extended: once
-- it has run out, a retry under the upload's key or the deletion-retry
-- sweep may already be settling the row, and the writer must not take it
-- back. Zero rows: the lease ran out, or the row left hidden (activated,
-- settled, or claimed by maintenance); the writer stops extending and its
-- activation tells which.
UPDATE uploaded_file
SET upload_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @activation_lease::interval
WHERE id = @id
    AND status = 'pending'
    AND upload_pending_at = @upload_marker::timestamptz
    AND upload_pending_at > coalesce(sqlc.narg('now')::timestamptz, now())
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
RETURNING upload_pending_at::timestamptz AS lease;

-- name: FileActivateUpload :batchone
-- hidden -> ready. Clears exactly the marker the writer inserted, only while
-- no deletion claim exists and the row is not soft-deleted; a temporary file
-- expires 24 elapsed hours after this moment (an interval in hours, so a
-- daylight-saving change never stretches it). The size is the one inserted
-- and reserved: the writer measured it on the complete spool before the
-- insert, so the usage is not touched here (no usage row is locked, in any
-- order). @checksum is the spool's; @etag the store's. Zero rows: settled
-- cleanup or maintenance got there first; the writer must not report
-- success. Writes file.ready.
WITH changed AS (
    UPDATE uploaded_file
    SET
        status = 'ready',
        upload_pending_at = NULL,
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
), released AS (
    -- The space the rows held goes back to their owners and tenants
    -- (uploaded_file_usage_release); the final SELECT reads this CTE,
    -- so it runs.
    SELECT uploaded_file_usage_release(array_agg(changed.tenant_code), array_agg(changed.user_id), array_agg(changed.size_bytes), 1) AS usage_rows
    FROM changed
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'upload.failed', changed.tenant_code, changed.id, changed.updated_at, sqlc.narg('rule')::text, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
)
SELECT changed.* FROM changed CROSS JOIN released;

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
WITH changed AS (
    UPDATE uploaded_file
    SET
        upload_pending_at = NULL,
        deletion_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @deletion_lease::interval,
        deleted_at = NULL,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE uploaded_file.id = @id
        AND uploaded_file.status = 'pending'
        AND uploaded_file.upload_pending_at IS NOT DISTINCT FROM sqlc.narg('upload_marker')::timestamptz
        AND uploaded_file.deletion_pending_at IS NOT DISTINCT FROM sqlc.narg('deletion_marker')::timestamptz
        AND uploaded_file.deleted_at IS NOT DISTINCT FROM sqlc.narg('deleted_marker')::timestamptz
    RETURNING *
), released AS (
    -- The space the rows held goes back to their owners and tenants
    -- (uploaded_file_usage_release); the final SELECT reads this CTE,
    -- so it runs.
    SELECT uploaded_file_usage_release(array_agg(changed.tenant_code), array_agg(changed.user_id), array_agg(changed.size_bytes), 1) AS usage_rows
    FROM changed
    WHERE sqlc.narg('deletion_marker')::timestamptz IS NULL AND sqlc.narg('deleted_marker')::timestamptz IS NULL
)
SELECT changed.* FROM changed CROSS JOIN released;

-- name: FileGetByIdempotencyKey :one
-- The row a buffer upload of the caller (@tenant_code, @user_id) made under
-- @idempotency_key, whatever its state, with the database time. Zero rows:
-- the key is free (its row went meanwhile): insert again.
SELECT sqlc.embed(uploaded_file), coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS db_now
FROM uploaded_file
WHERE tenant_code = @tenant_code AND user_id = @user_id AND idempotency_key = @idempotency_key::text;

-- name: FileForgetIdempotencyKey :execrows
-- Frees @idempotency_key from row @id, when the key no longer answers for
-- it: the row is being deleted or was (a failed upload's settled cleanup,
-- or a deletion), or the key was claimed more than @retention ago. Guard:
-- the row still holds that key. Zero rows: another retry freed it, or the
-- row is none of those (it is answered from instead).
UPDATE uploaded_file
SET idempotency_key = NULL, idempotency_fingerprint = NULL
WHERE id = @id AND idempotency_key = @idempotency_key::text
    AND (deletion_pending_at IS NOT NULL OR deleted_at IS NOT NULL
        OR created_at <= coalesce(sqlc.narg('now')::timestamptz, now()) - @retention::interval);

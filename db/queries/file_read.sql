-- Reads. Every scoped lookup has the same predicate:
--
--   tenant_code = @tenant_code                       always;
--   department_code = @department_code               when the scope has one
--                                                    (NULL: no department predicate);
--   user_id = @owner_user_id                         for the 'owner' decision
--                                                    (NULL: the 'tenant' decision).
--
-- A "visible" row is ready with no upload marker, no deletion claim and no
-- soft delete. In-flight, failed, claimed and soft-deleted rows are never
-- returned by a visible lookup, so to the caller they look exactly like a
-- missing or cross-scope row: zero rows, one error code.
--
-- Reads that need the time (temporary expiry, URL clamping) return the
-- database clock as db_now so the service never compares its own clock.

-- name: FileGetVisible :one
-- A visible file by id within the scope, with whether it has expired
-- (temporary files: db_now >= expired_at). Zero rows: missing, out of scope,
-- hidden or deleted -- all reported as core.file.not-found.
SELECT
    sqlc.embed(uploaded_file),
    (uploaded_file.expired_at IS NOT NULL
        AND uploaded_file.expired_at <= coalesce(sqlc.narg('now')::timestamptz, now()))::boolean AS expired,
    coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS db_now
FROM uploaded_file
WHERE id = @id
    AND tenant_code = @tenant_code
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND (sqlc.narg('owner_user_id')::text IS NULL OR user_id = sqlc.narg('owner_user_id')::text)
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL;

-- name: FileGetDetail :one
-- What the detail lookup (Service.Find) answers of a visible file by id
-- within the scope: the columns of its response, the object's version (its
-- URL's grant carries it, so the download need not read it from the
-- store), whether it has expired and the database time its URL is resolved
-- at -- FileGetVisible's predicate, 24 columns instead of the row's 34 and
-- two (the lookup is the hottest read after the download; the scope, lease
-- and bookkeeping columns cost the database and the client on every one).
-- Zero rows: as FileGetVisible.
SELECT
    id,
    key,
    cdn,
    original_name,
    size_bytes,
    content_type,
    visibility,
    status,
    is_temporary,
    disposition,
    checksum,
    etag,
    width,
    height,
    extra_data,
    module,
    entity,
    entity_id,
    type,
    created_at,
    completed_at,
    expired_at,
    (expired_at IS NOT NULL
        AND expired_at <= coalesce(sqlc.narg('now')::timestamptz, now()))::boolean AS expired,
    coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS db_now
FROM uploaded_file
WHERE id = @id
    AND tenant_code = @tenant_code
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND (sqlc.narg('owner_user_id')::text IS NULL OR user_id = sqlc.narg('owner_user_id')::text)
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL;

-- name: FileGetDownload :one
-- What a download needs of a visible file by id within the scope: its key,
-- the name, type and disposition its response carries, the object's
-- version (so the store need not read it again), and whether it has
-- expired -- FileGetVisible's predicate, six columns instead of the row
-- (a download is the hottest read; the row's other columns cost the
-- database and the client on every one; the id is the caller's own).
-- Zero rows: as FileGetVisible.
SELECT
    key,
    original_name,
    content_type,
    disposition,
    etag,
    (expired_at IS NOT NULL
        AND expired_at <= coalesce(sqlc.narg('now')::timestamptz, now()))::boolean AS expired
FROM uploaded_file
WHERE id = @id
    AND tenant_code = @tenant_code
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND (sqlc.narg('owner_user_id')::text IS NULL OR user_id = sqlc.narg('owner_user_id')::text)
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL;

-- name: FileGetVisibleByReference :one
-- A visible file by an exact storage reference (its key or its persisted
-- cdn reference) within the scope. Zero rows: as FileGetVisible.
SELECT
    sqlc.embed(uploaded_file),
    (uploaded_file.expired_at IS NOT NULL
        AND uploaded_file.expired_at <= coalesce(sqlc.narg('now')::timestamptz, now()))::boolean AS expired,
    coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS db_now
FROM uploaded_file
WHERE (key = @reference::text OR cdn = @reference::text)
    AND tenant_code = @tenant_code
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND (sqlc.narg('owner_user_id')::text IS NULL OR user_id = sqlc.narg('owner_user_id')::text)
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL;

-- name: FileGetAttached :one
-- A visible, used file by id whose attachment is exactly module/entity/
-- entity_id, within the tenant (and department) scope. The uploader is
-- deliberately not part of this lookup: the attached-read policy has already
-- approved the read of the domain resource. Zero rows: not attached there.
SELECT
    sqlc.embed(uploaded_file),
    (uploaded_file.expired_at IS NOT NULL
        AND uploaded_file.expired_at <= coalesce(sqlc.narg('now')::timestamptz, now()))::boolean AS expired,
    coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS db_now
FROM uploaded_file
WHERE id = @id
    AND tenant_code = @tenant_code
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND module = @module::text
    AND entity = @entity::text
    AND entity_id = @entity_id::text
    AND used_at IS NOT NULL
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL;

-- name: FileGetDirect :one
-- A direct-lifecycle file by id within the scope, in any state but deleted or
-- claimed for deletion: what complete, abort and the local content target
-- act on. upload_expires_at is set only by FileInsertPending, so buffer
-- uploads never match. Zero rows: missing, out of scope, aborted or deleted.
SELECT
    sqlc.embed(uploaded_file),
    (uploaded_file.expired_at IS NOT NULL
        AND uploaded_file.expired_at <= coalesce(sqlc.narg('now')::timestamptz, now()))::boolean AS expired,
    coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS db_now
FROM uploaded_file
WHERE id = @id
    AND tenant_code = @tenant_code
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND (sqlc.narg('owner_user_id')::text IS NULL OR user_id = sqlc.narg('owner_user_id')::text)
    AND upload_expires_at IS NOT NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL;

-- name: FileLockVisibleByIDs :many
-- Locks the visible files among @ids within the scope, in id order (a fixed
-- lock order, so two batches never deadlock). markUsed runs it in the
-- caller's or its own transaction and compares the count with the ids asked
-- for before it updates anything: fewer rows means some id is missing or out
-- of scope, and nothing is marked.
SELECT *
FROM uploaded_file
WHERE id = any(@ids::uuid[])
    AND tenant_code = @tenant_code
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND (sqlc.narg('owner_user_id')::text IS NULL OR user_id = sqlc.narg('owner_user_id')::text)
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
ORDER BY id
FOR UPDATE;

-- name: FileLockVisibleByReferences :many
-- As FileLockVisibleByIDs, for exact storage references (key or cdn).
SELECT *
FROM uploaded_file
WHERE (key = any(@refs::text[]) OR cdn = any(@refs::text[]))
    AND tenant_code = @tenant_code
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND (sqlc.narg('owner_user_id')::text IS NULL OR user_id = sqlc.narg('owner_user_id')::text)
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
ORDER BY id
FOR UPDATE;

-- name: FileGetUploadState :one
-- The raw markers of one row, unscoped and in any state. Called only by a
-- writer about the row it holds, after its own CAS matched zero rows: the
-- writer of a buffer upload (the id it generated) tells an activation whose
-- response was lost (row active: nothing to clean) from a row that
-- maintenance took over (exact markers for FileRestoreUploadForCleanup); a
-- direct upload's completer whose finalize lost its lease tells a takeover
-- (another completer owns the final object) from a reclaim by the pending
-- sweep (deletion markers set: the row can never become ready again).
-- Zero rows: the row no longer exists.
SELECT
    id,
    status,
    upload_pending_at,
    deletion_pending_at,
    deleted_at,
    coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS db_now
FROM uploaded_file
WHERE id = @id;

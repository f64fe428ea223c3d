-- Lists of visible files, keyset-paginated: one query per list shape
-- (scope x sort), each backed by its own partial index
-- (20261123100000_uploaded_file_listing), so a deep page costs what the
-- first one does and no filter the API allows turns into a read of the
-- whole scope.
--
--   FileListOwnerBy*   the caller's own files (the owner decision)
--   FileListTenantBy*  the tenant's files (the tenant decision, a scope
--                      without a department)
--   FileListDepartmentBy*  the files of the scope's department in the
--                      tenant (the tenant decision, a scope with one)
--   FileListRecordBy*  the files attached to one record (entity and entity
--                      id both given), the owner's (@user_id) or the
--                      tenant's (@user_id NULL)
--
-- An owner's, a tenant's or a department's list has two statements per
-- order: the page with no optional filter (its WHERE is the index's and
-- the cursor), and *Filtered, the walk below, for a page with any of them.
--
-- A page's statement reads the columns a list item is made of (the
-- service's Result and its URL: db.ListItemRow), not the row's bookkeeping
-- (the scope, the upload and deletion markers, leases, idempotency): a
-- page's cost is mostly per row, and the sixteen columns left out were a
-- sixth of it (measured: 207 against 174 µs for a record's page of eleven,
-- the statement and its scan alone). The walks below keep the whole row.
--
-- The cursor is the last row's sort key and id: the next page is the rows
-- strictly after it in the index order (a row comparison, an index
-- condition), so rows inserted or deleted meanwhile never make a page repeat
-- or skip a row that existed for the whole walk. The first page passes the
-- sort's sentinel (the service's doing) instead of a NULL, so every plan has
-- the same index condition. A name cursor carries the row's name; the query
-- lower-cases it as it does the column, so both sides use one lower(). Visible means what a detail request sees:
-- ready, no upload marker, no deletion claim, not soft-deleted, and a
-- temporary file not past its expiry at @now. Every filter is optional
-- (NULL: not filtered); @name_prefix and @content_type_prefix are LIKE
-- prefixes the service escaped.
--
-- The filtered lists read at most @scan of the scope's visible
-- rows a page (the walk: the scope -- tenant, owner, the department when
-- the scope has one -- in the index's order from the cursor, numbered by
-- `walked`); the optional filters decide `matched` on the rows walked. A
-- row comes back when it matched, or when the walk ended on it (walked =
-- @scan, whether or not it matched), so a filter that matches few of a
-- large scope's files costs one budget a page -- the page holds fewer
-- files than its limit, and the service continues from the last row walked
-- -- instead of a read of the whole scope. The creation-time bounds of the
-- newest-first order are bounds of the walk itself (index conditions).
-- The department of a scope is the walk's, not a filter: a department's
-- list walks its own index (tenant, department, order), whatever else the
-- tenant holds.
-- The outer query has no ORDER BY of its own: the walk's rows come out in
-- the walk's order (a scan of a subquery, a filter and a limit keep the
-- order of their input), and an ORDER BY there makes PostgreSQL plan the
-- walk for reading every row it may return -- a bitmap scan and a sort of
-- the budget instead of the index's order (measured: 20,000 rows read for
-- a page of 51 on an owner of 20,000 files).

-- name: FileListOwnerByCreated :many
-- One page of the caller's own files, newest first, after the cursor (@after_created, @after_id), with no optional filter: at most @max rows.
SELECT id, key, cdn, original_name, size_bytes, content_type, visibility, status, is_temporary, disposition,
    checksum, etag, width, height, extra_data, module, entity, entity_id, type, created_at, completed_at, expired_at
FROM uploaded_file
WHERE tenant_code = @tenant_code
    AND user_id = @user_id
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
    AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
    AND (created_at, id) < (@after_created::timestamptz, @after_id::uuid)
ORDER BY created_at DESC, id DESC
LIMIT @max::integer;

-- name: FileListOwnerByCreatedFiltered :many
-- One page of the caller's own files, newest first, after the cursor (@after_created, @after_id), filtered: at most @max rows of a walk of at most @scan visible rows.
SELECT *
FROM (
    SELECT walk.*,
        coalesce((sqlc.narg('module')::text IS NULL OR walk.module = sqlc.narg('module')::text)
            AND (sqlc.narg('entity')::text IS NULL OR walk.entity = sqlc.narg('entity')::text)
            AND (sqlc.narg('entity_id')::text IS NULL OR walk.entity_id = sqlc.narg('entity_id')::text)
            AND (sqlc.narg('content_type')::text IS NULL OR walk.content_type = sqlc.narg('content_type')::text)
            AND (sqlc.narg('content_type_prefix')::text IS NULL OR walk.content_type LIKE sqlc.narg('content_type_prefix')::text || '%')
            AND (sqlc.narg('visibility')::text IS NULL OR walk.visibility = sqlc.narg('visibility')::text)
            AND (sqlc.narg('is_temporary')::boolean IS NULL OR walk.is_temporary = sqlc.narg('is_temporary')::boolean)
            AND (sqlc.narg('name_prefix')::text IS NULL OR lower(walk.original_name) COLLATE "C" LIKE lower(sqlc.narg('name_prefix')::text) || '%'), false)::boolean AS matched
    FROM (
        SELECT *, row_number() OVER (ORDER BY created_at DESC, id DESC) AS walked
        FROM uploaded_file
        WHERE tenant_code = @tenant_code
            AND user_id = @user_id
            AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
            AND status = 'ready'
            AND upload_pending_at IS NULL
            AND deletion_pending_at IS NULL
            AND deleted_at IS NULL
            AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
            AND created_at >= coalesce(sqlc.narg('created_from')::timestamptz, '-infinity')
            AND created_at < coalesce(sqlc.narg('created_before')::timestamptz, 'infinity')
            AND (created_at, id) < (@after_created::timestamptz, @after_id::uuid)
        ORDER BY created_at DESC, id DESC
        LIMIT @scan::integer
    ) AS walk
) AS page
WHERE page.matched OR page.walked = @scan::integer
LIMIT @max::integer;

-- name: FileListOwnerByName :many
-- One page of the caller's own files, by lower-cased name, A to Z (byte order), after the cursor (@after_name, @after_id), with no optional filter: at most @max rows.
SELECT id, key, cdn, original_name, size_bytes, content_type, visibility, status, is_temporary, disposition,
    checksum, etag, width, height, extra_data, module, entity, entity_id, type, created_at, completed_at, expired_at
FROM uploaded_file
WHERE tenant_code = @tenant_code
    AND user_id = @user_id
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
    AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
    AND (lower(original_name) COLLATE "C", id) > (lower(@after_name::text) COLLATE "C", @after_id::uuid)
ORDER BY lower(original_name) COLLATE "C", id
LIMIT @max::integer;

-- name: FileListOwnerByNameFiltered :many
-- One page of the caller's own files, by lower-cased name, A to Z (byte order), after the cursor (@after_name, @after_id), filtered: at most @max rows of a walk of at most @scan visible rows.
SELECT *
FROM (
    SELECT walk.*,
        coalesce((sqlc.narg('module')::text IS NULL OR walk.module = sqlc.narg('module')::text)
            AND (sqlc.narg('entity')::text IS NULL OR walk.entity = sqlc.narg('entity')::text)
            AND (sqlc.narg('entity_id')::text IS NULL OR walk.entity_id = sqlc.narg('entity_id')::text)
            AND (sqlc.narg('content_type')::text IS NULL OR walk.content_type = sqlc.narg('content_type')::text)
            AND (sqlc.narg('content_type_prefix')::text IS NULL OR walk.content_type LIKE sqlc.narg('content_type_prefix')::text || '%')
            AND (sqlc.narg('visibility')::text IS NULL OR walk.visibility = sqlc.narg('visibility')::text)
            AND (sqlc.narg('is_temporary')::boolean IS NULL OR walk.is_temporary = sqlc.narg('is_temporary')::boolean)
            AND (sqlc.narg('created_from')::timestamptz IS NULL OR walk.created_at >= sqlc.narg('created_from')::timestamptz)
            AND (sqlc.narg('created_before')::timestamptz IS NULL OR walk.created_at < sqlc.narg('created_before')::timestamptz)
            AND (sqlc.narg('name_prefix')::text IS NULL OR lower(walk.original_name) COLLATE "C" LIKE lower(sqlc.narg('name_prefix')::text) || '%'), false)::boolean AS matched
    FROM (
        SELECT *, row_number() OVER (ORDER BY lower(original_name) COLLATE "C", id) AS walked
        FROM uploaded_file
        WHERE tenant_code = @tenant_code
            AND user_id = @user_id
            AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
            AND status = 'ready'
            AND upload_pending_at IS NULL
            AND deletion_pending_at IS NULL
            AND deleted_at IS NULL
            AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
            AND (lower(original_name) COLLATE "C", id) > (lower(@after_name::text) COLLATE "C", @after_id::uuid)
        ORDER BY lower(original_name) COLLATE "C", id
        LIMIT @scan::integer
    ) AS walk
) AS page
WHERE page.matched OR page.walked = @scan::integer
LIMIT @max::integer;

-- name: FileListOwnerBySize :many
-- One page of the caller's own files, largest first, after the cursor (@after_size, @after_id), with no optional filter: at most @max rows.
SELECT id, key, cdn, original_name, size_bytes, content_type, visibility, status, is_temporary, disposition,
    checksum, etag, width, height, extra_data, module, entity, entity_id, type, created_at, completed_at, expired_at
FROM uploaded_file
WHERE tenant_code = @tenant_code
    AND user_id = @user_id
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
    AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
    AND (size_bytes, id) < (@after_size::bigint, @after_id::uuid)
ORDER BY size_bytes DESC, id DESC
LIMIT @max::integer;

-- name: FileListOwnerBySizeFiltered :many
-- One page of the caller's own files, largest first, after the cursor (@after_size, @after_id), filtered: at most @max rows of a walk of at most @scan visible rows.
SELECT *
FROM (
    SELECT walk.*,
        coalesce((sqlc.narg('module')::text IS NULL OR walk.module = sqlc.narg('module')::text)
            AND (sqlc.narg('entity')::text IS NULL OR walk.entity = sqlc.narg('entity')::text)
            AND (sqlc.narg('entity_id')::text IS NULL OR walk.entity_id = sqlc.narg('entity_id')::text)
            AND (sqlc.narg('content_type')::text IS NULL OR walk.content_type = sqlc.narg('content_type')::text)
            AND (sqlc.narg('content_type_prefix')::text IS NULL OR walk.content_type LIKE sqlc.narg('content_type_prefix')::text || '%')
            AND (sqlc.narg('visibility')::text IS NULL OR walk.visibility = sqlc.narg('visibility')::text)
            AND (sqlc.narg('is_temporary')::boolean IS NULL OR walk.is_temporary = sqlc.narg('is_temporary')::boolean)
            AND (sqlc.narg('created_from')::timestamptz IS NULL OR walk.created_at >= sqlc.narg('created_from')::timestamptz)
            AND (sqlc.narg('created_before')::timestamptz IS NULL OR walk.created_at < sqlc.narg('created_before')::timestamptz)
            AND (sqlc.narg('name_prefix')::text IS NULL OR lower(walk.original_name) COLLATE "C" LIKE lower(sqlc.narg('name_prefix')::text) || '%'), false)::boolean AS matched
    FROM (
        SELECT *, row_number() OVER (ORDER BY size_bytes DESC, id DESC) AS walked
        FROM uploaded_file
        WHERE tenant_code = @tenant_code
            AND user_id = @user_id
            AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
            AND status = 'ready'
            AND upload_pending_at IS NULL
            AND deletion_pending_at IS NULL
            AND deleted_at IS NULL
            AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
            AND (size_bytes, id) < (@after_size::bigint, @after_id::uuid)
        ORDER BY size_bytes DESC, id DESC
        LIMIT @scan::integer
    ) AS walk
) AS page
WHERE page.matched OR page.walked = @scan::integer
LIMIT @max::integer;

-- name: FileListTenantByCreated :many
-- One page of the tenant's files (a scope without a department), newest first, after the cursor (@after_created, @after_id), with no optional filter: at most @max rows.
SELECT id, key, cdn, original_name, size_bytes, content_type, visibility, status, is_temporary, disposition,
    checksum, etag, width, height, extra_data, module, entity, entity_id, type, created_at, completed_at, expired_at
FROM uploaded_file
WHERE tenant_code = @tenant_code
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
    AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
    AND (created_at, id) < (@after_created::timestamptz, @after_id::uuid)
ORDER BY created_at DESC, id DESC
LIMIT @max::integer;

-- name: FileListTenantByCreatedFiltered :many
-- One page of the tenant's files (a scope without a department), newest first, after the cursor (@after_created, @after_id), filtered: at most @max rows of a walk of at most @scan visible rows.
SELECT *
FROM (
    SELECT walk.*,
        coalesce((sqlc.narg('module')::text IS NULL OR walk.module = sqlc.narg('module')::text)
            AND (sqlc.narg('entity')::text IS NULL OR walk.entity = sqlc.narg('entity')::text)
            AND (sqlc.narg('entity_id')::text IS NULL OR walk.entity_id = sqlc.narg('entity_id')::text)
            AND (sqlc.narg('content_type')::text IS NULL OR walk.content_type = sqlc.narg('content_type')::text)
            AND (sqlc.narg('content_type_prefix')::text IS NULL OR walk.content_type LIKE sqlc.narg('content_type_prefix')::text || '%')
            AND (sqlc.narg('visibility')::text IS NULL OR walk.visibility = sqlc.narg('visibility')::text)
            AND (sqlc.narg('is_temporary')::boolean IS NULL OR walk.is_temporary = sqlc.narg('is_temporary')::boolean)
            AND (sqlc.narg('name_prefix')::text IS NULL OR lower(walk.original_name) COLLATE "C" LIKE lower(sqlc.narg('name_prefix')::text) || '%'), false)::boolean AS matched
    FROM (
        SELECT *, row_number() OVER (ORDER BY created_at DESC, id DESC) AS walked
        FROM uploaded_file
        WHERE tenant_code = @tenant_code
            AND status = 'ready'
            AND upload_pending_at IS NULL
            AND deletion_pending_at IS NULL
            AND deleted_at IS NULL
            AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
            AND created_at >= coalesce(sqlc.narg('created_from')::timestamptz, '-infinity')
            AND created_at < coalesce(sqlc.narg('created_before')::timestamptz, 'infinity')
            AND (created_at, id) < (@after_created::timestamptz, @after_id::uuid)
        ORDER BY created_at DESC, id DESC
        LIMIT @scan::integer
    ) AS walk
) AS page
WHERE page.matched OR page.walked = @scan::integer
LIMIT @max::integer;

-- name: FileListTenantByName :many
-- One page of the tenant's files (a scope without a department), by lower-cased name, A to Z (byte order), after the cursor (@after_name, @after_id), with no optional filter: at most @max rows.
SELECT id, key, cdn, original_name, size_bytes, content_type, visibility, status, is_temporary, disposition,
    checksum, etag, width, height, extra_data, module, entity, entity_id, type, created_at, completed_at, expired_at
FROM uploaded_file
WHERE tenant_code = @tenant_code
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
    AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
    AND (lower(original_name) COLLATE "C", id) > (lower(@after_name::text) COLLATE "C", @after_id::uuid)
ORDER BY lower(original_name) COLLATE "C", id
LIMIT @max::integer;

-- name: FileListTenantByNameFiltered :many
-- One page of the tenant's files (a scope without a department), by lower-cased name, A to Z (byte order), after the cursor (@after_name, @after_id), filtered: at most @max rows of a walk of at most @scan visible rows.
SELECT *
FROM (
    SELECT walk.*,
        coalesce((sqlc.narg('module')::text IS NULL OR walk.module = sqlc.narg('module')::text)
            AND (sqlc.narg('entity')::text IS NULL OR walk.entity = sqlc.narg('entity')::text)
            AND (sqlc.narg('entity_id')::text IS NULL OR walk.entity_id = sqlc.narg('entity_id')::text)
            AND (sqlc.narg('content_type')::text IS NULL OR walk.content_type = sqlc.narg('content_type')::text)
            AND (sqlc.narg('content_type_prefix')::text IS NULL OR walk.content_type LIKE sqlc.narg('content_type_prefix')::text || '%')
            AND (sqlc.narg('visibility')::text IS NULL OR walk.visibility = sqlc.narg('visibility')::text)
            AND (sqlc.narg('is_temporary')::boolean IS NULL OR walk.is_temporary = sqlc.narg('is_temporary')::boolean)
            AND (sqlc.narg('created_from')::timestamptz IS NULL OR walk.created_at >= sqlc.narg('created_from')::timestamptz)
            AND (sqlc.narg('created_before')::timestamptz IS NULL OR walk.created_at < sqlc.narg('created_before')::timestamptz)
            AND (sqlc.narg('name_prefix')::text IS NULL OR lower(walk.original_name) COLLATE "C" LIKE lower(sqlc.narg('name_prefix')::text) || '%'), false)::boolean AS matched
    FROM (
        SELECT *, row_number() OVER (ORDER BY lower(original_name) COLLATE "C", id) AS walked
        FROM uploaded_file
        WHERE tenant_code = @tenant_code
            AND status = 'ready'
            AND upload_pending_at IS NULL
            AND deletion_pending_at IS NULL
            AND deleted_at IS NULL
            AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
            AND (lower(original_name) COLLATE "C", id) > (lower(@after_name::text) COLLATE "C", @after_id::uuid)
        ORDER BY lower(original_name) COLLATE "C", id
        LIMIT @scan::integer
    ) AS walk
) AS page
WHERE page.matched OR page.walked = @scan::integer
LIMIT @max::integer;

-- name: FileListTenantBySize :many
-- One page of the tenant's files (a scope without a department), largest first, after the cursor (@after_size, @after_id), with no optional filter: at most @max rows.
SELECT id, key, cdn, original_name, size_bytes, content_type, visibility, status, is_temporary, disposition,
    checksum, etag, width, height, extra_data, module, entity, entity_id, type, created_at, completed_at, expired_at
FROM uploaded_file
WHERE tenant_code = @tenant_code
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
    AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
    AND (size_bytes, id) < (@after_size::bigint, @after_id::uuid)
ORDER BY size_bytes DESC, id DESC
LIMIT @max::integer;

-- name: FileListTenantBySizeFiltered :many
-- One page of the tenant's files (a scope without a department), largest first, after the cursor (@after_size, @after_id), filtered: at most @max rows of a walk of at most @scan visible rows.
SELECT *
FROM (
    SELECT walk.*,
        coalesce((sqlc.narg('module')::text IS NULL OR walk.module = sqlc.narg('module')::text)
            AND (sqlc.narg('entity')::text IS NULL OR walk.entity = sqlc.narg('entity')::text)
            AND (sqlc.narg('entity_id')::text IS NULL OR walk.entity_id = sqlc.narg('entity_id')::text)
            AND (sqlc.narg('content_type')::text IS NULL OR walk.content_type = sqlc.narg('content_type')::text)
            AND (sqlc.narg('content_type_prefix')::text IS NULL OR walk.content_type LIKE sqlc.narg('content_type_prefix')::text || '%')
            AND (sqlc.narg('visibility')::text IS NULL OR walk.visibility = sqlc.narg('visibility')::text)
            AND (sqlc.narg('is_temporary')::boolean IS NULL OR walk.is_temporary = sqlc.narg('is_temporary')::boolean)
            AND (sqlc.narg('created_from')::timestamptz IS NULL OR walk.created_at >= sqlc.narg('created_from')::timestamptz)
            AND (sqlc.narg('created_before')::timestamptz IS NULL OR walk.created_at < sqlc.narg('created_before')::timestamptz)
            AND (sqlc.narg('name_prefix')::text IS NULL OR lower(walk.original_name) COLLATE "C" LIKE lower(sqlc.narg('name_prefix')::text) || '%'), false)::boolean AS matched
    FROM (
        SELECT *, row_number() OVER (ORDER BY size_bytes DESC, id DESC) AS walked
        FROM uploaded_file
        WHERE tenant_code = @tenant_code
            AND status = 'ready'
            AND upload_pending_at IS NULL
            AND deletion_pending_at IS NULL
            AND deleted_at IS NULL
            AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
            AND (size_bytes, id) < (@after_size::bigint, @after_id::uuid)
        ORDER BY size_bytes DESC, id DESC
        LIMIT @scan::integer
    ) AS walk
) AS page
WHERE page.matched OR page.walked = @scan::integer
LIMIT @max::integer;

-- name: FileListDepartmentByCreated :many
-- One page of the files of the scope's department (@department_code) in the tenant, newest first, after the cursor (@after_created, @after_id), with no optional filter: at most @max rows.
SELECT id, key, cdn, original_name, size_bytes, content_type, visibility, status, is_temporary, disposition,
    checksum, etag, width, height, extra_data, module, entity, entity_id, type, created_at, completed_at, expired_at
FROM uploaded_file
WHERE tenant_code = @tenant_code
    AND department_code = @department_code::text
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
    AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
    AND (created_at, id) < (@after_created::timestamptz, @after_id::uuid)
ORDER BY created_at DESC, id DESC
LIMIT @max::integer;

-- name: FileListDepartmentByCreatedFiltered :many
-- One page of the files of the scope's department (@department_code) in the tenant, newest first, after the cursor (@after_created, @after_id), filtered: at most @max rows of a walk of at most @scan visible rows.
SELECT *
FROM (
    SELECT walk.*,
        coalesce((sqlc.narg('module')::text IS NULL OR walk.module = sqlc.narg('module')::text)
            AND (sqlc.narg('entity')::text IS NULL OR walk.entity = sqlc.narg('entity')::text)
            AND (sqlc.narg('entity_id')::text IS NULL OR walk.entity_id = sqlc.narg('entity_id')::text)
            AND (sqlc.narg('content_type')::text IS NULL OR walk.content_type = sqlc.narg('content_type')::text)
            AND (sqlc.narg('content_type_prefix')::text IS NULL OR walk.content_type LIKE sqlc.narg('content_type_prefix')::text || '%')
            AND (sqlc.narg('visibility')::text IS NULL OR walk.visibility = sqlc.narg('visibility')::text)
            AND (sqlc.narg('is_temporary')::boolean IS NULL OR walk.is_temporary = sqlc.narg('is_temporary')::boolean)
            AND (sqlc.narg('name_prefix')::text IS NULL OR lower(walk.original_name) COLLATE "C" LIKE lower(sqlc.narg('name_prefix')::text) || '%'), false)::boolean AS matched
    FROM (
        SELECT *, row_number() OVER (ORDER BY created_at DESC, id DESC) AS walked
        FROM uploaded_file
        WHERE tenant_code = @tenant_code
            AND department_code = @department_code::text
            AND status = 'ready'
            AND upload_pending_at IS NULL
            AND deletion_pending_at IS NULL
            AND deleted_at IS NULL
            AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
            AND created_at >= coalesce(sqlc.narg('created_from')::timestamptz, '-infinity')
            AND created_at < coalesce(sqlc.narg('created_before')::timestamptz, 'infinity')
            AND (created_at, id) < (@after_created::timestamptz, @after_id::uuid)
        ORDER BY created_at DESC, id DESC
        LIMIT @scan::integer
    ) AS walk
) AS page
WHERE page.matched OR page.walked = @scan::integer
LIMIT @max::integer;

-- name: FileListDepartmentByName :many
-- One page of the files of the scope's department (@department_code) in the tenant, by lower-cased name, A to Z (byte order), after the cursor (@after_name, @after_id), with no optional filter: at most @max rows.
SELECT id, key, cdn, original_name, size_bytes, content_type, visibility, status, is_temporary, disposition,
    checksum, etag, width, height, extra_data, module, entity, entity_id, type, created_at, completed_at, expired_at
FROM uploaded_file
WHERE tenant_code = @tenant_code
    AND department_code = @department_code::text
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
    AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
    AND (lower(original_name) COLLATE "C", id) > (lower(@after_name::text) COLLATE "C", @after_id::uuid)
ORDER BY lower(original_name) COLLATE "C", id
LIMIT @max::integer;

-- name: FileListDepartmentByNameFiltered :many
-- One page of the files of the scope's department (@department_code) in the tenant, by lower-cased name, A to Z (byte order), after the cursor (@after_name, @after_id), filtered: at most @max rows of a walk of at most @scan visible rows.
SELECT *
FROM (
    SELECT walk.*,
        coalesce((sqlc.narg('module')::text IS NULL OR walk.module = sqlc.narg('module')::text)
            AND (sqlc.narg('entity')::text IS NULL OR walk.entity = sqlc.narg('entity')::text)
            AND (sqlc.narg('entity_id')::text IS NULL OR walk.entity_id = sqlc.narg('entity_id')::text)
            AND (sqlc.narg('content_type')::text IS NULL OR walk.content_type = sqlc.narg('content_type')::text)
            AND (sqlc.narg('content_type_prefix')::text IS NULL OR walk.content_type LIKE sqlc.narg('content_type_prefix')::text || '%')
            AND (sqlc.narg('visibility')::text IS NULL OR walk.visibility = sqlc.narg('visibility')::text)
            AND (sqlc.narg('is_temporary')::boolean IS NULL OR walk.is_temporary = sqlc.narg('is_temporary')::boolean)
            AND (sqlc.narg('created_from')::timestamptz IS NULL OR walk.created_at >= sqlc.narg('created_from')::timestamptz)
            AND (sqlc.narg('created_before')::timestamptz IS NULL OR walk.created_at < sqlc.narg('created_before')::timestamptz)
            AND (sqlc.narg('name_prefix')::text IS NULL OR lower(walk.original_name) COLLATE "C" LIKE lower(sqlc.narg('name_prefix')::text) || '%'), false)::boolean AS matched
    FROM (
        SELECT *, row_number() OVER (ORDER BY lower(original_name) COLLATE "C", id) AS walked
        FROM uploaded_file
        WHERE tenant_code = @tenant_code
            AND department_code = @department_code::text
            AND status = 'ready'
            AND upload_pending_at IS NULL
            AND deletion_pending_at IS NULL
            AND deleted_at IS NULL
            AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
            AND (lower(original_name) COLLATE "C", id) > (lower(@after_name::text) COLLATE "C", @after_id::uuid)
        ORDER BY lower(original_name) COLLATE "C", id
        LIMIT @scan::integer
    ) AS walk
) AS page
WHERE page.matched OR page.walked = @scan::integer
LIMIT @max::integer;

-- name: FileListDepartmentBySize :many
-- One page of the files of the scope's department (@department_code) in the tenant, largest first, after the cursor (@after_size, @after_id), with no optional filter: at most @max rows.
SELECT id, key, cdn, original_name, size_bytes, content_type, visibility, status, is_temporary, disposition,
    checksum, etag, width, height, extra_data, module, entity, entity_id, type, created_at, completed_at, expired_at
FROM uploaded_file
WHERE tenant_code = @tenant_code
    AND department_code = @department_code::text
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
    AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
    AND (size_bytes, id) < (@after_size::bigint, @after_id::uuid)
ORDER BY size_bytes DESC, id DESC
LIMIT @max::integer;

-- name: FileListDepartmentBySizeFiltered :many
-- One page of the files of the scope's department (@department_code) in the tenant, largest first, after the cursor (@after_size, @after_id), filtered: at most @max rows of a walk of at most @scan visible rows.
SELECT *
FROM (
    SELECT walk.*,
        coalesce((sqlc.narg('module')::text IS NULL OR walk.module = sqlc.narg('module')::text)
            AND (sqlc.narg('entity')::text IS NULL OR walk.entity = sqlc.narg('entity')::text)
            AND (sqlc.narg('entity_id')::text IS NULL OR walk.entity_id = sqlc.narg('entity_id')::text)
            AND (sqlc.narg('content_type')::text IS NULL OR walk.content_type = sqlc.narg('content_type')::text)
            AND (sqlc.narg('content_type_prefix')::text IS NULL OR walk.content_type LIKE sqlc.narg('content_type_prefix')::text || '%')
            AND (sqlc.narg('visibility')::text IS NULL OR walk.visibility = sqlc.narg('visibility')::text)
            AND (sqlc.narg('is_temporary')::boolean IS NULL OR walk.is_temporary = sqlc.narg('is_temporary')::boolean)
            AND (sqlc.narg('created_from')::timestamptz IS NULL OR walk.created_at >= sqlc.narg('created_from')::timestamptz)
            AND (sqlc.narg('created_before')::timestamptz IS NULL OR walk.created_at < sqlc.narg('created_before')::timestamptz)
            AND (sqlc.narg('name_prefix')::text IS NULL OR lower(walk.original_name) COLLATE "C" LIKE lower(sqlc.narg('name_prefix')::text) || '%'), false)::boolean AS matched
    FROM (
        SELECT *, row_number() OVER (ORDER BY size_bytes DESC, id DESC) AS walked
        FROM uploaded_file
        WHERE tenant_code = @tenant_code
            AND department_code = @department_code::text
            AND status = 'ready'
            AND upload_pending_at IS NULL
            AND deletion_pending_at IS NULL
            AND deleted_at IS NULL
            AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
            AND (size_bytes, id) < (@after_size::bigint, @after_id::uuid)
        ORDER BY size_bytes DESC, id DESC
        LIMIT @scan::integer
    ) AS walk
) AS page
WHERE page.matched OR page.walked = @scan::integer
LIMIT @max::integer;

-- The files of one record. Their own index (uploaded_file_list_record_idx:
-- tenant, entity, entity id, newest first; visible rows only) finds them
-- whatever else the tenant or the owner holds: the tenant and owner lists
-- above, given an entity filter, walk the whole scope's list index and
-- filter it. A record holds a handful of files, so the name and size orders
-- sort what the index found.

-- name: FileListRecordByCreated :many
-- One page of the files attached to the record (@entity, @entity_id), the owner's when @user_id is given, newest first, after the cursor (@after_created, @after_id); at most @max rows.
SELECT id, key, cdn, original_name, size_bytes, content_type, visibility, status, is_temporary, disposition,
    checksum, etag, width, height, extra_data, module, entity, entity_id, type, created_at, completed_at, expired_at
FROM uploaded_file
WHERE tenant_code = @tenant_code
    AND entity = @entity::text
    AND entity_id = @entity_id::text
    AND (sqlc.narg('user_id')::text IS NULL OR user_id = sqlc.narg('user_id')::text)
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
    AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
    AND (sqlc.narg('module')::text IS NULL OR module = sqlc.narg('module')::text)
    AND (sqlc.narg('content_type')::text IS NULL OR content_type = sqlc.narg('content_type')::text)
    AND (sqlc.narg('content_type_prefix')::text IS NULL OR content_type LIKE sqlc.narg('content_type_prefix')::text || '%')
    AND (sqlc.narg('visibility')::text IS NULL OR visibility = sqlc.narg('visibility')::text)
    AND (sqlc.narg('is_temporary')::boolean IS NULL OR is_temporary = sqlc.narg('is_temporary')::boolean)
    AND (sqlc.narg('created_from')::timestamptz IS NULL OR created_at >= sqlc.narg('created_from')::timestamptz)
    AND (sqlc.narg('created_before')::timestamptz IS NULL OR created_at < sqlc.narg('created_before')::timestamptz)
    AND (sqlc.narg('name_prefix')::text IS NULL OR lower(original_name) COLLATE "C" LIKE lower(sqlc.narg('name_prefix')::text) || '%')
    AND (created_at, id) < (@after_created::timestamptz, @after_id::uuid)
ORDER BY created_at DESC, id DESC
LIMIT @max::integer;

-- name: FileListRecordByName :many
-- One page of the files attached to the record (@entity, @entity_id), the owner's when @user_id is given, by lower-cased name, A to Z (byte order), after the cursor (@after_name, @after_id); at most @max rows.
SELECT id, key, cdn, original_name, size_bytes, content_type, visibility, status, is_temporary, disposition,
    checksum, etag, width, height, extra_data, module, entity, entity_id, type, created_at, completed_at, expired_at
FROM uploaded_file
WHERE tenant_code = @tenant_code
    AND entity = @entity::text
    AND entity_id = @entity_id::text
    AND (sqlc.narg('user_id')::text IS NULL OR user_id = sqlc.narg('user_id')::text)
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
    AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
    AND (sqlc.narg('module')::text IS NULL OR module = sqlc.narg('module')::text)
    AND (sqlc.narg('content_type')::text IS NULL OR content_type = sqlc.narg('content_type')::text)
    AND (sqlc.narg('content_type_prefix')::text IS NULL OR content_type LIKE sqlc.narg('content_type_prefix')::text || '%')
    AND (sqlc.narg('visibility')::text IS NULL OR visibility = sqlc.narg('visibility')::text)
    AND (sqlc.narg('is_temporary')::boolean IS NULL OR is_temporary = sqlc.narg('is_temporary')::boolean)
    AND (sqlc.narg('created_from')::timestamptz IS NULL OR created_at >= sqlc.narg('created_from')::timestamptz)
    AND (sqlc.narg('created_before')::timestamptz IS NULL OR created_at < sqlc.narg('created_before')::timestamptz)
    AND (sqlc.narg('name_prefix')::text IS NULL OR lower(original_name) COLLATE "C" LIKE lower(sqlc.narg('name_prefix')::text) || '%')
    AND (lower(original_name) COLLATE "C", id) > (lower(@after_name::text) COLLATE "C", @after_id::uuid)
ORDER BY lower(original_name) COLLATE "C", id
LIMIT @max::integer;

-- name: FileListRecordBySize :many
-- One page of the files attached to the record (@entity, @entity_id), the owner's when @user_id is given, largest first, after the cursor (@after_size, @after_id); at most @max rows.
SELECT id, key, cdn, original_name, size_bytes, content_type, visibility, status, is_temporary, disposition,
    checksum, etag, width, height, extra_data, module, entity, entity_id, type, created_at, completed_at, expired_at
FROM uploaded_file
WHERE tenant_code = @tenant_code
    AND entity = @entity::text
    AND entity_id = @entity_id::text
    AND (sqlc.narg('user_id')::text IS NULL OR user_id = sqlc.narg('user_id')::text)
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
    AND (NOT is_temporary OR expired_at > coalesce(sqlc.narg('now')::timestamptz, now()))
    AND (sqlc.narg('module')::text IS NULL OR module = sqlc.narg('module')::text)
    AND (sqlc.narg('content_type')::text IS NULL OR content_type = sqlc.narg('content_type')::text)
    AND (sqlc.narg('content_type_prefix')::text IS NULL OR content_type LIKE sqlc.narg('content_type_prefix')::text || '%')
    AND (sqlc.narg('visibility')::text IS NULL OR visibility = sqlc.narg('visibility')::text)
    AND (sqlc.narg('is_temporary')::boolean IS NULL OR is_temporary = sqlc.narg('is_temporary')::boolean)
    AND (sqlc.narg('created_from')::timestamptz IS NULL OR created_at >= sqlc.narg('created_from')::timestamptz)
    AND (sqlc.narg('created_before')::timestamptz IS NULL OR created_at < sqlc.narg('created_before')::timestamptz)
    AND (sqlc.narg('name_prefix')::text IS NULL OR lower(original_name) COLLATE "C" LIKE lower(sqlc.narg('name_prefix')::text) || '%')
    AND (size_bytes, id) < (@after_size::bigint, @after_id::uuid)
ORDER BY size_bytes DESC, id DESC
LIMIT @max::integer;

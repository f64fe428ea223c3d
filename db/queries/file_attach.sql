-- Attaching files to domain records and caller-defined extra data.
--
-- module/entity/entity_id/type are provenance only: the host has already
-- loaded and authorized the domain resource before it marks a file used.
-- The batch updates run after the matching FileLockVisibleBy* query in the
-- same transaction has confirmed every id or reference, so a batch is marked
-- whole or not at all.
--
-- Every transition that changes what a file is (ready, attached, deleted,
-- expired, purged, failed, abandoned) writes its lifecycle event in the same
-- statement, a data-modifying CTE into uploaded_file_event (see
-- event_outbox.sql): the event commits, or rolls back, with the transition.

-- name: FileMarkUsedByIDs :many
-- visible -> visible and used, for the ids in @ids within the scope. The
-- first used_at is kept; provenance is replaced by the given values (NULL
-- keeps the current value). Returns the ids it marked.
-- Writes file.attached per file.
WITH changed AS (
    UPDATE uploaded_file
    SET
        used_at = coalesce(used_at, coalesce(sqlc.narg('now')::timestamptz, now())),
        module = coalesce(sqlc.narg('module')::text, module),
        entity = coalesce(sqlc.narg('entity')::text, entity),
        entity_id = coalesce(sqlc.narg('entity_id')::text, entity_id),
        type = coalesce(sqlc.narg('type')::text, type),
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE uploaded_file.id = any(@ids::uuid[])
        AND uploaded_file.tenant_code = @tenant_code
        AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
        AND (sqlc.narg('owner_user_id')::text IS NULL OR user_id = sqlc.narg('owner_user_id')::text)
        AND status = 'ready'
        AND upload_pending_at IS NULL
        AND deletion_pending_at IS NULL
        AND deleted_at IS NULL
    RETURNING uploaded_file.*
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'file.attached', changed.tenant_code, changed.id, changed.updated_at, NULL, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
)
SELECT id FROM changed;

-- name: FileMarkUsedByReferences :many
-- As FileMarkUsedByIDs, for exact storage references (key or cdn); useFiles
-- and the new side of changeFiles.
-- Writes file.attached per file.
WITH changed AS (
    UPDATE uploaded_file
    SET
        used_at = coalesce(used_at, coalesce(sqlc.narg('now')::timestamptz, now())),
        module = coalesce(sqlc.narg('module')::text, module),
        entity = coalesce(sqlc.narg('entity')::text, entity),
        entity_id = coalesce(sqlc.narg('entity_id')::text, entity_id),
        type = coalesce(sqlc.narg('type')::text, type),
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE (uploaded_file.key = any(@refs::text[]) OR uploaded_file.cdn = any(@refs::text[]))
        AND uploaded_file.tenant_code = @tenant_code
        AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
        AND (sqlc.narg('owner_user_id')::text IS NULL OR user_id = sqlc.narg('owner_user_id')::text)
        AND status = 'ready'
        AND upload_pending_at IS NULL
        AND deletion_pending_at IS NULL
        AND deleted_at IS NULL
    RETURNING uploaded_file.*
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'file.attached', changed.tenant_code, changed.id, changed.updated_at, NULL, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
)
SELECT id FROM changed;

-- name: FileMergeExtraData :one
-- Partial update of extra_data: a top-level JSONB merge done by the database
-- (extra_data || @patch), never read-modify-write, so two concurrent partial
-- updates of different keys both survive. @patch must be a JSON object (the
-- table's CHECK refuses anything else). A merged object longer than
-- @max_bytes (as JSON text) fails the statement with SQLSTATE UFX01 and
-- changes nothing; the bound is checked on the row the scope matched, so a
-- file out of scope is zero rows either way. Zero rows: missing, out of
-- scope or hidden.
UPDATE uploaded_file
SET
    extra_data = CASE WHEN octet_length((extra_data || @patch::jsonb)::text) > @max_bytes::integer
        THEN uploaded_file_extra_data_too_large()
        ELSE extra_data || @patch::jsonb END,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = @id
    AND tenant_code = @tenant_code
    AND (sqlc.narg('department_code')::text IS NULL OR department_code = sqlc.narg('department_code')::text)
    AND (sqlc.narg('owner_user_id')::text IS NULL OR user_id = sqlc.narg('owner_user_id')::text)
    AND status = 'ready'
    AND upload_pending_at IS NULL
    AND deletion_pending_at IS NULL
    AND deleted_at IS NULL
RETURNING id, extra_data;

-- Rescans and quarantine (cross-tenant, trusted maintenance only).
--
--   FileRescanBatch        ready files, in id order, for a rescan
--   FileRescanTenantBatch  the same, of one tenant
--   FileQuarantine    ready       -> quarantined (hidden from every read)
--   FileUnquarantine  quarantined -> ready
--
-- Every read of a file requires status = 'ready', so a quarantined file
-- answers as a missing one does, everywhere. Each transition writes its
-- lifecycle event in the same statement.

-- name: FileRescanBatch :many
-- The next ready, visible files of every tenant after @after_id in id
-- order (the primary key's) created at or after @since (NULL: any time),
-- at most @max of them, from a walk of at most @scan files: a row comes
-- back when it was created since, or when the walk ended on it (walked =
-- @scan), and the rescan goes on after it. However few files were created
-- since, a statement reads at most @scan rows; over a whole run the table
-- is read once. The columns are the filtered lists' (file_list.sql).
SELECT *
FROM (
    SELECT walk.*,
        coalesce(sqlc.narg('since')::timestamptz IS NULL OR walk.created_at >= sqlc.narg('since')::timestamptz, false)::boolean AS matched
    FROM (
        SELECT *, row_number() OVER (ORDER BY id) AS walked
        FROM uploaded_file
        WHERE id > @after_id::uuid
            AND status = 'ready'
            AND upload_pending_at IS NULL
            AND deletion_pending_at IS NULL
            AND deleted_at IS NULL
        ORDER BY id
        LIMIT @scan::integer
    ) AS walk
) AS batch
WHERE batch.matched OR batch.walked = @scan::integer
LIMIT @max::integer;

-- name: FileRescanTenantBatch :many
-- FileRescanBatch within @tenant: its own statement and index
-- (uploaded_file_rescan_tenant_idx), so that a plan made without the
-- arguments reads the tenant's rows only, and never sorts them.
SELECT *
FROM (
    SELECT walk.*,
        coalesce(sqlc.narg('since')::timestamptz IS NULL OR walk.created_at >= sqlc.narg('since')::timestamptz, false)::boolean AS matched
    FROM (
        SELECT *, row_number() OVER (ORDER BY tenant_code, id) AS walked
        FROM uploaded_file
        WHERE tenant_code = @tenant::text
            AND id > @after_id::uuid
            AND status = 'ready'
            AND upload_pending_at IS NULL
            AND deletion_pending_at IS NULL
            AND deleted_at IS NULL
        ORDER BY tenant_code, id
        LIMIT @scan::integer
    ) AS walk
) AS batch
WHERE batch.matched OR batch.walked = @scan::integer
LIMIT @max::integer;

-- name: FileQuarantine :one
-- ready -> quarantined, after a rescan found malware in it. Writes
-- file.quarantined. Zero rows: not a ready file any more (deleted meanwhile).
WITH changed AS (
    UPDATE uploaded_file
    SET
        status = 'quarantined',
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE uploaded_file.id = @id
        AND uploaded_file.status = 'ready'
        AND uploaded_file.upload_pending_at IS NULL
        AND uploaded_file.deletion_pending_at IS NULL
        AND uploaded_file.deleted_at IS NULL
    RETURNING *
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'file.quarantined', changed.tenant_code, changed.id, changed.updated_at, 'content.infected', uploaded_file_event_data(to_jsonb(changed))
    FROM changed
)
SELECT * FROM changed;

-- name: FileUnquarantine :one
-- quarantined -> ready, by an operator (a false positive). Writes
-- file.unquarantined. Zero rows: not quarantined.
WITH changed AS (
    UPDATE uploaded_file
    SET
        status = 'ready',
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE uploaded_file.id = @id
        AND uploaded_file.status = 'quarantined'
    RETURNING *
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'file.unquarantined', changed.tenant_code, changed.id, changed.updated_at, NULL, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
)
SELECT * FROM changed;

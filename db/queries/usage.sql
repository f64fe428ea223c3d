-- Storage quotas: the usage the transitions keep (uploaded_file_usage, see
-- the reservation in FileInsertHidden/FileInsertPending and the release in
-- every transition that takes a row's space back), and the per-tenant
-- limit overrides (uploaded_file_quota).

-- name: UsageRead :many
-- The tenant's (user_id '') and the owner's usage with the limits that
-- apply (the tenant's override, else the configured default; 0:
-- unlimited). A missing usage row reads as zero.
SELECT
    holder.user_id,
    coalesce(uploaded_file_usage.bytes, 0)::bigint AS bytes,
    coalesce(uploaded_file_usage.files, 0)::bigint AS files,
    (CASE WHEN holder.user_id = ''
        THEN coalesce(uploaded_file_quota.tenant_bytes, @default_tenant_bytes::bigint)
        ELSE coalesce(uploaded_file_quota.owner_bytes, @default_owner_bytes::bigint) END)::bigint AS bytes_limit,
    (CASE WHEN holder.user_id = ''
        THEN coalesce(uploaded_file_quota.tenant_files, @default_tenant_files::bigint)
        ELSE coalesce(uploaded_file_quota.owner_files, @default_owner_files::bigint) END)::bigint AS files_limit
FROM (SELECT '' AS user_id UNION ALL SELECT @user_id::text) AS holder
LEFT JOIN uploaded_file_usage ON uploaded_file_usage.tenant_code = @tenant_code AND uploaded_file_usage.user_id = holder.user_id
LEFT JOIN uploaded_file_quota ON uploaded_file_quota.tenant_code = @tenant_code
ORDER BY holder.user_id;

-- name: QuotaSet :one
-- Sets a tenant's overrides (uploadedfile quota set): a NULL argument keeps
-- the current override; -1 clears it back to the configured default.
INSERT INTO uploaded_file_quota (tenant_code, tenant_bytes, tenant_files, owner_bytes, owner_files, updated_at)
VALUES (
    @tenant_code,
    nullif(sqlc.narg('tenant_bytes')::bigint, -1),
    nullif(sqlc.narg('tenant_files')::bigint, -1),
    nullif(sqlc.narg('owner_bytes')::bigint, -1),
    nullif(sqlc.narg('owner_files')::bigint, -1),
    now())
ON CONFLICT (tenant_code) DO UPDATE SET
    tenant_bytes = CASE WHEN sqlc.narg('tenant_bytes')::bigint IS NULL THEN uploaded_file_quota.tenant_bytes ELSE excluded.tenant_bytes END,
    tenant_files = CASE WHEN sqlc.narg('tenant_files')::bigint IS NULL THEN uploaded_file_quota.tenant_files ELSE excluded.tenant_files END,
    owner_bytes = CASE WHEN sqlc.narg('owner_bytes')::bigint IS NULL THEN uploaded_file_quota.owner_bytes ELSE excluded.owner_bytes END,
    owner_files = CASE WHEN sqlc.narg('owner_files')::bigint IS NULL THEN uploaded_file_quota.owner_files ELSE excluded.owner_files END,
    updated_at = now()
RETURNING *;

-- name: QuotaList :many
-- Every tenant with an override or a usage, with its overrides (NULL: the
-- default) and its total usage, by tenant (uploadedfile quota list/get).
SELECT
    tenants.tenant_code,
    uploaded_file_quota.tenant_bytes,
    uploaded_file_quota.tenant_files,
    uploaded_file_quota.owner_bytes,
    uploaded_file_quota.owner_files,
    coalesce(uploaded_file_usage.bytes, 0)::bigint AS used_bytes,
    coalesce(uploaded_file_usage.files, 0)::bigint AS used_files
FROM (
    SELECT uploaded_file_quota.tenant_code FROM uploaded_file_quota
    UNION
    SELECT uploaded_file_usage.tenant_code FROM uploaded_file_usage WHERE uploaded_file_usage.user_id = ''
) AS tenants
LEFT JOIN uploaded_file_quota ON uploaded_file_quota.tenant_code = tenants.tenant_code
LEFT JOIN uploaded_file_usage ON uploaded_file_usage.tenant_code = tenants.tenant_code AND uploaded_file_usage.user_id = ''
WHERE sqlc.narg('tenant')::text IS NULL OR tenants.tenant_code = sqlc.narg('tenant')::text
ORDER BY tenants.tenant_code
LIMIT @max::integer;

-- name: UsageTenants :many
-- Every tenant with a usage row (its total, user_id ''), in byte order:
-- what recount-usage walks, one tenant per transaction.
SELECT tenant_code
FROM uploaded_file_usage
WHERE user_id = ''
ORDER BY tenant_code COLLATE "C";

-- name: UsageLockTenants :many
-- Locks the usage rows of the tenants @tenant_codes -- each tenant's total
-- ('') before its owners -- in the one lock order of usage rows:
-- (tenant_code, user_id) under COLLATE "C", whatever the database's
-- collation. UsageRecount runs after it in the same transaction: every
-- transition that changes these tenants' usage either committed before
-- (and the recount's snapshot, taken after the locks, counts its rows) or
-- waits for the recount to commit (and changes the recounted usage after
-- it). No lost update.
SELECT user_id
FROM uploaded_file_usage
WHERE tenant_code = any(@tenant_codes::text[])
ORDER BY tenant_code COLLATE "C", user_id COLLATE "C"
FOR UPDATE;

-- name: UsageRecount :execrows
-- Recomputes the usage of the tenants @tenants (NULL: every tenant) from
-- the rows that hold space (no deletion claim, not deleted), for repair
-- after manual changes: usage rows are set to the sums, and those no row
-- holds any more to zero. The service runs it for up to 100 tenants at a
-- time, after UsageLockTenants over them in the same transaction, so no
-- transition of those tenants commits between the sums and the write. It
-- reads the table (no index holds every row that holds space by tenant):
-- a hundred tenants a pass, not one.
WITH files AS (
    SELECT uploaded_file.tenant_code, coalesce(uploaded_file.user_id, '') AS user_id,
        sum(uploaded_file.size_bytes)::bigint AS bytes, count(*)::bigint AS files
    FROM uploaded_file
    WHERE uploaded_file.deletion_pending_at IS NULL
        AND uploaded_file.deleted_at IS NULL
        AND (sqlc.narg('tenants')::text[] IS NULL OR uploaded_file.tenant_code = any(sqlc.narg('tenants')::text[]))
    GROUP BY GROUPING SETS ((uploaded_file.tenant_code, uploaded_file.user_id), (uploaded_file.tenant_code))
), variants AS (
    -- Variant bytes count to the file's owner from their finish until
    -- their row is removed, whatever the file's state.
    SELECT uploaded_file.tenant_code, coalesce(uploaded_file.user_id, '') AS user_id,
        sum(uploaded_file_variant.size_bytes)::bigint AS bytes
    FROM uploaded_file_variant
    JOIN uploaded_file ON uploaded_file.id = uploaded_file_variant.file_id
    WHERE uploaded_file_variant.size_bytes IS NOT NULL
        AND (sqlc.narg('tenants')::text[] IS NULL OR uploaded_file.tenant_code = any(sqlc.narg('tenants')::text[]))
    GROUP BY GROUPING SETS ((uploaded_file.tenant_code, uploaded_file.user_id), (uploaded_file.tenant_code))
), held AS (
    SELECT all_rows.tenant_code, all_rows.user_id, sum(all_rows.bytes)::bigint AS bytes, sum(all_rows.files)::bigint AS files
    FROM (
        SELECT files.tenant_code, files.user_id, files.bytes, files.files FROM files
        UNION ALL
        SELECT variants.tenant_code, variants.user_id, variants.bytes, 0 FROM variants
    ) AS all_rows
    GROUP BY all_rows.tenant_code, all_rows.user_id
), zeroed AS (
    UPDATE uploaded_file_usage
    SET bytes = 0, files = 0
    WHERE (sqlc.narg('tenants')::text[] IS NULL OR uploaded_file_usage.tenant_code = any(sqlc.narg('tenants')::text[]))
        AND NOT EXISTS (
            SELECT 1 FROM held
            WHERE held.tenant_code = uploaded_file_usage.tenant_code AND held.user_id = uploaded_file_usage.user_id)
)
INSERT INTO uploaded_file_usage (tenant_code, user_id, bytes, files)
SELECT held.tenant_code, held.user_id, held.bytes, held.files
FROM held
ON CONFLICT (tenant_code, user_id) DO UPDATE SET bytes = excluded.bytes, files = excluded.files;

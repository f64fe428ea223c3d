-- The usage release, written once: every transition that takes rows out of
-- what counts against a quota (a failed, abandoned, deleted or swept file;
-- a removed variant) hands its rows to this function instead of repeating
-- the aggregate, the lock order and the update in a CTE of its own.
--
-- Each row gives back its bytes (and files_each files) to its owner
-- (tenant_code, user_id) and to its tenant's total (user_id ''). The usage
-- rows are locked in (tenant_code, user_id) order before they change, the
-- order every writer of uploaded_file_usage takes, so two releases never
-- deadlock. A usage never goes below zero: usage that rows changed by hand
-- made wrong never blocks a deletion (recount-usage repairs it).
--
-- Called from a CTE over the changed rows (one array element per row; NULL
-- or empty arrays release nothing). The CTE must be read by the statement's
-- final SELECT, or PostgreSQL does not run it. Returns how many usage rows
-- changed.
CREATE FUNCTION uploaded_file_usage_release(tenant_codes text[], user_ids text[], sizes bigint[], files_each integer)
RETURNS bigint
LANGUAGE sql VOLATILE AS $$
    WITH freed AS (
        SELECT holding.tenant_code, holding.user_id,
               coalesce(sum(holding.size_bytes), 0)::bigint AS bytes, (count(*) * files_each)::bigint AS files
        FROM unnest(tenant_codes, user_ids, sizes) AS r(tenant_code, user_id, size_bytes)
        CROSS JOIN LATERAL (VALUES (r.tenant_code, r.user_id, r.size_bytes), (r.tenant_code, '', r.size_bytes))
            AS holding(tenant_code, user_id, size_bytes)
        GROUP BY holding.tenant_code, holding.user_id
    ), usage_locked AS (
        SELECT uploaded_file_usage.tenant_code, uploaded_file_usage.user_id
        FROM uploaded_file_usage
        JOIN freed ON freed.tenant_code = uploaded_file_usage.tenant_code AND freed.user_id = uploaded_file_usage.user_id
        ORDER BY uploaded_file_usage.tenant_code, uploaded_file_usage.user_id
        FOR UPDATE OF uploaded_file_usage
    ), released AS (
        UPDATE uploaded_file_usage
        SET
            bytes = greatest(0, uploaded_file_usage.bytes - freed.bytes),
            files = greatest(0, uploaded_file_usage.files - freed.files)
        FROM freed, usage_locked
        WHERE uploaded_file_usage.tenant_code = freed.tenant_code
            AND uploaded_file_usage.user_id = freed.user_id
            AND usage_locked.tenant_code = freed.tenant_code
            AND usage_locked.user_id = freed.user_id
        RETURNING 1
    )
    SELECT count(*) FROM released
$$;

COMMENT ON FUNCTION uploaded_file_usage_release(text[], text[], bigint[], integer) IS 'Gives the bytes (and files_each files) of the given rows back to their owners'' and tenants'' usage, locking the usage rows in key order, never below zero; returns how many usage rows changed.';

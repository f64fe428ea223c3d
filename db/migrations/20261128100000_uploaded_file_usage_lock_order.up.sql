-- The one lock order of usage rows is (tenant_code, user_id) in byte order
-- (COLLATE "C"), whatever collation the database was created with: the
-- group-committed inserts sort their batch by bytes in Go, and a release
-- that locked in the database's collation (an ICU en-US one puts "a"
-- before "B", bytes put "B" first) could deadlock against such a batch.
-- Only the ORDER BY of the lock changes; the function's signature and
-- results stay, so the previous release runs against it unchanged.
CREATE OR REPLACE FUNCTION uploaded_file_usage_release(tenant_codes text[], user_ids text[], sizes bigint[], files_each integer)
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
        ORDER BY uploaded_file_usage.tenant_code COLLATE "C", uploaded_file_usage.user_id COLLATE "C"
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

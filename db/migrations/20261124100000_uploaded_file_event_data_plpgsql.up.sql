-- The event data function in PL/pgSQL, same signature and output. As a
-- LANGUAGE sql function it could not be inlined (its argument, to_jsonb of
-- the row, is used eighteen times), so every transition ran it through the
-- SQL-function executor: 133 µs per event against 14 µs here, measured on
-- 45,000 rows (SELECT count(uploaded_file_event_data(to_jsonb(f))) FROM
-- uploaded_file f), identical results on every row. A PL/pgSQL RETURN of
-- one expression is evaluated as a simple expression with a cached plan.
CREATE OR REPLACE FUNCTION uploaded_file_event_data(f jsonb) RETURNS jsonb
LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    RETURN jsonb_strip_nulls(jsonb_build_object(
        'id', f->>'id',
        'userId', f->>'user_id',
        'departmentCode', f->>'department_code',
        'originalName', f->>'original_name',
        'sizeBytes', (f->>'size_bytes')::bigint,
        'contentType', f->>'content_type',
        'visibility', f->>'visibility',
        'status', f->>'status',
        'isTemporary', (f->>'is_temporary')::boolean,
        'disposition', f->>'disposition',
        'checksum', f->>'checksum',
        'module', f->>'module',
        'entity', f->>'entity',
        'entityId', f->>'entity_id',
        'type', f->>'type',
        'createdAt', to_char((f->>'created_at')::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'completedAt', to_char((f->>'completed_at')::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'expiredAt', to_char((f->>'expired_at')::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    ));
END
$$;

-- Back to the LANGUAGE sql definition of 20261123000000 (same output).
CREATE OR REPLACE FUNCTION uploaded_file_event_data(f jsonb) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
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
    ))
$$;

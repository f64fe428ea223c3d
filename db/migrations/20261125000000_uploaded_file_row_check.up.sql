-- The row invariants of uploaded_file and uploaded_file_event, checked by
-- one CHECK constraint per table that calls a PL/pgSQL function, instead of
-- one CHECK constraint per invariant. Same invariants, same errors.
--
-- Why: PostgreSQL reads a table's CHECK constraints from their stored node
-- trees and plans them again for every INSERT or UPDATE statement
-- (ExecRelCheck: stringToNode, expression_planner, ExecInitExpr), however
-- few rows it writes. uploaded_file's seventeen constraints are 15.6 KB of
-- node trees, uploaded_file_event's three 4.5 KB. A buffer upload writes
-- uploaded_file twice (insert hidden, activate) and an event once, so it
-- paid about 90 µs of database CPU for planning checks on one row each
-- time: pgbench, one client, INSERT + UPDATE of one row on a copy of the
-- table, synchronous_commit off: 0.437-0.445 ms with the constraints,
-- 0.331-0.358 ms with none, 0.346-0.356 ms with the function below.
-- A function call is one node to plan; PL/pgSQL keeps its compiled body,
-- and the CASE is a simple expression it evaluates with a cached plan.
--
-- Errors: a failing invariant raises check_violation (23514) naming the
-- invariant's former constraint in the message and in the error's
-- constraint field, exactly as the constraint did; when several fail, the
-- first by name is reported, as PostgreSQL orders a table's checks. NULL
-- passes, as in a CHECK constraint (a CASE branch whose test is NULL is not
-- taken).
--
-- Changing an invariant: drop the table's constraint, replace the
-- function, add the constraint again, in one migration, so that every
-- existing row is checked against the new function. Replacing the function
-- alone would not re-check the rows that exist.

-- Writers queue behind a DDL statement waiting for its lock: wait at most
-- 5 s (then nothing is applied and `uploadedfile migrate up` tries again).
SET LOCAL lock_timeout = '5s';

CREATE FUNCTION uploaded_file_row_check(
    tenant_code text,
    department_code text,
    user_id text,
    key text,
    cdn text,
    pending_key text,
    size_bytes bigint,
    status text,
    visibility text,
    disposition text,
    is_temporary boolean,
    extra_data jsonb,
    upload_pending_at timestamptz,
    upload_expires_at timestamptz,
    completion_lease_until timestamptz,
    staging_cleanup_at timestamptz
) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    failed text;
BEGIN
    failed := CASE
        WHEN NOT (cdn IS NULL OR (char_length(cdn) >= 1 AND char_length(cdn) <= 2048))
            THEN 'uploaded_file_cdn_length_check'
        -- A direct upload's cleanup lease never ends before its upload
        -- target does.
        WHEN NOT (upload_expires_at IS NULL OR upload_pending_at IS NULL OR upload_pending_at >= upload_expires_at)
            THEN 'uploaded_file_cleanup_after_upload_check'
        -- Only a completing row holds a completion lease, and it always
        -- holds one.
        WHEN NOT ((status = 'completing') = (completion_lease_until IS NOT NULL))
            THEN 'uploaded_file_completion_lease_check'
        WHEN NOT (department_code IS NULL OR (char_length(department_code) >= 1 AND char_length(department_code) <= 255))
            THEN 'uploaded_file_department_code_check'
        WHEN NOT (disposition IN ('inline', 'attachment'))
            THEN 'uploaded_file_disposition_check'
        WHEN NOT (jsonb_typeof(extra_data) = 'object')
            THEN 'uploaded_file_extra_data_object_check'
        WHEN NOT (char_length(key) >= 1 AND char_length(key) <= 1024)
            THEN 'uploaded_file_key_length_check'
        WHEN NOT (pending_key IS NULL OR pending_key <> key)
            THEN 'uploaded_file_pending_key_distinct_check'
        WHEN NOT (pending_key IS NULL OR (char_length(pending_key) >= 1 AND char_length(pending_key) <= 1024))
            THEN 'uploaded_file_pending_key_length_check'
        -- A ready row carries no upload marker: it is either visible or
        -- being deleted.
        WHEN NOT (status <> 'ready' OR upload_pending_at IS NULL)
            THEN 'uploaded_file_ready_no_upload_marker_check'
        WHEN NOT (size_bytes >= 0)
            THEN 'uploaded_file_size_check'
        -- Staging cleanup only concerns a ready (or quarantined) row that
        -- still has its staging key.
        WHEN NOT (staging_cleanup_at IS NULL OR (status IN ('ready', 'quarantined') AND pending_key IS NOT NULL))
            THEN 'uploaded_file_staging_cleanup_check'
        WHEN NOT (status IN ('pending', 'completing', 'ready', 'failed', 'quarantined'))
            THEN 'uploaded_file_status_check'
        WHEN NOT (NOT is_temporary OR visibility = 'private')
            THEN 'uploaded_file_temporary_private_check'
        WHEN NOT (char_length(tenant_code) >= 1 AND char_length(tenant_code) <= 255)
            THEN 'uploaded_file_tenant_code_check'
        WHEN NOT (char_length(user_id) >= 1 AND char_length(user_id) <= 255)
            THEN 'uploaded_file_user_id_check'
        WHEN NOT (visibility IN ('public', 'private'))
            THEN 'uploaded_file_visibility_check'
    END;
    IF failed IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "uploaded_file" violates check constraint "%"', failed
            USING ERRCODE = 'check_violation', CONSTRAINT = failed, TABLE = 'uploaded_file';
    END IF;
    RETURN true;
END
$$;

COMMENT ON FUNCTION uploaded_file_row_check(text, text, text, text, text, text, bigint, text, text, text, boolean, jsonb, timestamptz, timestamptz, timestamptz, timestamptz)
    IS 'The row invariants of uploaded_file (constraint uploaded_file_row_check): true, or check_violation naming the invariant that fails. Replace it only together with the constraint (see migration 20261125000000).';

CREATE FUNCTION uploaded_file_event_row_check(type text, rule text, data jsonb) RETURNS boolean
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    failed text;
BEGIN
    failed := CASE
        WHEN NOT (jsonb_typeof(data) = 'object')
            THEN 'uploaded_file_event_data_object_check'
        WHEN NOT (rule IS NULL OR (char_length(rule) >= 1 AND char_length(rule) <= 128))
            THEN 'uploaded_file_event_rule_check'
        WHEN NOT (type IN ('file.ready', 'file.deleted', 'file.purged', 'file.expired', 'file.attached', 'file.detached',
                'upload.failed', 'upload.abandoned', 'file.quarantined', 'file.unquarantined', 'file.variant-ready'))
            THEN 'uploaded_file_event_type_check'
    END;
    IF failed IS NOT NULL THEN
        RAISE EXCEPTION 'new row for relation "uploaded_file_event" violates check constraint "%"', failed
            USING ERRCODE = 'check_violation', CONSTRAINT = failed, TABLE = 'uploaded_file_event';
    END IF;
    RETURN true;
END
$$;

COMMENT ON FUNCTION uploaded_file_event_row_check(text, text, jsonb)
    IS 'The row invariants of uploaded_file_event (constraint uploaded_file_event_row_check): true, or check_violation naming the invariant that fails. Replace it only together with the constraint (see migration 20261125000000).';

ALTER TABLE uploaded_file
    DROP CONSTRAINT uploaded_file_cdn_length_check,
    DROP CONSTRAINT uploaded_file_cleanup_after_upload_check,
    DROP CONSTRAINT uploaded_file_completion_lease_check,
    DROP CONSTRAINT uploaded_file_department_code_check,
    DROP CONSTRAINT uploaded_file_disposition_check,
    DROP CONSTRAINT uploaded_file_extra_data_object_check,
    DROP CONSTRAINT uploaded_file_key_length_check,
    DROP CONSTRAINT uploaded_file_pending_key_distinct_check,
    DROP CONSTRAINT uploaded_file_pending_key_length_check,
    DROP CONSTRAINT uploaded_file_ready_no_upload_marker_check,
    DROP CONSTRAINT uploaded_file_size_check,
    DROP CONSTRAINT uploaded_file_staging_cleanup_check,
    DROP CONSTRAINT uploaded_file_status_check,
    DROP CONSTRAINT uploaded_file_temporary_private_check,
    DROP CONSTRAINT uploaded_file_tenant_code_check,
    DROP CONSTRAINT uploaded_file_user_id_check,
    DROP CONSTRAINT uploaded_file_visibility_check,
    -- Enforced for every row written from now on; the existing rows, which
    -- the constraints it replaces held, are checked by 20261125000001.
    ADD CONSTRAINT uploaded_file_row_check CHECK (uploaded_file_row_check(
        tenant_code, department_code, user_id, key, cdn, pending_key, size_bytes, status, visibility, disposition,
        is_temporary, extra_data, upload_pending_at, upload_expires_at, completion_lease_until, staging_cleanup_at)) NOT VALID;

COMMENT ON CONSTRAINT uploaded_file_row_check ON uploaded_file IS 'The row invariants (function uploaded_file_row_check), each reported under its own name.';

ALTER TABLE uploaded_file_event
    DROP CONSTRAINT uploaded_file_event_data_object_check,
    DROP CONSTRAINT uploaded_file_event_rule_check,
    DROP CONSTRAINT uploaded_file_event_type_check,
    ADD CONSTRAINT uploaded_file_event_row_check CHECK (uploaded_file_event_row_check(type, rule, data)) NOT VALID;

COMMENT ON CONSTRAINT uploaded_file_event_row_check ON uploaded_file_event IS 'The row invariants (function uploaded_file_event_row_check), each reported under its own name.';

-- Back to one CHECK constraint per invariant (the definitions as they were
-- before 20261125000000). They are added NOT VALID: every existing row
-- already passed the same invariants in uploaded_file_row_check, so no scan
-- runs under the table's exclusive lock, and new writes are checked as
-- before. The lock is waited for at most 5 s.
SET LOCAL lock_timeout = '5s';
ALTER TABLE uploaded_file
    DROP CONSTRAINT uploaded_file_row_check,
    ADD CONSTRAINT uploaded_file_cdn_length_check CHECK (((cdn IS NULL) OR ((char_length(cdn) >= 1) AND (char_length(cdn) <= 2048)))) NOT VALID,
    ADD CONSTRAINT uploaded_file_cleanup_after_upload_check CHECK (((upload_expires_at IS NULL) OR (upload_pending_at IS NULL) OR (upload_pending_at >= upload_expires_at))) NOT VALID,
    ADD CONSTRAINT uploaded_file_completion_lease_check CHECK (((status = 'completing'::text) = (completion_lease_until IS NOT NULL))) NOT VALID,
    ADD CONSTRAINT uploaded_file_department_code_check CHECK (((department_code IS NULL) OR ((char_length(department_code) >= 1) AND (char_length(department_code) <= 255)))) NOT VALID,
    ADD CONSTRAINT uploaded_file_disposition_check CHECK ((disposition = ANY (ARRAY['inline'::text, 'attachment'::text]))) NOT VALID,
    ADD CONSTRAINT uploaded_file_extra_data_object_check CHECK ((jsonb_typeof(extra_data) = 'object'::text)) NOT VALID,
    ADD CONSTRAINT uploaded_file_key_length_check CHECK (((char_length(key) >= 1) AND (char_length(key) <= 1024))) NOT VALID,
    ADD CONSTRAINT uploaded_file_pending_key_distinct_check CHECK (((pending_key IS NULL) OR (pending_key <> key))) NOT VALID,
    ADD CONSTRAINT uploaded_file_pending_key_length_check CHECK (((pending_key IS NULL) OR ((char_length(pending_key) >= 1) AND (char_length(pending_key) <= 1024)))) NOT VALID,
    ADD CONSTRAINT uploaded_file_ready_no_upload_marker_check CHECK (((status <> 'ready'::text) OR (upload_pending_at IS NULL))) NOT VALID,
    ADD CONSTRAINT uploaded_file_size_check CHECK ((size_bytes >= 0)) NOT VALID,
    ADD CONSTRAINT uploaded_file_staging_cleanup_check CHECK (((staging_cleanup_at IS NULL) OR ((status = ANY (ARRAY['ready'::text, 'quarantined'::text])) AND (pending_key IS NOT NULL)))) NOT VALID,
    ADD CONSTRAINT uploaded_file_status_check CHECK ((status = ANY (ARRAY['pending'::text, 'completing'::text, 'ready'::text, 'failed'::text, 'quarantined'::text]))) NOT VALID,
    ADD CONSTRAINT uploaded_file_temporary_private_check CHECK (((NOT is_temporary) OR (visibility = 'private'::text))) NOT VALID,
    ADD CONSTRAINT uploaded_file_tenant_code_check CHECK (((char_length(tenant_code) >= 1) AND (char_length(tenant_code) <= 255))) NOT VALID,
    ADD CONSTRAINT uploaded_file_user_id_check CHECK (((char_length(user_id) >= 1) AND (char_length(user_id) <= 255))) NOT VALID,
    ADD CONSTRAINT uploaded_file_visibility_check CHECK ((visibility = ANY (ARRAY['public'::text, 'private'::text]))) NOT VALID;

ALTER TABLE uploaded_file_event
    DROP CONSTRAINT uploaded_file_event_row_check,
    ADD CONSTRAINT uploaded_file_event_data_object_check CHECK ((jsonb_typeof(data) = 'object'::text)) NOT VALID,
    ADD CONSTRAINT uploaded_file_event_rule_check CHECK (((rule IS NULL) OR ((char_length(rule) >= 1) AND (char_length(rule) <= 128)))) NOT VALID,
    ADD CONSTRAINT uploaded_file_event_type_check CHECK ((type = ANY (ARRAY['file.ready'::text, 'file.deleted'::text, 'file.purged'::text, 'file.expired'::text, 'file.attached'::text, 'file.detached'::text, 'upload.failed'::text, 'upload.abandoned'::text, 'file.quarantined'::text, 'file.unquarantined'::text, 'file.variant-ready'::text]))) NOT VALID;

DROP FUNCTION uploaded_file_event_row_check(text, text, jsonb);
DROP FUNCTION uploaded_file_row_check(text, text, text, text, text, text, bigint, text, text, text, boolean, jsonb, timestamptz, timestamptz, timestamptz, timestamptz);

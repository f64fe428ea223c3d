-- Storage quotas: usage per tenant and per owner, kept by the transitions
-- themselves, and per-tenant limit overrides.
--
-- A row holds space from the moment its upload starts (the hidden row of a
-- buffer upload, a direct upload's pending row) until it is released: its
-- upload fails, is aborted or abandoned, it expires, or its deletion is
-- accepted. In the columns' terms: a row holds space exactly while
-- deletion_pending_at IS NULL AND deleted_at IS NULL. Every transition that
-- takes a row out of that state subtracts it from the usage in the same
-- statement; the two inserts add it in the same statement, and refuse (the
-- whole statement fails with SQLSTATE UFQ01) when a limit would be passed.

-- usage: one row per (tenant, owner), and per tenant with user_id = ''.
CREATE TABLE uploaded_file_usage (
    tenant_code text NOT NULL,
    user_id text NOT NULL,
    bytes bigint NOT NULL DEFAULT 0,
    files bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (tenant_code, user_id),
    CONSTRAINT uploaded_file_usage_bytes_check CHECK (bytes >= 0),
    CONSTRAINT uploaded_file_usage_files_check CHECK (files >= 0)
);

COMMENT ON TABLE uploaded_file_usage IS 'Space held per owner (user_id) and per tenant (user_id = ''''): the sum over the rows that hold space (no deletion claim, not deleted), kept by the transitions.';
COMMENT ON COLUMN uploaded_file_usage.tenant_code IS 'The tenant.';
COMMENT ON COLUMN uploaded_file_usage.user_id IS 'The owner, or '''' for the tenant''s total.';
COMMENT ON COLUMN uploaded_file_usage.bytes IS 'Bytes held (declared or measured size of each row holding space).';
COMMENT ON COLUMN uploaded_file_usage.files IS 'Rows holding space.';

CREATE TABLE uploaded_file_quota (
    tenant_code text PRIMARY KEY,
    tenant_bytes bigint,
    tenant_files bigint,
    owner_bytes bigint,
    owner_files bigint,
    updated_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uploaded_file_quota_nonnegative_check CHECK (
        coalesce(tenant_bytes, 0) >= 0 AND coalesce(tenant_files, 0) >= 0
        AND coalesce(owner_bytes, 0) >= 0 AND coalesce(owner_files, 0) >= 0)
);

COMMENT ON TABLE uploaded_file_quota IS 'Per-tenant limit overrides (uploadedfile quota set); a NULL limit is the configured default, 0 is unlimited.';
COMMENT ON COLUMN uploaded_file_quota.tenant_code IS 'The tenant.';
COMMENT ON COLUMN uploaded_file_quota.tenant_bytes IS 'Bytes the tenant may hold (NULL: quota.tenantBytes; 0: unlimited).';
COMMENT ON COLUMN uploaded_file_quota.tenant_files IS 'Files the tenant may hold (NULL: quota.tenantFiles; 0: unlimited).';
COMMENT ON COLUMN uploaded_file_quota.owner_bytes IS 'Bytes each owner of the tenant may hold (NULL: quota.ownerBytes; 0: unlimited).';
COMMENT ON COLUMN uploaded_file_quota.owner_files IS 'Files each owner of the tenant may hold (NULL: quota.ownerFiles; 0: unlimited).';
COMMENT ON COLUMN uploaded_file_quota.updated_at IS 'Last change.';

-- Raised by an insert whose reservation did not fit: the whole statement
-- (the reservation of the other usage row included) is undone.
CREATE FUNCTION uploaded_file_quota_exceeded() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'uploaded_file: quota exceeded' USING ERRCODE = 'UFQ01';
END
$$;

COMMENT ON FUNCTION uploaded_file_quota_exceeded() IS 'Fails the statement with SQLSTATE UFQ01: a reservation did not fit a quota.';

-- The usage of the rows that exist already.
INSERT INTO uploaded_file_usage (tenant_code, user_id, bytes, files)
SELECT tenant_code, coalesce(user_id, ''), sum(size_bytes), count(*)
FROM uploaded_file
WHERE deletion_pending_at IS NULL AND deleted_at IS NULL
GROUP BY GROUPING SETS ((tenant_code, user_id), (tenant_code));

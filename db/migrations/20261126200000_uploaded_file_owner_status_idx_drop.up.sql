-- The index diet: uploaded_file_owner_status_idx (tenant_code,
-- user_id, status) served no query that another index does not serve
-- better: point reads by id take the primary key, the owner's lists their
-- list_owner_* indexes (it stood in front of them in every owner list's
-- plan, with a filter and a sort), the owner's usage lives in
-- uploaded_file_usage. UsageRecount of one tenant, an operator's repair
-- run while the tenant is quiet, reads the table instead.
-- Dropped CONCURRENTLY, alone in its migration: no lock on the table's
-- writers.
DROP INDEX CONCURRENTLY IF EXISTS uploaded_file_owner_status_idx;

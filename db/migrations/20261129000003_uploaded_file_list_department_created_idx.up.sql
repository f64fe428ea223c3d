-- The visible files of one department of a tenant, newest first:
-- FileListDepartmentByCreated[Filtered] (db/queries/file_list.sql), a
-- tenant's list within the caller's department. Without it the list
-- walked the tenant's index and filtered the other departments away: a
-- department holding few of a large tenant's files read the tenant for a
-- page. Partial on a department, so a deployment without departments
-- keeps no entry in it. Built CONCURRENTLY, alone in its migration; its
-- schema window is declared by 20261129000002.
CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_list_department_created_idx ON uploaded_file (tenant_code, department_code, created_at DESC, id DESC)
    WHERE department_code IS NOT NULL AND status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL;

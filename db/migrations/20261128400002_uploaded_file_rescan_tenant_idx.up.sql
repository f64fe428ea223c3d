-- One tenant's rescan (FileRescanTenantBatch, db/queries/file_quarantine.sql):
-- the tenant's ready, visible files in id order, the order a rescan's
-- checkpoint keeps. Without it a tenant's rescan walked every tenant's
-- files by primary key and filtered the others away (49,899 rows read for
-- 89 returned on the plan test's table), or sorted the whole tenant for
-- each batch of 100. Built CONCURRENTLY, alone in its migration; its
-- schema window is declared by 20261128400000.
CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_rescan_tenant_idx ON uploaded_file (tenant_code, id)
    WHERE status = 'ready' AND upload_pending_at IS NULL AND deletion_pending_at IS NULL AND deleted_at IS NULL;

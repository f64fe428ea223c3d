-- Reverts the listing indexes (lists then scan by the owner index).
DROP INDEX IF EXISTS uploaded_file_list_owner_created_idx;
DROP INDEX IF EXISTS uploaded_file_list_tenant_created_idx;
DROP INDEX IF EXISTS uploaded_file_list_owner_name_idx;
DROP INDEX IF EXISTS uploaded_file_list_tenant_name_idx;
DROP INDEX IF EXISTS uploaded_file_list_owner_size_idx;
DROP INDEX IF EXISTS uploaded_file_list_tenant_size_idx;

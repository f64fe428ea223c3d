DROP FUNCTION uploaded_file_upload_key_taken();
DELETE FROM uploaded_file_schema_compat WHERE version = 20261128100002;

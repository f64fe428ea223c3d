DROP FUNCTION uploaded_file_extra_data_too_large();
DELETE FROM uploaded_file_schema_compat WHERE version = 20261128100003;

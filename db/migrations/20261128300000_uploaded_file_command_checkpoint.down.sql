DROP TABLE IF EXISTS uploaded_file_command_checkpoint;
DELETE FROM uploaded_file_schema_compat WHERE version = 20261128300000;

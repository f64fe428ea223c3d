SET LOCAL lock_timeout = '1s';
ALTER TABLE uploaded_file_command_checkpoint DROP COLUMN IF EXISTS after_key;
DELETE FROM uploaded_file_schema_compat WHERE version = 20261128500000;

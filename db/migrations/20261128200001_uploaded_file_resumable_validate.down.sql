DELETE FROM uploaded_file_schema_compat WHERE version = 20261128200001;

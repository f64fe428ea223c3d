DELETE FROM uploaded_file_schema_compat WHERE version IN (20261129000000, 20261129000001);

-- Removes the schema window's tables. Binaries from before it never read
-- them; a binary with the window treats a schema without them as having no
-- later compatible version (it runs on its own version only).
DROP TABLE uploaded_file_replica;
DROP TABLE uploaded_file_schema_compat;

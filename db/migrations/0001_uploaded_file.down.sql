-- Drops the legacy table and, with it, every index on it. All file metadata is
-- lost; the stored objects are not touched.
DROP TABLE IF EXISTS uploaded_file;

DROP FUNCTION IF EXISTS uploaded_file_usage_release(text[], text[], bigint[], integer);

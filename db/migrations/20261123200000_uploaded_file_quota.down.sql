-- Reverts storage quotas: usage and per-tenant limits are dropped.
DROP FUNCTION IF EXISTS uploaded_file_quota_exceeded();
DROP TABLE IF EXISTS uploaded_file_quota;
DROP TABLE IF EXISTS uploaded_file_usage;

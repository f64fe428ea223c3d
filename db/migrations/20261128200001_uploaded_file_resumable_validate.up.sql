-- Validates the resumable offset's bound, added NOT VALID by the migration
-- before: VALIDATE CONSTRAINT scans the table under a lock that lets
-- reads and writes go on.

-- Validates a constraint every write already satisfies: binaries from the
-- release before run on it. First, so that any wait on the compatibility
-- table comes before the scan.
INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES (20261128200001, 20261128000001)
ON CONFLICT (version) DO NOTHING;

ALTER TABLE uploaded_file VALIDATE CONSTRAINT uploaded_file_resumable_offset_check;

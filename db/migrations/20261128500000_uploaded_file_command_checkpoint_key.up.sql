-- Checkpoints of commands that walk by a text key rather than by file id:
-- `uploadedfile maintenance recount-usage` walks tenants in byte order and
-- keeps the last tenant it finished here, for --resume.
--
-- Every statement may run again (IF NOT EXISTS): a version forced back
-- below this one by hand and migrated up again finds it done.

SET LOCAL lock_timeout = '1s';

-- Adds a nullable column no earlier binary reads or writes (their
-- checkpoint writes name their columns): binaries from the release before
-- run on it. First, so that any wait on the compatibility table comes
-- before the rest.
INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES (20261128500000, 20261128000001)
ON CONFLICT (version) DO NOTHING;

ALTER TABLE uploaded_file_command_checkpoint
    ADD COLUMN IF NOT EXISTS after_key text CHECK (length(after_key) <= 1024);

COMMENT ON COLUMN uploaded_file_command_checkpoint.after_key IS 'For a command that walks by a text key (recount-usage: tenants in byte order), the last key done; NULL for one that walks by file id (after_id).';

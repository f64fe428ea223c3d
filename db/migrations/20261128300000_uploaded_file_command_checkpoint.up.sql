-- Checkpoints of long operator commands: where an interrupted run of
-- `uploadedfile maintenance rescan` stopped, so that `--resume` goes on
-- from there -- no file done twice, none skipped. One row per command and
-- selection (its flags), written as the run goes and when it stops,
-- removed when a run ends.
--
-- Every statement may run again (IF NOT EXISTS): a version forced back
-- below this one by hand and migrated up again finds it done.

SET LOCAL lock_timeout = '1s';

-- Adds a table no earlier binary reads or writes: binaries from the
-- release before run on it. First, so that any wait on the compatibility
-- table comes before the rest.
INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES (20261128300000, 20261128000001)
ON CONFLICT (version) DO NOTHING;

CREATE TABLE IF NOT EXISTS uploaded_file_command_checkpoint (
    command text NOT NULL CHECK (command <> '' AND length(command) <= 64),
    selection text NOT NULL CHECK (length(selection) <= 1024),
    after_id uuid NOT NULL,
    done_above uuid[] NOT NULL DEFAULT '{}' CHECK (cardinality(done_above) <= 10000),
    since timestamptz,
    updated_at timestamptz NOT NULL,
    PRIMARY KEY (command, selection)
);

COMMENT ON TABLE uploaded_file_command_checkpoint IS 'Where an interrupted long operator command stopped (maintenance rescan), for --resume: one row per command and selection, removed when a run ends.';
COMMENT ON COLUMN uploaded_file_command_checkpoint.command IS 'The command (rescan).';
COMMENT ON COLUMN uploaded_file_command_checkpoint.selection IS 'The flags that chose what the command reads, as given (a resumed run must be given the same).';
COMMENT ON COLUMN uploaded_file_command_checkpoint.after_id IS 'Every file of the selection at or before this id (in id order) is done.';
COMMENT ON COLUMN uploaded_file_command_checkpoint.done_above IS 'Files after after_id that are done too (concurrent workers finish out of order).';
COMMENT ON COLUMN uploaded_file_command_checkpoint.since IS 'The selection''s --since, resolved to a time when the run began (an age like 168h would move on a later run).';
COMMENT ON COLUMN uploaded_file_command_checkpoint.updated_at IS 'When the checkpoint was last written.';

-- Declares the schema window of the two index migrations that follow: the
-- outbox's (occurred_at, seq) index (20261128500002), which lets `events
-- replay --since` walk the outbox a batch at a time and resume, and the
-- drop of the (occurred_at) index it replaces (20261128500003). Each runs
-- CONCURRENTLY alone in its migration, so their rows in the compatibility
-- table are written here. Binaries from the release before run on all
-- three: their statements read occurred_at, which the new index leads
-- with.

SET LOCAL lock_timeout = '1s';

INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES
    (20261128500001, 20261128000001),
    (20261128500002, 20261128000001),
    (20261128500003, 20261128000001)
ON CONFLICT (version) DO NOTHING;

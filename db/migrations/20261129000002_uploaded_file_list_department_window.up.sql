-- Declares the schema window of the three index migrations that follow:
-- a department's list indexes (20261129000003-05), by which a tenant's
-- list within a department walks the department's files alone. Each runs
-- CONCURRENTLY alone in its migration, so their rows in the compatibility
-- table are written here. Binaries from the release before run on all
-- four: an index changes no statement's result.

SET LOCAL lock_timeout = '1s';

INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES
    (20261129000002, 20261128000001),
    (20261129000003, 20261128000001),
    (20261129000004, 20261128000001),
    (20261129000005, 20261128000001)
ON CONFLICT (version) DO NOTHING;

-- Declares the schema window of the index migration that follows: the
-- abandoned-upload index (20261129000001), which lets the pending sweep
-- take newly abandoned buffer uploads without walking the tombstones that
-- are passed again. It runs CONCURRENTLY alone in its migration, so its row
-- in the compatibility table is written here. Binaries from the release
-- before run on it: an index changes no statement's result.

SET LOCAL lock_timeout = '1s';

INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES
    (20261129000000, 20261128000001),
    (20261129000001, 20261128000001)
ON CONFLICT (version) DO NOTHING;

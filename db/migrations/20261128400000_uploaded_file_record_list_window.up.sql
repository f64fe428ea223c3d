-- Declares the schema window of the two indexes the next migrations build
-- (20261128400001, the record list; 20261128400002, a tenant's rescan): an
-- index built CONCURRENTLY stands alone in its migration, so its row in
-- the compatibility table is written here. Binaries from the release
-- before run on all three: an index changes nothing they read or write.

SET LOCAL lock_timeout = '1s';

INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES
    (20261128400000, 20261128000001),
    (20261128400001, 20261128000001),
    (20261128400002, 20261128000001)
ON CONFLICT (version) DO NOTHING;

-- Resumable uploads (the tus protocol): a pending direct-lifecycle row that
-- receives its bytes in chunks, each its own object, until the last one
-- arrives and the chunks are assembled into the row's staging object.
--
--   uploaded_file.resumable_offset       bytes received in whole chunks; NULL
--                                        for every other kind of upload
--   uploaded_file.resumable_lease_until  the lease of the one request
--                                        writing a chunk (concurrent writes
--                                        to one upload are refused)
--   uploaded_file_chunk                  one row per chunk object, written
--                                        before the object and removed after
--                                        it, so the store never holds a chunk
--                                        no row points to
--
-- Every statement may run again (IF NOT EXISTS): a version forced back
-- below this one by hand and migrated up again finds it done.

-- Writers queue behind a DDL statement waiting for its lock: wait at most
-- 1 s, less than a request's own lock wait (2 s), so requests queued
-- behind it are delayed, never failed (then nothing is applied and
-- `uploadedfile migrate up` tries again).
SET LOCAL lock_timeout = '1s';

-- Adds nullable columns, a table and indexes only: binaries from the
-- release before run on it (they never write a resumable upload). First,
-- so that any wait on the compatibility table comes before this
-- transaction holds uploaded_file's lock.
INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES (20261128200000, 20261128000001)
ON CONFLICT (version) DO NOTHING;

ALTER TABLE uploaded_file
    ADD COLUMN IF NOT EXISTS resumable_offset bigint,
    ADD COLUMN IF NOT EXISTS resumable_lease_until timestamptz;

COMMENT ON COLUMN uploaded_file.resumable_offset IS 'A resumable upload''s offset: the bytes received in whole chunks before the one that ends the file (which is counted, as the file''s size, once the file is ready). NULL for other uploads.';
COMMENT ON COLUMN uploaded_file.resumable_lease_until IS 'Lease of the request writing a chunk of a resumable upload; another write is refused until it is released or has passed.';

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'uploaded_file_resumable_offset_check' AND conrelid = 'uploaded_file'::regclass) THEN
        -- NOT VALID: no existing row can break it (the column is new), and
        -- validating would scan the table under the DDL lock.
        ALTER TABLE uploaded_file ADD CONSTRAINT uploaded_file_resumable_offset_check
            CHECK (resumable_offset IS NULL OR resumable_offset BETWEEN 0 AND size_bytes) NOT VALID;
    END IF;
END
$$;

CREATE TABLE IF NOT EXISTS uploaded_file_chunk (
    key text NOT NULL,
    file_id uuid NOT NULL REFERENCES uploaded_file (id),
    start_offset bigint NOT NULL,
    size_bytes bigint,
    created_at timestamptz NOT NULL DEFAULT now(),
    trimmed_at timestamptz,

    CONSTRAINT uploaded_file_chunk_pkey PRIMARY KEY (key),
    CONSTRAINT uploaded_file_chunk_offset_check CHECK (start_offset >= 0),
    CONSTRAINT uploaded_file_chunk_size_check CHECK (size_bytes IS NULL OR size_bytes > 0),
    CONSTRAINT uploaded_file_chunk_key_length_check CHECK (char_length(key) BETWEEN 1 AND 1024)
);

COMMENT ON TABLE uploaded_file_chunk IS 'Chunks of resumable uploads: one row per chunk object, from before the object is written until after it is deleted. Written only by the uploadedfile service.';
COMMENT ON COLUMN uploaded_file_chunk.key IS 'Storage key of the chunk object, beside the upload''s staging key, never reused. Never serialized in HTTP responses.';
COMMENT ON COLUMN uploaded_file_chunk.file_id IS 'The resumable upload the chunk belongs to; file rows are never removed, so the reference always resolves.';
COMMENT ON COLUMN uploaded_file_chunk.start_offset IS 'Where the chunk''s bytes start in the file.';
COMMENT ON COLUMN uploaded_file_chunk.size_bytes IS 'Bytes the chunk holds, once written; NULL while its request writes it.';
COMMENT ON COLUMN uploaded_file_chunk.created_at IS 'When the chunk''s write began.';
COMMENT ON COLUMN uploaded_file_chunk.trimmed_at IS 'When the chunk was given up (written again, its upload over) and its object deleted; the row stays, owning the key, until the chunk sweep deletes the object once more an hour later (a stalled writer may still have written it) and removes the row.';

-- One live chunk per offset of an upload; the chunks of an upload in
-- offset order.
CREATE UNIQUE INDEX IF NOT EXISTS uploaded_file_chunk_live_idx ON uploaded_file_chunk (file_id, start_offset)
    WHERE trimmed_at IS NULL;
CREATE INDEX IF NOT EXISTS uploaded_file_chunk_file_idx ON uploaded_file_chunk (file_id);

-- Chunk keys in byte order, for reconcile's merge with the store listing.
CREATE INDEX IF NOT EXISTS uploaded_file_chunk_key_bytes_idx ON uploaded_file_chunk ((key COLLATE "C"));

-- The chunk sweep's candidates: given-up chunks by when, live ones by age.
CREATE INDEX IF NOT EXISTS uploaded_file_chunk_trimmed_idx ON uploaded_file_chunk (trimmed_at)
    WHERE trimmed_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS uploaded_file_chunk_created_idx ON uploaded_file_chunk (created_at)
    WHERE trimmed_at IS NULL;

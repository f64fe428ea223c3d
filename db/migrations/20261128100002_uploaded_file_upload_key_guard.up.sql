-- A buffer upload's Idempotency-Key lives on its file's row, the other
-- routes' in uploaded_file_idempotency. Each side used to look at the
-- other's table without a lock: with a buffer upload and another route's
-- request under the same key in flight at once, neither saw the other and
-- the key ran on both. FileInsertHidden now also writes the key into
-- uploaded_file_idempotency (a done row of the buffer route: a guard), so
-- both sides meet on that table's primary key -- the second waits for the
-- first to commit and then sees it -- and this function fails a buffer
-- upload whose key another route holds, undoing its reservation.
CREATE OR REPLACE FUNCTION uploaded_file_upload_key_taken() RETURNS boolean
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'uploaded_file: the Idempotency-Key names a request of another route' USING ERRCODE = 'UFK01';
END
$$;

COMMENT ON FUNCTION uploaded_file_upload_key_taken() IS 'Fails the statement with SQLSTATE UFK01: a buffer upload''s Idempotency-Key is held by another route''s request.';

-- Adds a function only: binaries from the release before run on it.
INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES (20261128100002, 20261128000001)
ON CONFLICT (version) DO NOTHING;

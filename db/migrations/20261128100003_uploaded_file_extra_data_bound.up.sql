-- A file's extra data is bounded per row, not only per request: merges
-- used to grow it without limit (343 patches of 64 KB made a 22 MB row,
-- whose every read then cost as much). FileMergeExtraData calls this
-- function when the merged object would pass its bound: the statement
-- fails with SQLSTATE UFX01 and the row keeps its extra data.
CREATE OR REPLACE FUNCTION uploaded_file_extra_data_too_large() RETURNS jsonb
LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    RAISE EXCEPTION 'uploaded_file: the merged extra data passes its bound' USING ERRCODE = 'UFX01';
END
$$;

COMMENT ON FUNCTION uploaded_file_extra_data_too_large() IS 'Fails the statement with SQLSTATE UFX01: a merge would make a row''s extra data larger than its bound.';

-- Adds a function only: binaries from the release before run on it.
INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES (20261128100003, 20261128000001)
ON CONFLICT (version) DO NOTHING;

-- An uploaded image's width and height as shown (after its EXIF
-- orientation), read from its header when the upload is checked -- a
-- buffer upload before it is stored, a direct upload at complete -- with a
-- bounded read, never a decode. NULL for other types, for an image whose
-- header could not be read, and for rows written before this migration.
-- Nullable columns without a default: a catalog change, no rewrite.

-- Writers queue behind a DDL statement waiting for its lock: wait at most
-- 5 s (then nothing is applied and `uploadedfile migrate up` tries again).
SET LOCAL lock_timeout = '5s';
ALTER TABLE uploaded_file
    ADD COLUMN width integer,
    ADD COLUMN height integer;

COMMENT ON COLUMN uploaded_file.width IS 'Images: the width in pixels as shown (after the EXIF orientation), from the header read at upload; NULL for other types or an unreadable header.';
COMMENT ON COLUMN uploaded_file.height IS 'Images: the height in pixels as shown (after the EXIF orientation), from the header read at upload; NULL for other types or an unreadable header.';

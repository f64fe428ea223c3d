-- Reverts image dimensions: the columns go, with what they held.
ALTER TABLE uploaded_file
    DROP COLUMN IF EXISTS height,
    DROP COLUMN IF EXISTS width;

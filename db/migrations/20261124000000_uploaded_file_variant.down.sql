-- Reverts image variants. It refuses while any variant row exists: its
-- object would stay in the store with no row to own it (and its bytes
-- counted in the owner's usage). Delete the variants first (deleting their
-- files deletes them), then run the down again. Its table locks wait at
-- most 5 s.
SET LOCAL lock_timeout = '5s';
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM uploaded_file_variant) THEN
        RAISE EXCEPTION 'uploaded_file_variant holds variants: dropping it would leave their objects in the store with no row; delete them first'
            USING ERRCODE = 'UFM01';
    END IF;
END
$$;
DELETE FROM uploaded_file_event WHERE type = 'file.variant-ready';
ALTER TABLE uploaded_file_event DROP CONSTRAINT uploaded_file_event_type_check;
ALTER TABLE uploaded_file_event ADD CONSTRAINT uploaded_file_event_type_check CHECK (type IN (
    'file.ready', 'file.deleted', 'file.purged', 'file.expired',
    'file.attached', 'file.detached', 'upload.failed', 'upload.abandoned',
    'file.quarantined', 'file.unquarantined'));
DROP TABLE uploaded_file_variant;

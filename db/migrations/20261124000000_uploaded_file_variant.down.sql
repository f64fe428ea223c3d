-- Reverts image variants. Variant objects still in the store are left to
-- reconcile, which reports them as orphans once this table is gone.
DELETE FROM uploaded_file_event WHERE type = 'file.variant-ready';
ALTER TABLE uploaded_file_event DROP CONSTRAINT uploaded_file_event_type_check;
ALTER TABLE uploaded_file_event ADD CONSTRAINT uploaded_file_event_type_check CHECK (type IN (
    'file.ready', 'file.deleted', 'file.purged', 'file.expired',
    'file.attached', 'file.detached', 'upload.failed', 'upload.abandoned',
    'file.quarantined', 'file.unquarantined'));
DROP TABLE uploaded_file_variant;

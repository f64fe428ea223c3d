-- Image variants: a smaller copy of a ready image for a configured preset,
-- generated on first request (or eagerly after file.ready), stored as its
-- own object beside the original and deleted with it.
--
--   (none)      -> generating   VariantClaim: the key is written here,
--                               before the object, with a lease
--   generating  -> ready        VariantFinish: size recorded, counted in
--                               the owner's usage, file.variant-ready
--   generating  -> (none)       VariantDrop: the generator gave up and
--                               deleted its object
--   ready       -> deleting     VariantClaimForFile (the file's deletion
--                               worker) or VariantClaimElapsed (the sweep)
--   deleting    -> (none)       VariantSettle: after the object is deleted;
--                               its bytes leave the usage
--
-- A variant row exists from before its object is written until after it is
-- deleted, so the store never holds a variant object no row points to. Rows
-- are never updated to a new key: a stale generation taken over writes the
-- same key again.

-- Writers queue behind a DDL statement waiting for its lock: wait at most
-- 5 s (then nothing is applied and `uploadedfile migrate up` tries again).
SET LOCAL lock_timeout = '5s';

CREATE TABLE uploaded_file_variant (
    id uuid PRIMARY KEY,
    file_id uuid NOT NULL REFERENCES uploaded_file (id),
    preset text NOT NULL,
    key text NOT NULL,
    status text NOT NULL,
    content_type text NOT NULL,
    width integer,
    height integer,
    size_bytes bigint,
    lease_until timestamptz,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT uploaded_file_variant_preset_unique UNIQUE (file_id, preset),
    CONSTRAINT uploaded_file_variant_key_unique UNIQUE (key),
    CONSTRAINT uploaded_file_variant_status_check CHECK (status IN ('generating', 'ready', 'deleting')),
    CONSTRAINT uploaded_file_variant_preset_check CHECK (preset ~ '^[a-z0-9][a-z0-9_-]{0,63}$'),
    CONSTRAINT uploaded_file_variant_key_length_check CHECK (char_length(key) BETWEEN 1 AND 1024),
    -- Only a ready variant holds no lease; generating and deleting hold one.
    CONSTRAINT uploaded_file_variant_lease_check CHECK ((status = 'ready') = (lease_until IS NULL)),
    -- A ready variant knows its size and dimensions (it is counted in the
    -- usage from then on); a generating one does not yet; a deleting one
    -- keeps what it had until its row goes.
    CONSTRAINT uploaded_file_variant_size_check CHECK (
        status = 'deleting' OR (status = 'generating') = (size_bytes IS NULL)),
    CONSTRAINT uploaded_file_variant_ready_check CHECK (
        status <> 'ready' OR (size_bytes >= 0 AND width > 0 AND height > 0))
);

COMMENT ON TABLE uploaded_file_variant IS 'Image variants of uploaded files: one row per (file, preset), from before its object is written until after it is deleted. Written only by the uploadedfile service.';
COMMENT ON COLUMN uploaded_file_variant.id IS 'The variant''s own id (UUIDv4), part of its generated key.';
COMMENT ON COLUMN uploaded_file_variant.file_id IS 'The original file; file rows are never removed, so the reference always resolves.';
COMMENT ON COLUMN uploaded_file_variant.preset IS 'The configured preset name (variants.presets).';
COMMENT ON COLUMN uploaded_file_variant.key IS 'Storage key of the variant object: generated like a final key, under the original''s visibility prefix. Never serialized in HTTP responses.';
COMMENT ON COLUMN uploaded_file_variant.status IS 'generating (a lease is held by the generator), ready (served), deleting (a lease is held by the worker deleting the object).';
COMMENT ON COLUMN uploaded_file_variant.content_type IS 'The output type of the preset (image/jpeg, image/png or image/webp).';
COMMENT ON COLUMN uploaded_file_variant.size_bytes IS 'Size of the object; counted in the file owner''s and tenant''s usage while set.';
COMMENT ON COLUMN uploaded_file_variant.lease_until IS 'Generation or deletion lease; once past, another worker may take the row over (a generation again, a deletion by the sweep).';

-- Elapsed leases, for the sweep.
CREATE INDEX uploaded_file_variant_lease_idx ON uploaded_file_variant (lease_until)
    WHERE lease_until IS NOT NULL;

-- Variant keys in byte order, for reconcile's merge with the store listing.
CREATE INDEX uploaded_file_variant_key_bytes_idx ON uploaded_file_variant ((key COLLATE "C"));

ALTER TABLE uploaded_file_event DROP CONSTRAINT uploaded_file_event_type_check;
ALTER TABLE uploaded_file_event ADD CONSTRAINT uploaded_file_event_type_check CHECK (type IN (
    'file.ready', 'file.deleted', 'file.purged', 'file.expired',
    'file.attached', 'file.detached', 'upload.failed', 'upload.abandoned',
    'file.quarantined', 'file.unquarantined', 'file.variant-ready')) NOT VALID;

-- Keys the service signs with (the local driver's upload targets): one per
-- purpose, created by the first replica that needs it and then shared by
-- every replica through the database, so no secret has to be configured
-- and a URL signed by one replica is honoured by all.
CREATE TABLE uploaded_file_signing_key (
    purpose text PRIMARY KEY,
    secret bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT uploaded_file_signing_key_secret_check CHECK (octet_length(secret) >= 32)
);

COMMENT ON TABLE uploaded_file_signing_key IS 'HMAC keys the service signs self-contained URLs with, one per purpose, shared by every replica.';
COMMENT ON COLUMN uploaded_file_signing_key.purpose IS 'What the key signs (upload-target: the local driver''s signed content URLs).';
COMMENT ON COLUMN uploaded_file_signing_key.secret IS 'The key: 32 random bytes from the first replica that needed it. Never logged or served.';
COMMENT ON COLUMN uploaded_file_signing_key.created_at IS 'When the key was created.';

-- Signing keys shared by the replicas.
--
--   SigningKeyEnsure   (none) -> the key of @purpose (the first caller's)

-- name: SigningKeyEnsure :one
-- The key of @purpose: @secret when no replica created one yet, otherwise
-- the existing key (the no-op update makes ON CONFLICT return the row), so
-- every replica signs with the same key. Never zero rows.
INSERT INTO uploaded_file_signing_key (purpose, secret)
VALUES (@purpose::text, @secret::bytea)
ON CONFLICT (purpose) DO UPDATE SET purpose = EXCLUDED.purpose
RETURNING secret;

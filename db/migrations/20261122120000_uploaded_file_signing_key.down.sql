-- Reverts the shared signing keys: URLs signed with them stop working.
DROP TABLE IF EXISTS uploaded_file_signing_key;

-- The schema window of rolling upgrades (docs/operations.md, "Upgrading").
--
-- A binary runs against its own schema version and against later versions
-- whose migrations declare themselves compatible with it: each migration
-- from this one on records, in uploaded_file_schema_compat, the oldest
-- binary (named by the newest migration it embeds) that still runs on the
-- schema it leaves. An expand-only migration (new nullable columns, new
-- tables, new indexes, constraints the older binary's writes satisfy)
-- keeps the floor of the migration before it; a contract migration
-- (removing or changing what an older release uses) raises it to itself,
-- and `migrate up` refuses it while replicas older than it are running.
--
-- Replicas record what they run in uploaded_file_replica: serve inserts a
-- row at start, heartbeats it, and removes it when it stops; a row whose
-- heartbeat is older than a minute is a replica that died.
--
-- Every statement may run again (IF NOT EXISTS, ON CONFLICT): a version
-- forced back below this one by hand and migrated up again finds it done.
CREATE TABLE IF NOT EXISTS uploaded_file_schema_compat (
    version bigint PRIMARY KEY,
    oldest_binary bigint NOT NULL,
    CONSTRAINT uploaded_file_schema_compat_floor CHECK (oldest_binary <= version)
);

COMMENT ON TABLE uploaded_file_schema_compat IS 'Per applied migration: the oldest binary that runs on the schema it leaves (written by the migration itself).';
COMMENT ON COLUMN uploaded_file_schema_compat.version IS 'The migration''s version.';
COMMENT ON COLUMN uploaded_file_schema_compat.oldest_binary IS 'The newest migration version embedded in the oldest binary that runs on this schema: the version before it for an expand-only migration (the floor kept), the migration itself for a contract.';

CREATE TABLE IF NOT EXISTS uploaded_file_replica (
    id uuid PRIMARY KEY,
    binary_version bigint NOT NULL,
    started_at timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL
);

COMMENT ON TABLE uploaded_file_replica IS 'Running serve replicas and the schema version their binary embeds; migrate up refuses a contract migration while an older one heartbeats.';
COMMENT ON COLUMN uploaded_file_replica.id IS 'Random id the replica chose at start.';
COMMENT ON COLUMN uploaded_file_replica.binary_version IS 'The newest migration version the replica''s binary embeds.';
COMMENT ON COLUMN uploaded_file_replica.started_at IS 'When the replica registered (database time).';
COMMENT ON COLUMN uploaded_file_replica.heartbeat_at IS 'The replica''s last heartbeat (database time); older than a minute: the replica died.';

-- Both this migration and the one before it only add: binaries from the
-- release before (20261128000001) run on them.
INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES
    (20261128100000, 20261128000001),
    (20261128100001, 20261128000001)
ON CONFLICT (version) DO NOTHING;

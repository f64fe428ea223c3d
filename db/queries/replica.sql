-- The replicas that serve, as the schema window sees them (migration
-- 20261128100001): each serve registers its binary's schema version at
-- start and heartbeats it, so `migrate up` can refuse a contract migration
-- while a replica older than it runs. Times are the database's.

-- name: ReplicaHeartbeat :exec
-- Registers replica @id running a binary of @binary_version, or renews its
-- heartbeat. Never fails for a replica already registered.
INSERT INTO uploaded_file_replica (id, binary_version, started_at, heartbeat_at)
VALUES (@id, @binary_version, now(), now())
ON CONFLICT (id) DO UPDATE SET heartbeat_at = now();

-- name: ReplicaForget :exec
-- Replica @id stopped. Zero rows: it was pruned already.
DELETE FROM uploaded_file_replica WHERE id = @id;

-- name: ReplicaPrune :execrows
-- Forgets replicas whose heartbeat is older than @dead_after (they died
-- without saying so); any replica runs it with its heartbeat.
DELETE FROM uploaded_file_replica WHERE heartbeat_at < now() - @dead_after::interval;

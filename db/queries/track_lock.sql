-- The tracks' run locks: one replica at a time runs a track. A session
-- advisory lock on one connection held for the run: a replica that dies
-- mid-run releases it with its session, so no lease has to expire.

-- name: TrackTryLock :one
-- Takes the advisory lock @key for this session. false: another session
-- holds it (the track runs elsewhere); never waits.
SELECT pg_try_advisory_lock(@key::bigint) AS locked;

-- name: TrackUnlock :one
-- Releases the advisory lock @key this session holds. false: it did not
-- hold it (nothing to release).
SELECT pg_advisory_unlock(@key::bigint) AS unlocked;

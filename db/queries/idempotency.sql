-- Idempotency keys of writes (uploaded_file_idempotency). One row per
-- (tenant_code, caller, key):
--
--   (none) --IdempotencyClaim--> running --IdempotencyFinish--> done
--   running --IdempotencyExtend--> running         (the heartbeat of the request that holds it)
--   running --IdempotencyRelease--> (none)         (a retryable failure: the next try runs again)
--   running --IdempotencyTakeOver--> running       (the lease ran out: the request died)
--   done, running --IdempotencyExpire--> (none)    (24 hours after the claim)
--
-- A running row's lease_until is its claim: the request that holds it
-- names it in every later statement, so a request that lost its key to a
-- take-over changes nothing.

-- name: IdempotencyClaim :one
-- Claims @key for the caller: a new running row, with the id of the file
-- the request will create (if it creates one) and a lease. Zero rows: the
-- key exists (IdempotencyGet tells how).
INSERT INTO uploaded_file_idempotency (tenant_code, caller, key, route, state, file_id, lease_until, created_at, expires_at)
SELECT @tenant_code::text, @caller::text, @key::text, @route::text, 'running', sqlc.narg('file_id')::uuid,
       t.now + @lease::interval, t.now, t.now + @retention::interval
FROM (SELECT coalesce(sqlc.narg('now')::timestamptz, now()) AS now) AS t
ON CONFLICT (tenant_code, caller, key) DO NOTHING
RETURNING lease_until, file_id;

-- name: IdempotencyGet :one
-- The row of @key for the caller, with the database time. Zero rows: the
-- key is free again (expired meanwhile): claim it.
SELECT route, state, fingerprint, file_id, lease_until, status, content_type, body,
       coalesce(sqlc.narg('now')::timestamptz, now())::timestamptz AS db_now
FROM uploaded_file_idempotency
WHERE tenant_code = @tenant_code AND caller = @caller AND key = @key
  AND expires_at > coalesce(sqlc.narg('now')::timestamptz, now());

-- name: IdempotencyTakeOver :one
-- Takes over a running key whose lease ran out (the request that held it
-- died): a new lease and the id of the file this attempt will create; the
-- old file id and the key's first claim are returned, so the new holder
-- can look at what the dead request left. Guard: still running, still under the lease @expired that
-- was read. Zero rows: another retry took it, or it finished meanwhile.
UPDATE uploaded_file_idempotency AS i
SET lease_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @lease::interval,
    file_id = sqlc.narg('file_id')::uuid
FROM (SELECT file_id FROM uploaded_file_idempotency
      WHERE tenant_code = @tenant_code AND caller = @caller AND key = @key FOR UPDATE) AS old
WHERE i.tenant_code = @tenant_code AND i.caller = @caller AND i.key = @key
  AND i.state = 'running' AND i.lease_until = @expired::timestamptz
  AND i.lease_until <= coalesce(sqlc.narg('now')::timestamptz, now())
RETURNING i.lease_until, old.file_id AS previous_file_id, i.created_at AS first_claimed;

-- name: IdempotencyExtend :one
-- The heartbeat of the request that holds @key under @claim: a new lease
-- (the new claim). Zero rows: the claim was taken over (the request ran
-- past its lease without a heartbeat) and the request must not record its
-- answer.
UPDATE uploaded_file_idempotency
SET lease_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @lease::interval
WHERE tenant_code = @tenant_code AND caller = @caller AND key = @key
  AND state = 'running' AND lease_until = @claim::timestamptz
RETURNING lease_until;

-- name: IdempotencyFinish :one
-- Records the answer of the request that holds @key under @claim: done,
-- with the request's fingerprint. Zero rows: the claim was taken over
-- (this request ran past its lease); the answer is not recorded.
UPDATE uploaded_file_idempotency
SET state = 'done', lease_until = NULL, fingerprint = @fingerprint::bytea,
    status = @status::integer, content_type = sqlc.narg('content_type')::text, body = sqlc.narg('body')::bytea
WHERE tenant_code = @tenant_code AND caller = @caller AND key = @key
  AND state = 'running' AND lease_until = @claim::timestamptz
RETURNING status;

-- name: IdempotencyRelease :exec
-- Gives @key back after a retryable failure (a dependency did not answer):
-- the next request with it runs again. Guard: still held under @claim; a
-- lost claim deletes nothing.
DELETE FROM uploaded_file_idempotency
WHERE tenant_code = @tenant_code AND caller = @caller AND key = @key
  AND state = 'running' AND lease_until = @claim::timestamptz;

-- name: IdempotencyExpire :execrows
-- Deletes up to @max keys claimed more than 24 hours ago, oldest first
-- (the maintenance track). A running row past its expiry is deleted too:
-- its request has long died. Returns how many went.
DELETE FROM uploaded_file_idempotency
WHERE (tenant_code, caller, key) IN (
    SELECT tenant_code, caller, key FROM uploaded_file_idempotency
    WHERE expires_at <= coalesce(sqlc.narg('now')::timestamptz, now())
    ORDER BY expires_at
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED);

-- name: IdempotencyKeyOnFile :one
-- Whether @key names a file a buffer upload of the caller made (the keys
-- of POST /uploaded-file live on the file's row, FileInsertHidden): then
-- any other route's request under it is another request.
SELECT EXISTS (
    SELECT 1 FROM uploaded_file
    WHERE tenant_code = @tenant_code AND user_id = @caller::text AND idempotency_key = @key::text
) AS on_file;

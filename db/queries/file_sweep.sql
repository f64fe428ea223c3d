-- Background sweeps. These bypass the tenant/owner scope on purpose: they are
-- run by trusted maintenance code only (the cron tracks and the operator
-- commands), never over HTTP.
--
-- They run on the sweeps' pool (or an operator command's), which plans
-- every statement with its arguments (plan_cache_mode = force_custom_plan,
-- db.Limits.CustomPlans): a sweep runs a few statements a minute, so a
-- plan costs nothing next to its work, while a generic plan of a candidate
-- query -- made without knowing @now -- can read and sort the whole
-- backlog for one batch. A query marked "Plan: custom." below is checked
-- under custom plans only (TestQueryPlansUseIndexes).
--
-- Every sweep claims its batch in one statement: the candidate rows are
-- selected in eligibility order with FOR UPDATE SKIP LOCKED (two replicas
-- sweeping at once take disjoint rows instead of waiting on each other) --
-- the order of the marker's index alone, with no tie-break by id, which
-- would sort every row sharing the first marker (uploads abandoned
-- together, one request's deletions, rows loaded in one statement) to take
-- a batch of them -- and
-- the same statement moves each into a claimed state with a future lease
-- before any storage I/O. The candidate predicate is repeated in the UPDATE
-- so the claim is a compare-and-swap on the state that was selected. A
-- replica that dies after claiming leaves the lease to run out; the row then
-- becomes eligible again.
--
-- Every transition that changes what a file is (ready, attached, deleted,
-- expired, purged, failed, abandoned) writes its lifecycle event in the same
-- statement, a data-modifying CTE into uploaded_file_event (see
-- event_outbox.sql): the event commits, or rolls back, with the transition.

-- name: DeletionClaimElapsed :many
-- Settled deletion claims whose lease or retry marker has elapsed (a worker
-- died, or its storage call failed and was released) -> claimed again by
-- this worker. Rows with an upload marker are tombstones, handled by
-- DeletionClaimExpiredTombstones.
WITH candidate AS (
    SELECT id, deletion_pending_at
    FROM uploaded_file
    WHERE deletion_pending_at <= coalesce(sqlc.narg('now')::timestamptz, now())
        AND upload_pending_at IS NULL
    ORDER BY deletion_pending_at
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE uploaded_file
SET
    deletion_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @deletion_lease::interval,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
FROM candidate
WHERE uploaded_file.id = candidate.id
    AND uploaded_file.deletion_pending_at = candidate.deletion_pending_at
    AND uploaded_file.upload_pending_at IS NULL
RETURNING uploaded_file.*;

-- name: DeletionClaimExpiredTombstones :many
-- Uploads whose upload marker has expired -> restored to hidden pending
-- (deleted_at cleared) and claimed for deletion by this worker. Covers a
-- buffer upload whose writer never came back (no deletion claim yet), an
-- upload tombstone whose rescheduled claim has elapsed, and a direct upload
-- that was aborted or failed once its upload window has closed. The claim
-- matches the exact upload marker, deletion marker and soft-delete state that
-- were selected; a completing row is taken only once its completion lease
-- has run out too.
-- First claims (abandoned: no deletion marker yet, oldest upload marker
-- first) come before tombstones passing again, and those take at most
-- @pass_limit of the batch, in the order they became eligible again (their
-- deletion marker): tombstones a writer may still write are passed again
-- forever, and would otherwise fill every batch ahead of newly abandoned
-- uploads, whose reserved space only this claim gives back.
-- Writes upload.abandoned for a row claimed for the first time (a writer
-- that never came back), not for a tombstone passing again.
WITH abandoned AS (
    SELECT id, upload_pending_at, deletion_pending_at, deleted_at
    FROM uploaded_file
    WHERE upload_pending_at <= coalesce(sqlc.narg('now')::timestamptz, now())
        AND deletion_pending_at IS NULL
        AND (completion_lease_until IS NULL OR completion_lease_until <= coalesce(sqlc.narg('now')::timestamptz, now()))
    ORDER BY upload_pending_at
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED
), passes AS (
    SELECT id, upload_pending_at, deletion_pending_at, deleted_at
    FROM uploaded_file
    WHERE deletion_pending_at <= coalesce(sqlc.narg('now')::timestamptz, now())
        AND upload_pending_at <= coalesce(sqlc.narg('now')::timestamptz, now())
        AND (completion_lease_until IS NULL OR completion_lease_until <= coalesce(sqlc.narg('now')::timestamptz, now()))
    ORDER BY deletion_pending_at
    LIMIT @pass_limit::integer
    FOR UPDATE SKIP LOCKED
), candidate AS (
    SELECT abandoned.id, abandoned.upload_pending_at, abandoned.deletion_pending_at, abandoned.deleted_at FROM abandoned
    UNION ALL
    (SELECT passes.id, passes.upload_pending_at, passes.deletion_pending_at, passes.deleted_at FROM passes
        LIMIT greatest(0, sqlc.arg('max')::integer - (SELECT count(*) FROM abandoned)))
), changed AS (
    UPDATE uploaded_file
    SET
        deletion_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @deletion_lease::interval,
        deleted_at = NULL,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    FROM candidate
    WHERE uploaded_file.id = candidate.id
        AND uploaded_file.upload_pending_at = candidate.upload_pending_at
        AND uploaded_file.deletion_pending_at IS NOT DISTINCT FROM candidate.deletion_pending_at
        AND uploaded_file.deleted_at IS NOT DISTINCT FROM candidate.deleted_at
    RETURNING uploaded_file.*
), released AS (
    -- The space the rows held goes back to their owners and tenants
    -- (uploaded_file_usage_release); the final SELECT reads this CTE,
    -- so it runs.
    SELECT uploaded_file_usage_release(array_agg(changed.tenant_code), array_agg(changed.user_id), array_agg(changed.size_bytes), 1) AS usage_rows
    FROM changed
    JOIN candidate ON candidate.id = changed.id
    WHERE candidate.deletion_pending_at IS NULL AND candidate.deleted_at IS NULL
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'upload.abandoned', changed.tenant_code, changed.id, changed.updated_at, NULL, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
    JOIN candidate ON candidate.id = changed.id
    WHERE candidate.deletion_pending_at IS NULL AND candidate.deleted_at IS NULL
)
SELECT changed.* FROM changed CROSS JOIN released;

-- name: FileClaimExpiredDirectUploads :many
-- Direct uploads still pending or completing whose in-flight cleanup lease
-- has expired (never completed; or the completer died and nobody took it
-- over) -> claimed for deletion. The upload marker stays, so the claim is
-- settled by FileSettleDeletion naming it once the staging and final objects
-- are gone.
-- Writes upload.abandoned.
-- Plan: custom.
WITH candidate AS (
    SELECT id, upload_pending_at
    FROM uploaded_file
    WHERE pending_key IS NOT NULL
        AND status IN ('pending', 'completing')
        AND upload_pending_at <= coalesce(sqlc.narg('now')::timestamptz, now())
        AND deletion_pending_at IS NULL
        AND deleted_at IS NULL
        AND (completion_lease_until IS NULL OR completion_lease_until <= coalesce(sqlc.narg('now')::timestamptz, now()))
    ORDER BY upload_pending_at
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED
), changed AS (
    UPDATE uploaded_file
    SET
        deletion_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @deletion_lease::interval,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    FROM candidate
    WHERE uploaded_file.id = candidate.id
        AND uploaded_file.upload_pending_at = candidate.upload_pending_at
        AND uploaded_file.deletion_pending_at IS NULL
        AND uploaded_file.deleted_at IS NULL
    RETURNING uploaded_file.*
), released AS (
    -- The space the rows held goes back to their owners and tenants
    -- (uploaded_file_usage_release); the final SELECT reads this CTE,
    -- so it runs.
    SELECT uploaded_file_usage_release(array_agg(changed.tenant_code), array_agg(changed.user_id), array_agg(changed.size_bytes), 1) AS usage_rows
    FROM changed
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'upload.abandoned', changed.tenant_code, changed.id, changed.updated_at, NULL, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
)
SELECT changed.* FROM changed CROSS JOIN released;

-- name: FileClaimExpiredTemporary :many
-- Ready temporary files expired exactly by their expired_at (expired_at <=
-- @now, the database clock when @now is NULL) -> claimed for deletion. The
-- claim re-checks the very expired_at that was selected. Reads are refused
-- from expired_at on whether or not this sweep has run.
-- Writes file.expired.
WITH candidate AS (
    SELECT id, expired_at
    FROM uploaded_file
    WHERE is_temporary
        AND expired_at <= coalesce(sqlc.narg('now')::timestamptz, now())
        AND deletion_pending_at IS NULL
        AND deleted_at IS NULL
        AND upload_pending_at IS NULL
        AND status = 'ready'
    ORDER BY expired_at
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED
), changed AS (
    UPDATE uploaded_file
    SET
        deletion_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @deletion_lease::interval,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    FROM candidate
    WHERE uploaded_file.id = candidate.id
        AND uploaded_file.expired_at = candidate.expired_at
        AND uploaded_file.deletion_pending_at IS NULL
        AND uploaded_file.deleted_at IS NULL
    RETURNING uploaded_file.*
), released AS (
    -- The space the rows held goes back to their owners and tenants
    -- (uploaded_file_usage_release); the final SELECT reads this CTE,
    -- so it runs.
    SELECT uploaded_file_usage_release(array_agg(changed.tenant_code), array_agg(changed.user_id), array_agg(changed.size_bytes), 1) AS usage_rows
    FROM changed
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'file.expired', changed.tenant_code, changed.id, changed.updated_at, NULL, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
)
SELECT changed.* FROM changed CROSS JOIN released;

-- name: FileClaimUnusedBefore :many
-- Active permanent files never marked used and created before @cutoff -> 
-- claimed for deletion (the legacy age purge; cleanupAfterDays). Temporary
-- files are left to their own 24-hour expiry. The candidates are exactly
-- the rows the update accepts (status ready included: a quarantined file
-- is not purged), before the LIMIT: rows the update would refuse never
-- fill a batch and stall the purge behind them. Oldest first in the order
-- of uploaded_file_unused_idx alone (no id to break ties): a plan made
-- without the arguments then walks the index and stops at @max, where a
-- second sort key made it sort every candidate of the table; and the
-- update looks the batch up by primary key (= any(ARRAY(...))), where a
-- join to it hashed a sequential scan of the table.
-- Writes file.expired.
WITH candidate AS (
    SELECT id
    FROM uploaded_file
    WHERE used_at IS NULL
        AND created_at < @cutoff::timestamptz
        AND status = 'ready'
        AND deleted_at IS NULL
        AND deletion_pending_at IS NULL
        AND upload_pending_at IS NULL
        AND NOT is_temporary
    ORDER BY created_at
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED
), changed AS (
    UPDATE uploaded_file
    SET
        deletion_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @deletion_lease::interval,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE uploaded_file.id = any(ARRAY(SELECT candidate.id FROM candidate))
        AND uploaded_file.used_at IS NULL
        AND uploaded_file.status = 'ready'
        AND uploaded_file.deletion_pending_at IS NULL
        AND uploaded_file.deleted_at IS NULL
    RETURNING uploaded_file.*
), released AS (
    -- The space the rows held goes back to their owners and tenants
    -- (uploaded_file_usage_release); the final SELECT reads this CTE,
    -- so it runs.
    SELECT uploaded_file_usage_release(array_agg(changed.tenant_code), array_agg(changed.user_id), array_agg(changed.size_bytes), 1) AS usage_rows
    FROM changed
), event AS (
    INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, rule, data)
    SELECT 'file.expired', changed.tenant_code, changed.id, changed.updated_at, NULL, uploaded_file_event_data(to_jsonb(changed))
    FROM changed
)
SELECT changed.* FROM changed CROSS JOIN released;

-- name: StagingClaimCompleted :many
-- S3 direct uploads, ready or since deleted, whose retained staging object
-- is due for removal (FileFinalizeCompletion dates it after the upload
-- target can no longer land) -> staging cleanup claimed (staging_cleanup_at
-- = now + lease). A deleted row keeps its staging key and date: a re-PUT of
-- the still-valid target after the deletion lands under that key, and this
-- sweep removes it once the target has expired. Rows with a live deletion
-- claim are skipped until it settles.
WITH candidate AS (
    SELECT id, staging_cleanup_at
    FROM uploaded_file
    WHERE staging_cleanup_at <= coalesce(sqlc.narg('now')::timestamptz, now())
        AND deletion_pending_at IS NULL
    ORDER BY staging_cleanup_at
    LIMIT @max::integer
    FOR UPDATE SKIP LOCKED
)
UPDATE uploaded_file
SET
    staging_cleanup_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @staging_lease::interval,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
FROM candidate
WHERE uploaded_file.id = candidate.id
    AND uploaded_file.staging_cleanup_at = candidate.staging_cleanup_at
RETURNING uploaded_file.*;

-- name: StagingSettle :one
-- staging claimed -> done, once the staging object @pending_key is deleted:
-- pending_key and the claim are cleared. Zero rows: the claim was taken over.
UPDATE uploaded_file
SET
    pending_key = NULL,
    staging_cleanup_at = NULL,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = @id
    AND staging_cleanup_at = @claim::timestamptz
    AND pending_key = @pending_key::text
RETURNING *;

-- name: StagingRelease :one
-- staging claimed -> retry @backoff ahead, after the storage delete failed,
-- so the rest of the batch advances. Zero rows: the claim was taken over.
UPDATE uploaded_file
SET
    staging_cleanup_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @backoff::interval,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE id = @id
    AND staging_cleanup_at = @claim::timestamptz
RETURNING *;

-- name: FileRetireTombstone :one
-- An operator retires an abandoned upload tombstone (after every producer is
-- stopped and drained, so no writer can still write its object): the expired
-- upload marker is cleared and the row becomes an ordinary elapsed deletion
-- retry (deletion_pending_at = now), which DeletionClaimElapsed settles for
-- good. Refuses a live upload lease (upload_pending_at in the future) and a
-- live deletion lease (deletion_pending_at in the future). Zero rows: no such
-- row, not a tombstone, or a lease is still live.
WITH prior AS (
    SELECT uploaded_file.id, uploaded_file.deletion_pending_at, uploaded_file.deleted_at
    FROM uploaded_file
    WHERE uploaded_file.id = @id
), changed AS (
    UPDATE uploaded_file
    SET
        upload_pending_at = NULL,
        completion_lease_until = NULL,
        status = CASE WHEN status = 'completing' THEN 'failed' ELSE status END,
        deletion_pending_at = coalesce(sqlc.narg('now')::timestamptz, now()),
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE uploaded_file.id = @id
        AND uploaded_file.upload_pending_at <= coalesce(sqlc.narg('now')::timestamptz, now())
        AND (uploaded_file.deletion_pending_at IS NULL OR deletion_pending_at <= coalesce(sqlc.narg('now')::timestamptz, now()))
        AND (uploaded_file.completion_lease_until IS NULL OR completion_lease_until <= coalesce(sqlc.narg('now')::timestamptz, now()))
    RETURNING *
), released AS (
    -- The space the rows held goes back to their owners and tenants
    -- (uploaded_file_usage_release); the final SELECT reads this CTE,
    -- so it runs.
    SELECT uploaded_file_usage_release(array_agg(changed.tenant_code), array_agg(changed.user_id), array_agg(changed.size_bytes), 1) AS usage_rows
    FROM changed
    JOIN prior ON prior.id = changed.id
    WHERE prior.deletion_pending_at IS NULL AND prior.deleted_at IS NULL
)
SELECT changed.* FROM changed CROSS JOIN released;

-- name: SweepBacklog :one
-- What each sweep would take if it ran now, counted up to @cap rows a kind
-- (a count past the cap reads as "at least"): the same predicates as the
-- claims above -- DeletionClaimElapsed, DeletionClaimExpiredTombstones,
-- FileClaimExpiredDirectUploads, StagingClaimCompleted,
-- FileClaimExpiredTemporary -- and VariantClaimElapsed, IdempotencyExpire,
-- OrphanClaimElapsed, without locking anything. Read after a track's run:
-- what is left once its ten batches are spent is its backlog (the
-- uploadedfile_sweep_backlog gauge, and a warning in the log). Each count
-- walks the index its claim uses, at most @cap entries.
SELECT
    (SELECT count(*) FROM (
        SELECT 1 FROM uploaded_file
        WHERE deletion_pending_at <= coalesce(sqlc.narg('now')::timestamptz, now())
            AND upload_pending_at IS NULL
        LIMIT @cap::integer) AS d)::bigint AS deletion_retries,
    (SELECT count(*) FROM (
        SELECT 1 FROM uploaded_file
        WHERE upload_pending_at <= coalesce(sqlc.narg('now')::timestamptz, now())
            AND (deletion_pending_at IS NULL OR deletion_pending_at <= coalesce(sqlc.narg('now')::timestamptz, now()))
            AND (completion_lease_until IS NULL OR completion_lease_until <= coalesce(sqlc.narg('now')::timestamptz, now()))
        LIMIT @cap::integer) AS u)::bigint AS expired_uploads,
    (SELECT count(*) FROM (
        SELECT 1 FROM uploaded_file
        WHERE staging_cleanup_at <= coalesce(sqlc.narg('now')::timestamptz, now())
            AND deletion_pending_at IS NULL
        LIMIT @cap::integer) AS s)::bigint AS staging_objects,
    (SELECT count(*) FROM (
        SELECT 1 FROM uploaded_file
        WHERE is_temporary
            AND expired_at <= coalesce(sqlc.narg('now')::timestamptz, now())
            AND deletion_pending_at IS NULL
            AND deleted_at IS NULL
            AND upload_pending_at IS NULL
            AND status = 'ready'
        LIMIT @cap::integer) AS t)::bigint AS expired_temporary,
    (SELECT count(*) FROM (
        SELECT 1 FROM uploaded_file_variant
        WHERE lease_until <= coalesce(sqlc.narg('now')::timestamptz, now())
        ORDER BY lease_until
        LIMIT @cap::integer) AS v)::bigint AS variants,
    (SELECT count(*) FROM (
        SELECT 1 FROM uploaded_file_idempotency
        WHERE expires_at <= coalesce(sqlc.narg('now')::timestamptz, now())
        LIMIT @cap::integer) AS i)::bigint AS idempotency_keys,
    (SELECT count(*) FROM (
        SELECT 1 FROM uploaded_file_orphan_claim
        WHERE claimed_until <= coalesce(sqlc.narg('now')::timestamptz, now())
        LIMIT @cap::integer) AS o)::bigint AS orphan_claims;

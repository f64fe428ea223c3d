-- The event relay: delivers the outbox (uploaded_file_event) to each sink.
--
--   EventSinkEnsure    (none)            -> a sink row, cursor at the start
--   EventSinkClaim     free, due         -> held by this relay (lease)
--   EventSinkAdvance   held              -> held, cursor moved past what was delivered
--   EventSinkFail      held              -> free, retry after a backoff
--   EventPark          held              -> held, the head event parked and passed
--   EventSinkRelease   held              -> free
--
-- A sink is held by one relay at a time, so its events go out in outbox
-- order; replicas share the sinks (FOR UPDATE SKIP LOCKED), and a relay that
-- dies leaves its lease to run out -- the next holder starts again from the
-- cursor, so an event whose acknowledgement was lost is delivered again
-- with the same id (at least once). Every change after the claim names the
-- exact lease the relay holds: a relay whose lease was taken over matches
-- zero rows and stops.
--
-- The outbox is read in (tx, seq) order and only below the oldest running
-- transaction (pg_snapshot_xmin), so no event can commit behind a cursor.

-- name: EventSinkEnsure :exec
-- Creates the progress rows of the configured sinks that have none yet: a
-- new sink starts at the beginning of the retained outbox (nothing within
-- events.retention is lost to it).
INSERT INTO uploaded_file_event_sink (name, updated_at)
SELECT unnest(@names::text[]), coalesce(sqlc.narg('now')::timestamptz, now())
ON CONFLICT (name) DO NOTHING;

-- name: EventSinkClaim :many
-- free and due sinks among @names -> held by this relay until now + @lease.
-- Zero rows: every sink is held by another relay or backing off.
WITH candidate AS (
    SELECT name
    FROM uploaded_file_event_sink
    WHERE name = any(@names::text[])
        AND (lease_until IS NULL OR lease_until <= coalesce(sqlc.narg('now')::timestamptz, now()))
        AND (retry_at IS NULL OR retry_at <= coalesce(sqlc.narg('now')::timestamptz, now()))
    ORDER BY name
    FOR UPDATE SKIP LOCKED
)
UPDATE uploaded_file_event_sink
SET
    lease_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @lease::interval,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
FROM candidate
WHERE uploaded_file_event_sink.name = candidate.name
RETURNING uploaded_file_event_sink.*;

-- name: EventBatchAfter :many
-- The next @max events after the cursor (@after_tx, @after_seq), in outbox
-- order, written by transactions older than every running one: an event of
-- a transaction still running (or committing) is left for a later batch, so
-- the cursor can never pass it.
SELECT *
FROM uploaded_file_event
WHERE (tx, seq) > (@after_tx::bigint, @after_seq::bigint)
    AND tx < pg_snapshot_xmin(pg_current_snapshot())::text::bigint
ORDER BY tx, seq
LIMIT @max::integer;

-- name: EventSinkAdvance :one
-- held -> held, cursor at (@after_tx, @after_seq), the failure count reset
-- and the lease renewed, after every event up to there was delivered (or
-- skipped by the sink's type filter). Zero rows: the lease was lost; stop.
UPDATE uploaded_file_event_sink
SET
    after_tx = @after_tx::bigint,
    after_seq = @after_seq::bigint,
    attempts = 0,
    retry_at = NULL,
    last_error = NULL,
    lease_until = coalesce(sqlc.narg('now')::timestamptz, now()) + @lease::interval,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE name = @name
    AND lease_until = @held::timestamptz
RETURNING *;

-- name: EventSinkFail :one
-- held -> free, with one more failed attempt of the head event and no new
-- claim before now + @backoff. @last_error is a status or an error class,
-- never a URL. Zero rows: the lease was lost.
UPDATE uploaded_file_event_sink
SET
    attempts = attempts + @add_attempts::integer,
    retry_at = coalesce(sqlc.narg('now')::timestamptz, now()) + @backoff::interval,
    last_error = @last_error::text,
    lease_until = NULL,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE name = @name
    AND lease_until = @held::timestamptz
RETURNING *;

-- name: EventPark :one
-- held -> held, the head event (@event_tx, @event_seq) parked for this sink
-- after its last attempt and the cursor moved past it, in one statement.
-- Zero rows: the lease was lost.
WITH sink AS (
    UPDATE uploaded_file_event_sink
    SET
        after_tx = @event_tx::bigint,
        after_seq = @event_seq::bigint,
        attempts = 0,
        retry_at = NULL,
        last_error = NULL,
        updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
    WHERE name = @name
        AND lease_until = @held::timestamptz
    RETURNING name
), parked AS (
    INSERT INTO uploaded_file_event_parked (sink, event_seq, attempts, last_error, parked_at)
    SELECT sink.name, @event_seq::bigint, @attempts::integer, @last_error::text, coalesce(sqlc.narg('now')::timestamptz, now())
    FROM sink
    ON CONFLICT (sink, event_seq) DO UPDATE
        SET attempts = excluded.attempts, last_error = excluded.last_error, parked_at = excluded.parked_at
)
SELECT name FROM sink;

-- name: EventSinkRelease :exec
-- held -> free, after a pass with nothing left to deliver. Matches the
-- exact lease; a lost lease is left alone.
UPDATE uploaded_file_event_sink
SET
    lease_until = NULL,
    updated_at = coalesce(sqlc.narg('now')::timestamptz, now())
WHERE name = @name
    AND lease_until = @held::timestamptz;

-- name: EventReplayBatch :many
-- The events queued for a replay to this sink (events replay), oldest
-- first, delivered before new events.
SELECT sqlc.embed(uploaded_file_event), uploaded_file_event_replay.attempts AS replay_attempts
FROM uploaded_file_event_replay
JOIN uploaded_file_event ON uploaded_file_event.seq = uploaded_file_event_replay.event_seq
WHERE uploaded_file_event_replay.sink = @name
ORDER BY uploaded_file_event.tx, uploaded_file_event.seq
LIMIT @max::integer;

-- name: EventReplayDone :execrows
-- A replayed event was delivered: its queue entry goes, by the relay that
-- holds the sink (@held). Zero rows: the lease was lost.
DELETE FROM uploaded_file_event_replay
USING uploaded_file_event_sink
WHERE uploaded_file_event_replay.sink = @name
    AND uploaded_file_event_replay.event_seq = @event_seq
    AND uploaded_file_event_sink.name = uploaded_file_event_replay.sink
    AND uploaded_file_event_sink.lease_until = @held::timestamptz;

-- name: EventReplayFail :one
-- A replayed event failed: one more attempt on its queue entry; at
-- @max_attempts it is parked again (the entry moves back to
-- uploaded_file_event_parked). Returns the attempts so far. Zero rows: the
-- entry is gone (delivered or parked by another relay).
WITH failed AS (
    UPDATE uploaded_file_event_replay
    SET attempts = uploaded_file_event_replay.attempts + 1
    WHERE uploaded_file_event_replay.sink = @name
        AND uploaded_file_event_replay.event_seq = @event_seq
    RETURNING uploaded_file_event_replay.sink, uploaded_file_event_replay.event_seq, uploaded_file_event_replay.attempts
), gone AS (
    DELETE FROM uploaded_file_event_replay
    USING failed
    WHERE uploaded_file_event_replay.sink = failed.sink
        AND uploaded_file_event_replay.event_seq = failed.event_seq
        AND failed.attempts >= @max_attempts::integer
), parked AS (
    INSERT INTO uploaded_file_event_parked (sink, event_seq, attempts, last_error, parked_at)
    SELECT failed.sink, failed.event_seq, failed.attempts, @last_error::text, coalesce(sqlc.narg('now')::timestamptz, now())
    FROM failed
    WHERE failed.attempts >= @max_attempts::integer
    ON CONFLICT (sink, event_seq) DO UPDATE
        SET attempts = excluded.attempts, last_error = excluded.last_error, parked_at = excluded.parked_at
)
SELECT attempts FROM failed;

-- name: EventReplayRequest :execrows
-- Queues the event @id for delivery again (events replay <id>), for the
-- sink @sink or every sink that has a progress row (a replay --since goes a
-- batch at a time: EventReplayRequestBatch). A parked mark for the same
-- sink and event is cleared in the same statement. Returns how many
-- deliveries it queued.
WITH wanted AS (
    SELECT uploaded_file_event.seq, uploaded_file_event_sink.name AS sink
    FROM uploaded_file_event
    CROSS JOIN uploaded_file_event_sink
    WHERE uploaded_file_event.id = @id::uuid
        AND (sqlc.narg('sink')::text IS NULL OR uploaded_file_event_sink.name = sqlc.narg('sink')::text)
), unparked AS (
    DELETE FROM uploaded_file_event_parked
    USING wanted
    WHERE uploaded_file_event_parked.sink = wanted.sink
        AND uploaded_file_event_parked.event_seq = wanted.seq
)
INSERT INTO uploaded_file_event_replay (sink, event_seq, requested_at)
SELECT wanted.sink, wanted.seq, coalesce(sqlc.narg('now')::timestamptz, now())
FROM wanted
ON CONFLICT (sink, event_seq) DO NOTHING;

-- name: EventReplayRequestBatch :one
-- Queues for delivery again the next @max events that occurred at or after
-- @since, after (@after_at, @after_seq) in (occurred_at, seq) order (events
-- replay --since, a batch at a time: it shows its progress and resumes),
-- for the sink @sink or every sink that has a progress row; a parked mark
-- for the same sink and event is cleared in the same statement. Returns
-- how many events the batch held (0: none left), how many deliveries it
-- queued, and the batch's last (occurred_at, seq) -- the cursor given
-- back when the batch is empty.
WITH batch AS (
    SELECT uploaded_file_event.seq, uploaded_file_event.occurred_at
    FROM uploaded_file_event
    WHERE uploaded_file_event.occurred_at >= @since::timestamptz
        AND (uploaded_file_event.occurred_at, uploaded_file_event.seq) > (@after_at::timestamptz, @after_seq::bigint)
    ORDER BY uploaded_file_event.occurred_at, uploaded_file_event.seq
    LIMIT @max::integer
), wanted AS (
    SELECT batch.seq, uploaded_file_event_sink.name AS sink
    FROM batch
    CROSS JOIN uploaded_file_event_sink
    WHERE sqlc.narg('sink')::text IS NULL OR uploaded_file_event_sink.name = sqlc.narg('sink')::text
), unparked AS (
    DELETE FROM uploaded_file_event_parked
    USING wanted
    WHERE uploaded_file_event_parked.sink = wanted.sink
        AND uploaded_file_event_parked.event_seq = wanted.seq
), queued AS (
    INSERT INTO uploaded_file_event_replay (sink, event_seq, requested_at)
    SELECT wanted.sink, wanted.seq, coalesce(sqlc.narg('now')::timestamptz, now())
    FROM wanted
    ON CONFLICT (sink, event_seq) DO NOTHING
    RETURNING 1
), last_at AS (
    -- The batch's last row is its greatest (occurred_at, seq): the latest
    -- time, and the greatest seq at that time (two aggregates, no sort).
    SELECT max(batch.occurred_at) AS occurred_at FROM batch
), last AS (
    SELECT last_at.occurred_at, max(batch.seq) AS seq
    FROM batch
    JOIN last_at ON batch.occurred_at = last_at.occurred_at
    GROUP BY last_at.occurred_at
)
SELECT
    (SELECT count(*) FROM batch)::bigint AS events,
    (SELECT count(*) FROM queued)::bigint AS queued,
    coalesce((SELECT last.occurred_at FROM last), @after_at::timestamptz)::timestamptz AS last_at,
    coalesce((SELECT last.seq FROM last), @after_seq::bigint)::bigint AS last_seq;

-- name: EventListParked :many
-- Parked events, oldest parking first, for the operator (events list
-- --parked).
SELECT
    uploaded_file_event_parked.sink,
    uploaded_file_event_parked.attempts,
    uploaded_file_event_parked.last_error,
    uploaded_file_event_parked.parked_at,
    sqlc.embed(uploaded_file_event)
FROM uploaded_file_event_parked
JOIN uploaded_file_event ON uploaded_file_event.seq = uploaded_file_event_parked.event_seq
ORDER BY uploaded_file_event_parked.parked_at, uploaded_file_event_parked.sink, uploaded_file_event.seq
LIMIT @max::integer;

-- name: EventSinkStatus :many
-- The configured sinks' progress for the metrics and the operator: the
-- failure state, the backlog (how many events are after the cursor) and
-- when the next event to deliver occurred (now when there is none).
SELECT
    uploaded_file_event_sink.name,
    uploaded_file_event_sink.attempts,
    uploaded_file_event_sink.retry_at,
    uploaded_file_event_sink.last_error,
    (
        SELECT count(*)
        FROM uploaded_file_event
        WHERE (uploaded_file_event.tx, uploaded_file_event.seq) > (uploaded_file_event_sink.after_tx, uploaded_file_event_sink.after_seq)
    )::bigint AS depth,
    coalesce(head.occurred_at, coalesce(sqlc.narg('now')::timestamptz, now()))::timestamptz AS oldest
FROM uploaded_file_event_sink
LEFT JOIN LATERAL (
    SELECT uploaded_file_event.occurred_at
    FROM uploaded_file_event
    WHERE (uploaded_file_event.tx, uploaded_file_event.seq) > (uploaded_file_event_sink.after_tx, uploaded_file_event_sink.after_seq)
    ORDER BY uploaded_file_event.tx, uploaded_file_event.seq
    LIMIT 1
) AS head ON true
WHERE uploaded_file_event_sink.name = any(@names::text[])
ORDER BY uploaded_file_event_sink.name;

-- name: EventPrune :execrows
-- Deletes at most @max events that occurred before @cutoff and that every
-- configured sink (@names) has passed, and that are neither parked nor
-- queued for a replay -- each condition applied to the candidates before
-- the LIMIT, so events that must stay (parked, not yet passed) never fill
-- a batch and stop the prune behind them. Returns how many it deleted.
-- The batch is an array the delete looks up by primary key (= any(ARRAY(
-- ...))): as an IN (subquery), a plan made without the arguments joined
-- it against a sequential scan of the whole outbox.
DELETE FROM uploaded_file_event
WHERE seq = any(ARRAY(
    SELECT candidate.seq
    FROM uploaded_file_event AS candidate
    WHERE candidate.occurred_at < @cutoff::timestamptz
        AND NOT EXISTS (
            SELECT 1 FROM uploaded_file_event_sink
            WHERE uploaded_file_event_sink.name = any(@names::text[])
                AND (uploaded_file_event_sink.after_tx, uploaded_file_event_sink.after_seq) < (candidate.tx, candidate.seq)
        )
        AND NOT EXISTS (SELECT 1 FROM uploaded_file_event_parked WHERE uploaded_file_event_parked.event_seq = candidate.seq)
        AND NOT EXISTS (SELECT 1 FROM uploaded_file_event_replay WHERE uploaded_file_event_replay.event_seq = candidate.seq)
    ORDER BY candidate.occurred_at
    LIMIT @max::integer
));

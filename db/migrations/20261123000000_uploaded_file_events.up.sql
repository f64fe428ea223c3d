-- The lifecycle event outbox: every state change of uploaded_file writes its
-- event in the same statement as the transition (a data-modifying CTE in the
-- transition's query), so a committed transition always has its event and a
-- rolled-back one never does. The relay reads the outbox and delivers each
-- event to every configured sink, at least once, in outbox order.
--
--   uploaded_file_event          one row per event (the outbox)
--   uploaded_file_event_sink     per-sink progress: a cursor and a lease
--   uploaded_file_event_parked   events a sink refused too many times
--   uploaded_file_event_replay   events an operator asked to deliver again
--
-- Outbox order is (tx, seq): tx is the writing transaction's id. The relay
-- only reads events whose transaction is older than every transaction still
-- running (tx < pg_snapshot_xmin(pg_current_snapshot())), so an event that
-- commits late can never land behind a cursor that has already passed it.

-- A time-ordered UUID (RFC 9562 version 7) from the database clock:
-- 48 bits of Unix milliseconds, then random bits from gen_random_uuid().
CREATE FUNCTION uploaded_file_uuid_v7() RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
    SELECT encode(
        set_bit(set_bit(
            overlay(uuid_send(gen_random_uuid())
                PLACING substring(int8send((extract(epoch FROM clock_timestamp()) * 1000)::bigint) FROM 3)
                FROM 1 FOR 6),
            52, 1), 53, 1),
        'hex')::uuid
$$;

COMMENT ON FUNCTION uploaded_file_uuid_v7() IS 'A UUIDv7 (Unix milliseconds from clock_timestamp(), random rest): the ids of lifecycle events.';

-- The event data: the HTTP-safe representation of a file row given as JSON
-- (to_jsonb of the row), never the storage key, the staging key or the
-- persisted cdn. Times are RFC 3339 in UTC whatever the session's TimeZone.
CREATE FUNCTION uploaded_file_event_data(f jsonb) RETURNS jsonb
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object(
        'id', f->>'id',
        'userId', f->>'user_id',
        'departmentCode', f->>'department_code',
        'originalName', f->>'original_name',
        'sizeBytes', (f->>'size_bytes')::bigint,
        'contentType', f->>'content_type',
        'visibility', f->>'visibility',
        'status', f->>'status',
        'isTemporary', (f->>'is_temporary')::boolean,
        'disposition', f->>'disposition',
        'checksum', f->>'checksum',
        'module', f->>'module',
        'entity', f->>'entity',
        'entityId', f->>'entity_id',
        'type', f->>'type',
        'createdAt', to_char((f->>'created_at')::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'completedAt', to_char((f->>'completed_at')::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
        'expiredAt', to_char((f->>'expired_at')::timestamptz AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
    ))
$$;

COMMENT ON FUNCTION uploaded_file_event_data(jsonb) IS 'The data of a lifecycle event: the HTTP-safe representation of a file row (to_jsonb of the row); never a storage key or the persisted cdn.';

CREATE TABLE uploaded_file_event (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id uuid NOT NULL DEFAULT uploaded_file_uuid_v7(),
    tx bigint NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
    type text NOT NULL,
    tenant_code text NOT NULL,
    file_id uuid NOT NULL,
    occurred_at timestamptz NOT NULL,
    rule text,
    data jsonb NOT NULL,

    CONSTRAINT uploaded_file_event_id_unique UNIQUE (id),
    CONSTRAINT uploaded_file_event_type_check CHECK (type IN (
        'file.ready', 'file.deleted', 'file.purged', 'file.expired',
        'file.attached', 'file.detached', 'upload.failed', 'upload.abandoned')),
    CONSTRAINT uploaded_file_event_rule_check CHECK (rule IS NULL OR char_length(rule) BETWEEN 1 AND 128),
    CONSTRAINT uploaded_file_event_data_object_check CHECK (jsonb_typeof(data) = 'object')
);

COMMENT ON TABLE uploaded_file_event IS 'The lifecycle event outbox: one row per state change of uploaded_file, written by the transition''s own statement; pruned after events.retention once every sink has it.';
COMMENT ON COLUMN uploaded_file_event.seq IS 'Insertion order. Within one file it follows the row lock, so it is the file''s transition order.';
COMMENT ON COLUMN uploaded_file_event.id IS 'The CloudEvents id (UUIDv7); a redelivery carries the same id.';
COMMENT ON COLUMN uploaded_file_event.tx IS 'The writing transaction (pg_current_xact_id): the relay reads (tx, seq) order and only transactions older than every running one.';
COMMENT ON COLUMN uploaded_file_event.type IS 'The event name; the CloudEvents type is io.uploadedfile.<type>.';
COMMENT ON COLUMN uploaded_file_event.tenant_code IS 'The file''s tenant (CloudEvents extension attribute tenant).';
COMMENT ON COLUMN uploaded_file_event.file_id IS 'The file (CloudEvents subject).';
COMMENT ON COLUMN uploaded_file_event.occurred_at IS 'The transition''s time from the database clock (the row''s updated_at).';
COMMENT ON COLUMN uploaded_file_event.rule IS 'upload.failed: the rule the upload broke (content.mismatch, size.mismatch, ...); NULL otherwise.';
COMMENT ON COLUMN uploaded_file_event.data IS 'The HTTP-safe file representation at the transition (uploaded_file_event_data).';

CREATE INDEX uploaded_file_event_order_idx ON uploaded_file_event (tx, seq);
CREATE INDEX uploaded_file_event_file_idx ON uploaded_file_event (file_id, seq);
CREATE INDEX uploaded_file_event_occurred_idx ON uploaded_file_event (occurred_at);

CREATE TABLE uploaded_file_event_sink (
    name text PRIMARY KEY,
    after_tx bigint NOT NULL DEFAULT 0,
    after_seq bigint NOT NULL DEFAULT 0,
    lease_until timestamptz,
    attempts integer NOT NULL DEFAULT 0,
    retry_at timestamptz,
    last_error text,
    updated_at timestamptz NOT NULL DEFAULT now(),

    CONSTRAINT uploaded_file_event_sink_name_check CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$'),
    CONSTRAINT uploaded_file_event_sink_attempts_check CHECK (attempts >= 0)
);

COMMENT ON TABLE uploaded_file_event_sink IS 'Per-sink delivery progress. One relay at a time holds a sink (lease_until), so a sink''s events go out in order.';
COMMENT ON COLUMN uploaded_file_event_sink.name IS 'The sink''s name in events.sinks.';
COMMENT ON COLUMN uploaded_file_event_sink.after_tx IS 'Cursor: every event at or before (after_tx, after_seq) was delivered (or parked).';
COMMENT ON COLUMN uploaded_file_event_sink.after_seq IS 'Cursor, with after_tx.';
COMMENT ON COLUMN uploaded_file_event_sink.lease_until IS 'The relay holding the sink until then; NULL when free. A relay that dies leaves it to run out.';
COMMENT ON COLUMN uploaded_file_event_sink.attempts IS 'Failed attempts of the event after the cursor; parked at events.sinks.<name>.maxAttempts.';
COMMENT ON COLUMN uploaded_file_event_sink.retry_at IS 'Backoff: the sink is not claimed again before then.';
COMMENT ON COLUMN uploaded_file_event_sink.last_error IS 'The last delivery failure (status or error class; never a URL or a secret).';
COMMENT ON COLUMN uploaded_file_event_sink.updated_at IS 'Last change (database clock).';

CREATE TABLE uploaded_file_event_parked (
    sink text NOT NULL REFERENCES uploaded_file_event_sink (name) ON DELETE CASCADE,
    event_seq bigint NOT NULL REFERENCES uploaded_file_event (seq) ON DELETE CASCADE,
    attempts integer NOT NULL,
    last_error text,
    parked_at timestamptz NOT NULL,
    PRIMARY KEY (sink, event_seq)
);

COMMENT ON TABLE uploaded_file_event_parked IS 'Events a sink failed maxAttempts times; the cursor moved past them. events replay delivers them again.';

CREATE TABLE uploaded_file_event_replay (
    sink text NOT NULL REFERENCES uploaded_file_event_sink (name) ON DELETE CASCADE,
    event_seq bigint NOT NULL REFERENCES uploaded_file_event (seq) ON DELETE CASCADE,
    attempts integer NOT NULL DEFAULT 0,
    requested_at timestamptz NOT NULL,
    PRIMARY KEY (sink, event_seq)
);

COMMENT ON TABLE uploaded_file_event_replay IS 'Events an operator asked to deliver again (events replay), delivered by the relay before new events.';
COMMENT ON COLUMN uploaded_file_event_parked.sink IS 'The sink that refused the event.';
COMMENT ON COLUMN uploaded_file_event_parked.event_seq IS 'The parked event.';
COMMENT ON COLUMN uploaded_file_event_parked.attempts IS 'Attempts made before parking.';
COMMENT ON COLUMN uploaded_file_event_parked.last_error IS 'The last failure (status or error class; never a URL or a secret).';
COMMENT ON COLUMN uploaded_file_event_parked.parked_at IS 'When it was parked (database clock).';
COMMENT ON COLUMN uploaded_file_event_replay.sink IS 'The sink to deliver to again.';
COMMENT ON COLUMN uploaded_file_event_replay.event_seq IS 'The event to deliver again.';
COMMENT ON COLUMN uploaded_file_event_replay.attempts IS 'Failed attempts of this replay; parked again at the sink''s maxAttempts.';
COMMENT ON COLUMN uploaded_file_event_replay.requested_at IS 'When the operator asked (database clock).';

-- Pruning skips events still parked or queued for a replay.
CREATE INDEX uploaded_file_event_parked_event_idx ON uploaded_file_event_parked (event_seq);
CREATE INDEX uploaded_file_event_replay_event_idx ON uploaded_file_event_replay (event_seq);

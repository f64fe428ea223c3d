-- The outbox in (occurred_at, seq) order: `events replay --since` queues a
-- batch after the last event it queued (EventReplayBatch), so a replay of
-- millions of events shows its progress and resumes where it stopped; the
-- prune and the backlog's oldest event read occurred_at, which it leads
-- with. Built CONCURRENTLY, alone in its migration; its schema window is
-- declared by 20261128500001.
CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_event_occurred_seq_idx ON uploaded_file_event (occurred_at, seq);

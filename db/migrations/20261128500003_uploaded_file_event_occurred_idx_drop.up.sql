-- The (occurred_at) index of the outbox is replaced by (occurred_at, seq)
-- (20261128500002), which serves every statement it served. Dropped
-- CONCURRENTLY, alone in its migration; its schema window is declared by
-- 20261128500001.
DROP INDEX CONCURRENTLY IF EXISTS uploaded_file_event_occurred_idx;

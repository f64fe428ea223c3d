CREATE INDEX CONCURRENTLY IF NOT EXISTS uploaded_file_event_occurred_idx ON uploaded_file_event (occurred_at);

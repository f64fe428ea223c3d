-- Reverts the lifecycle event outbox: undelivered events are lost.
DROP TABLE IF EXISTS uploaded_file_event_replay;
DROP TABLE IF EXISTS uploaded_file_event_parked;
DROP TABLE IF EXISTS uploaded_file_event_sink;
DROP TABLE IF EXISTS uploaded_file_event;
DROP FUNCTION IF EXISTS uploaded_file_event_data(jsonb);
DROP FUNCTION IF EXISTS uploaded_file_uuid_v7();

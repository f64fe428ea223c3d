-- Validates the event type constraint 20261124000000 added NOT VALID: a
-- scan under SHARE UPDATE EXCLUSIVE, which lets writers go on.
ALTER TABLE uploaded_file_event VALIDATE CONSTRAINT uploaded_file_event_type_check;

-- Validation is not undone: the constraints go with 20261122000000's down.
SELECT 1;

-- Validation is not undone: the constraints go with 20261125000000's down.
SELECT 1;

-- Validation is not undone: the constraint goes with 20261124000000's down.
SELECT 1;

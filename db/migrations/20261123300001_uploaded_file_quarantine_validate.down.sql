-- Validation is not undone: the constraints go with 20261123300000's down.
SELECT 1;

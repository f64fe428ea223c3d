-- Checkpoints of long operator commands (uploaded_file_command_checkpoint):
-- where an interrupted `maintenance rescan` or `recount-usage` stopped, for
-- --resume.

-- name: CheckpointGet :one
-- The checkpoint of @command over @selection. Zero rows: none (the last
-- run ended, or none was interrupted).
SELECT *
FROM uploaded_file_command_checkpoint
WHERE command = @command AND selection = @selection;

-- name: CheckpointSave :exec
-- Writes where the run stands: every file at or before @after_id done, and
-- @done_above after it; or, for a walk by text key, every key at or before
-- @after_key (in byte order) done. Idempotent; the run's last write wins.
INSERT INTO uploaded_file_command_checkpoint (command, selection, after_id, done_above, since, after_key, updated_at)
VALUES (@command, @selection, @after_id, @done_above::uuid[], sqlc.narg('since')::timestamptz, sqlc.narg('after_key')::text,
    coalesce(sqlc.narg('now')::timestamptz, now()))
ON CONFLICT (command, selection) DO UPDATE
SET after_id = excluded.after_id,
    done_above = excluded.done_above,
    since = excluded.since,
    after_key = excluded.after_key,
    updated_at = excluded.updated_at;

-- name: CheckpointClear :exec
-- Removes the checkpoint once a run ends. Zero rows: there was none.
DELETE FROM uploaded_file_command_checkpoint
WHERE command = @command AND selection = @selection;

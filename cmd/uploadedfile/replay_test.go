package main

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEventsReplayResumesAfterInterrupt: `events replay --since` over
// 20,000 events, interrupted with a real SIGINT a tenth of the way, then
// `--resume`d: between them the two runs queue every event since the
// time exactly once, and none before it; the checkpoint is gone once a run
// ends.
func TestEventsReplayResumesAfterInterrupt(t *testing.T) {
	t.Parallel()
	d := newLongDB(t, "localRoot: "+t.TempDir()+`
events:
  sinks:
    hook:
      webhook: { url: "http://127.0.0.1:9/hook", secret: "whsec_`+base64.StdEncoding.EncodeToString(make([]byte, 32))+`" }
`)
	bin, url, cfgFile, pool, ctx := d.bin, d.url, d.cfgFile, d.pool, context.Background()
	const recent = 20_000
	_, err := pool.Exec(ctx, `INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, data)
SELECT 'file.ready', 'acme', gen_random_uuid(), now() - interval '1 hour' + (i % 997) * interval '1 ms', '{}'
FROM generate_series(1, $1) AS i`, recent)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO uploaded_file_event (type, tenant_code, file_id, occurred_at, data)
SELECT 'file.ready', 'acme', gen_random_uuid(), now() - interval '2 days', '{}' FROM generate_series(1, 500)`)
	require.NoError(t, err)
	count := func(sql string) int { return d.count(t, sql) }

	replay := func(interruptAt int, extra ...string) (longRun, error) {
		args := append([]string{"--database-url", url, "--config", cfgFile, "--output", "json", "--progress-every", "5ms",
			"events", "replay", "--since", "3h"}, extra...)
		return runLong(t, bin, args, interruptAt, "events", "")
	}

	first, err := replay(recent / 10)
	require.ErrorContains(t, err, "events replay interrupted", "an interrupted replay exits non-zero")
	require.True(t, first.Interrupted)
	require.Greater(t, *first.Count, 0)
	require.Less(t, *first.Count, recent, "stopped before the end")
	require.Equal(t, *first.Count, count("SELECT count(*) FROM uploaded_file_event_replay"), "each event it counted is queued")
	require.Equal(t, 1, count("SELECT count(*) FROM uploaded_file_command_checkpoint WHERE command = 'events replay'"), "where it stopped is kept")

	second, err := replay(0, "--resume")
	require.NoError(t, err)
	require.False(t, second.Interrupted)
	require.Equal(t, recent, *first.Count+*second.Count, "the rest exactly: none twice, none skipped")
	require.Equal(t, recent, count("SELECT count(DISTINCT event_seq) FROM uploaded_file_event_replay"))
	require.Zero(t, count(`SELECT count(*) FROM uploaded_file_event_replay JOIN uploaded_file_event ON seq = event_seq
WHERE occurred_at < now() - interval '1 day'`), "nothing before --since")
	require.Zero(t, count("SELECT count(*) FROM uploaded_file_command_checkpoint"), "a run that ends removes it")

	_, err = replay(0, "--resume")
	require.ErrorContains(t, err, "no interrupted replay of this selection", "nothing to resume")
}

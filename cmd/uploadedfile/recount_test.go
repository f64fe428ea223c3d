package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRecountResumesAfterInterrupt: `recount-usage` over 2,000 tenants
// whose usage rows were changed by hand, interrupted with a real SIGINT a
// tenth of the way, then `--resume`d: the two runs recount every tenant
// exactly once between them, in byte order, and leave every usage row
// equal to its rows' sums; the checkpoint is gone once a run ends.
func TestRecountResumesAfterInterrupt(t *testing.T) {
	t.Parallel()
	d := newLongDB(t, "localRoot: "+t.TempDir()+"\n")
	bin, url, cfgFile, pool, ctx := d.bin, d.url, d.cfgFile, d.pool, context.Background()
	const tenants = 2000
	// Usage nobody's rows hold (a hand edit gone wrong): the recount sets
	// each back to zero.
	_, err := pool.Exec(ctx, `INSERT INTO uploaded_file_usage (tenant_code, user_id, bytes, files)
SELECT 'tenant-' || lpad(i::text, 5, '0'), u, 1000 + i, 3 FROM generate_series(1, $1) AS i CROSS JOIN (VALUES (''), ('alice')) AS o (u)`, tenants)
	require.NoError(t, err)
	count := func(sql string) int { return d.count(t, sql) }

	recount := func(interruptAt int, extra ...string) (longRun, error) {
		args := append([]string{"--database-url", url, "--output", "json", "--progress-every", "10ms", "maintenance", "--config", cfgFile,
			"recount-usage"}, extra...)
		return runLong(t, bin, args, interruptAt, "tenants", "")
	}

	first, err := recount(tenants / 10)
	require.ErrorContains(t, err, "recount-usage interrupted", "an interrupted recount exits non-zero")
	require.True(t, first.Interrupted)
	require.Greater(t, *first.Count, 0)
	require.Less(t, *first.Count, tenants, "stopped before the end")
	require.Equal(t, fmt.Sprintf("tenant-%05d", *first.Count), first.String(t, "last"), "in byte order, none skipped")
	require.Equal(t, *first.Count, count("SELECT count(*) FROM uploaded_file_usage WHERE user_id = '' AND bytes = 0"), "the tenants done are recounted")
	require.Equal(t, 1, count("SELECT count(*) FROM uploaded_file_command_checkpoint WHERE command = 'recount-usage'"), "where it stopped is kept")

	second, err := recount(0, "--resume")
	require.NoError(t, err)
	require.False(t, second.Interrupted)
	require.Equal(t, tenants, *first.Count+*second.Count, "the rest exactly: none twice, none skipped")
	require.Equal(t, fmt.Sprintf("tenant-%05d", tenants), second.String(t, "last"))
	require.Zero(t, count("SELECT count(*) FROM uploaded_file_usage WHERE bytes <> 0 OR files <> 0"), "every usage row equals its rows' sums")
	require.Zero(t, count("SELECT count(*) FROM uploaded_file_command_checkpoint"), "a run that ends removes it")

	_, err = recount(0, "--resume")
	require.ErrorContains(t, err, "no interrupted recount of this selection", "nothing to resume")
}

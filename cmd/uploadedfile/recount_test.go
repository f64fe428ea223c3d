package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// TestRecountResumesAfterInterrupt: `recount-usage` over 2,000 tenants
// whose usage rows were changed by hand, interrupted with a real SIGINT a
// tenth of the way, then `--resume`d: the two runs recount every tenant
// exactly once between them, in byte order, and leave every usage row
// equal to its rows' sums; the checkpoint is gone once a run ends.
func TestRecountResumesAfterInterrupt(t *testing.T) {
	t.Parallel()
	bin, err := buildOnce()
	require.NoError(t, err)
	url, ctx := pgtest.NewDatabase(t), context.Background()
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("localRoot: "+t.TempDir()+"\n"), 0o600))
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	const tenants = 2000
	// Usage nobody's rows hold (a hand edit gone wrong): the recount sets
	// each back to zero.
	_, err = pool.Exec(ctx, `INSERT INTO uploaded_file_usage (tenant_code, user_id, bytes, files)
SELECT 'tenant-' || lpad(i::text, 5, '0'), u, 1000 + i, 3 FROM generate_series(1, $1) AS i CROSS JOIN (VALUES (''), ('alice')) AS o (u)`, tenants)
	require.NoError(t, err)
	count := func(sql string) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, sql).Scan(&n))
		return n
	}

	type summary struct {
		Tenants     *int
		Last        string
		Interrupted bool
		Progress    *struct{ Done, Total int }
	}
	recount := func(interruptAt int, extra ...string) (summary, error) {
		args := append([]string{"--database-url", url, "--output", "json", "--progress-every", "10ms", "maintenance", "--config", cfgFile,
			"recount-usage"}, extra...)
		cmd := exec.Command(bin, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		var last summary
		signalled := false
		for lines := bufio.NewScanner(out); lines.Scan(); {
			var s summary
			require.NoError(t, json.Unmarshal(lines.Bytes(), &s), lines.Text())
			if s.Progress != nil && interruptAt > 0 && s.Progress.Done >= interruptAt && !signalled {
				require.NoError(t, cmd.Process.Signal(os.Interrupt))
				signalled = true
			}
			if s.Tenants != nil {
				last = s
			}
		}
		require.True(t, interruptAt == 0 || signalled, "the recount was still running at %d tenants", interruptAt)
		err = cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, stderr.String())
		}
		return last, err
	}

	first, err := recount(tenants / 10)
	require.ErrorContains(t, err, "recount-usage interrupted", "an interrupted recount exits non-zero")
	require.True(t, first.Interrupted)
	require.Greater(t, *first.Tenants, 0)
	require.Less(t, *first.Tenants, tenants, "stopped before the end")
	require.Equal(t, fmt.Sprintf("tenant-%05d", *first.Tenants), first.Last, "in byte order, none skipped")
	require.Equal(t, *first.Tenants, count("SELECT count(*) FROM uploaded_file_usage WHERE user_id = '' AND bytes = 0"), "the tenants done are recounted")
	require.Equal(t, 1, count("SELECT count(*) FROM uploaded_file_command_checkpoint WHERE command = 'recount-usage'"), "where it stopped is kept")

	second, err := recount(0, "--resume")
	require.NoError(t, err)
	require.False(t, second.Interrupted)
	require.Equal(t, tenants, *first.Tenants+*second.Tenants, "the rest exactly: none twice, none skipped")
	require.Equal(t, fmt.Sprintf("tenant-%05d", tenants), second.Last)
	require.Zero(t, count("SELECT count(*) FROM uploaded_file_usage WHERE bytes <> 0 OR files <> 0"), "every usage row equals its rows' sums")
	require.Zero(t, count("SELECT count(*) FROM uploaded_file_command_checkpoint"), "a run that ends removes it")

	_, err = recount(0, "--resume")
	require.ErrorContains(t, err, "no interrupted recount of this selection", "nothing to resume")
}

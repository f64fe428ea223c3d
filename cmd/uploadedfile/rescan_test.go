package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/clamd"
	"github.com/uploadedfile/uploadedfile/internal/testkit/clamdtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/service"
)

// TestRescanResumesAfterInterrupt: a rescan with --quarantine of 1,000
// files (ten of them malware), on the real clamd, gets SIGINT a tenth of
// the way in: it finishes the files in flight, writes its checkpoint, says
// it was interrupted and exits non-zero. Run again with --resume and the
// same flags, it scans exactly the rest -- the two runs' counts add up to
// the 1,000, no file twice, none skipped -- every malware file is
// quarantined once, and the checkpoint is gone.
func TestRescanResumesAfterInterrupt(t *testing.T) {
	t.Parallel()
	bin, err := buildOnce()
	require.NoError(t, err)
	r := newRescanFixture(t)
	url, cfgFile, svc, rc, pool, ctx := r.url, r.cfgFile, r.svc, r.rc, r.pool, context.Background()
	const files = 1000
	for i := range files {
		body := fmt.Sprintf("id,n\n%d,1\n", i)
		if i%100 == 0 {
			body = clamdtest.EICAR
		}
		_, err := svc.Upload(rc, strings.NewReader(body), "rows.csv", nil)
		require.NoError(t, err)
	}
	count := func(sql string) int {
		var n int
		require.NoError(t, pool.QueryRow(ctx, sql).Scan(&n))
		return n
	}
	rescan := func(interruptAt int, extra ...string) (longRun, error) {
		args := append([]string{"--database-url", url, "--output", "json", "--progress-every", "20ms", "maintenance", "--config", cfgFile,
			"rescan", "--concurrency", "2", "--quarantine"}, extra...)
		return runLong(t, bin, args, interruptAt, "scanned", `"signature"`)
	}

	first, err := rescan(files / 10)
	require.Error(t, err, "an interrupted rescan exits non-zero")
	require.True(t, first.Interrupted)
	require.NotNil(t, first.Count)
	require.Greater(t, *first.Count, 0)
	require.Less(t, *first.Count, files, "stopped before the end")
	require.Equal(t, 1, count("SELECT count(*) FROM uploaded_file_command_checkpoint"), "where it stopped is kept")

	_, err = pool.Exec(ctx, "ANALYZE uploaded_file") // as autovacuum would have by now
	require.NoError(t, err)
	second, err := rescan(0, "--resume")
	require.NoError(t, err)
	require.False(t, second.Interrupted)
	require.Equal(t, files, *first.Count+*second.Count, "the rest exactly: none twice, none skipped")
	require.InDelta(t, *second.Count, second.FirstTotal, files/20, "the resumed run's progress expects the rest, not the whole")
	require.Equal(t, files/100, first.Int(t, "quarantined")+second.Int(t, "quarantined"))
	require.Equal(t, files/100, count("SELECT count(*) FROM uploaded_file WHERE status = 'quarantined'"))
	require.Equal(t, files/100, count("SELECT count(*) FROM uploaded_file_event WHERE type = 'file.quarantined'"), "each once")
	require.Zero(t, count("SELECT count(*) FROM uploaded_file_command_checkpoint"), "a run that ends removes it")

	_, err = rescan(0, "--resume")
	require.ErrorContains(t, err, "no interrupted rescan of this selection", "nothing to resume")
}

// rescanFixture is what the rescan tests share: the real clamd, a migrated
// database, a configuration naming both, and a service to store files as
// alice of acme.
type rescanFixture struct {
	clamd        *clamdtest.Daemon
	url, cfgFile string
	pool         *pgxpool.Pool
	svc          *service.Service
	rc           context.Context
}

func newRescanFixture(t *testing.T) rescanFixture {
	t.Helper()
	r := rescanFixture{clamd: clamdtest.Start(t, 30), url: pgtest.NewDatabase(t)}
	root := t.TempDir()
	r.cfgFile = filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(r.cfgFile, []byte("localRoot: "+root+"\nscan:\n  clamd: "+r.clamd.Addr+"\n"), 0o600))
	ctx := context.Background()
	var err error
	r.pool, err = pgxpool.New(ctx, r.url)
	require.NoError(t, err)
	t.Cleanup(r.pool.Close)
	r.svc, err = service.New(ctx, service.Config{Driver: service.DriverLocal, LocalRoot: root}, r.pool)
	require.NoError(t, err)
	r.rc = service.WithRequestContext(ctx, service.RequestContext{Tenant: "acme", UserID: "alice"})
	return r
}

// TestRescanCommand: `maintenance rescan` against the real clamd opens as
// many streams as clamd runs scans at once (its MaxThreads, 8 here) unless
// told otherwise, and reports each detection and the summary; with clamd
// down, files are reported without a verdict and the run exits non-zero
// once five in a row had none.
func TestRescanCommand(t *testing.T) {
	t.Parallel()
	r := newRescanFixture(t)
	d, url, cfgFile, svc, rc, ctx := r.clamd, r.url, r.cfgFile, r.svc, r.rc, context.Background()
	for i := range 7 {
		_, err := svc.Upload(rc, strings.NewReader(fmt.Sprintf("id,n\n%d,1\n", i)), "rows.csv", nil)
		require.NoError(t, err)
	}
	bad, err := svc.Upload(rc, strings.NewReader(clamdtest.EICAR), "notes.txt", nil)
	require.NoError(t, err)

	out, err := run(t, ctx, url, "maintenance", "--config", cfgFile, "rescan")
	require.NoError(t, err)
	require.Contains(t, out, "detected "+bad.ID.String()+" tenant=acme signature="+clamdtest.Signature+" quarantined=false\n")
	require.Contains(t, out, "rescan: 8 scanned, 1 detected, 0 quarantined, 0 without a verdict (8 streams)\n")
	require.NotContains(t, out, "progress", "text output that is not a terminal shows no progress")
	// With --output json, progress objects come before the summary: done
	// of the estimated total, the rate and the time left.
	out, err = run(t, ctx, url, "--output", "json", "--progress-every", "1ms", "maintenance", "--config", cfgFile, "rescan", "--concurrency", "1")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var shown int
	for i, line := range lines {
		var o struct {
			Progress *struct {
				Command                         string
				Done, Total                     int64
				RatePerSecond, RemainingSeconds float64
			}
			Scanned *int
		}
		require.NoError(t, json.Unmarshal([]byte(line), &o), line)
		if o.Progress != nil {
			shown++
			require.Equal(t, "rescan", o.Progress.Command)
			require.Positive(t, o.Progress.Total, "the planner's estimate")
			require.LessOrEqual(t, o.Progress.Done, int64(8))
		}
		if o.Scanned != nil {
			require.Equal(t, len(lines)-1, i, "the summary comes last")
			require.Equal(t, 8, *o.Scanned)
		}
	}
	require.Positive(t, shown, "progress objects: %s", out)
	out, err = run(t, ctx, url, "maintenance", "--config", cfgFile, "rescan", "--concurrency", "3", "--quarantine")
	require.NoError(t, err)
	require.Contains(t, out, "rescan: 8 scanned, 1 detected, 1 quarantined, 0 without a verdict (3 streams)\n")

	d.Kill()
	out, err = run(t, ctx, url, "maintenance", "--config", cfgFile, "rescan", "--concurrency", "1", "--retries", "0")
	require.ErrorIs(t, err, clamd.ErrUnavailable, "clamd down: the run stops, non-zero")
	require.Equal(t, 5, strings.Count(out, "no verdict "), "each file without a verdict is reported: %s", out)
	require.Contains(t, out, "0 scanned, 0 detected, 0 quarantined, 5 without a verdict (1 streams)")
}

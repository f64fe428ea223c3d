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
	d := clamdtest.Start(t, 30)
	url := pgtest.NewDatabase(t)
	root := t.TempDir()
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("localRoot: "+root+"\nscan:\n  clamd: "+d.Addr+"\n"), 0o600))
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	svc, err := service.New(ctx, service.Config{Driver: service.DriverLocal, LocalRoot: root}, pool)
	require.NoError(t, err)
	rc := service.WithRequestContext(ctx, service.RequestContext{Tenant: "acme", UserID: "alice"})
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
	type summary struct {
		Scanned, Quarantined *int
		Interrupted          bool
		Progress             *struct{ Done int }
	}
	rescan := func(interruptAt int, extra ...string) (summary, error) {
		args := append([]string{"--database-url", url, "--output", "json", "--progress-every", "20ms", "maintenance", "--config", cfgFile,
			"rescan", "--concurrency", "2", "--quarantine"}, extra...)
		cmd := exec.Command(bin, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		var last summary
		lines := bufio.NewScanner(out)
		signalled := false
		for lines.Scan() {
			var s summary
			if strings.Contains(lines.Text(), `"signature"`) {
				continue // a detection
			}
			require.NoError(t, json.Unmarshal(lines.Bytes(), &s), lines.Text())
			if s.Progress != nil && interruptAt > 0 && s.Progress.Done >= interruptAt && !signalled {
				require.NoError(t, cmd.Process.Signal(os.Interrupt))
				signalled = true
			}
			if s.Scanned != nil {
				last = s
			}
		}
		require.True(t, interruptAt == 0 || signalled, "the rescan was still running at %d files", interruptAt)
		err = cmd.Wait()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, stderr.String())
		}
		return last, err
	}

	first, err := rescan(files / 10)
	require.Error(t, err, "an interrupted rescan exits non-zero")
	require.True(t, first.Interrupted)
	require.NotNil(t, first.Scanned)
	require.Greater(t, *first.Scanned, 0)
	require.Less(t, *first.Scanned, files, "stopped before the end")
	require.Equal(t, 1, count("SELECT count(*) FROM uploaded_file_command_checkpoint"), "where it stopped is kept")

	second, err := rescan(0, "--resume")
	require.NoError(t, err)
	require.False(t, second.Interrupted)
	require.Equal(t, files, *first.Scanned+*second.Scanned, "the rest exactly: none twice, none skipped")
	require.Equal(t, files/100, *first.Quarantined+*second.Quarantined)
	require.Equal(t, files/100, count("SELECT count(*) FROM uploaded_file WHERE status = 'quarantined'"))
	require.Equal(t, files/100, count("SELECT count(*) FROM uploaded_file_event WHERE type = 'file.quarantined'"), "each once")
	require.Zero(t, count("SELECT count(*) FROM uploaded_file_command_checkpoint"), "a run that ends removes it")

	_, err = rescan(0, "--resume")
	require.ErrorContains(t, err, "no interrupted rescan of this selection", "nothing to resume")
}

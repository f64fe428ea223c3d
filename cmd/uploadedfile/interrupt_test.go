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

// longRun is what the interrupt-and-resume tests read of a long command's
// --output json: its progress objects and its summary.
type longRun struct {
	Interrupted bool
	Progress    *struct{ Done, Total int }
	// Count is the summary's count of what the run did (scanned files,
	// recounted tenants, queued events); nil on other lines.
	Count *int
	// FirstTotal is the total of the run's first progress object: what
	// it expected to do when it began.
	FirstTotal int
	// fields are the summary's, for the counts a test reads besides.
	fields map[string]json.RawMessage
}

// String is the summary's field name, a string.
func (r longRun) String(t *testing.T, name string) string {
	t.Helper()
	var v string
	require.NoError(t, json.Unmarshal(r.fields[name], &v), "%s in %v", name, r.fields)
	return v
}

// Int is the summary's count name.
func (r longRun) Int(t *testing.T, name string) int {
	t.Helper()
	var n int
	require.NoError(t, json.Unmarshal(r.fields[name], &n), "%s in %v", name, r.fields)
	return n
}

// runLong runs the real binary with args (--output json), sends it SIGINT
// once a progress object says interruptAt items are done (0: never), and
// returns the summary -- the last line whose field count names the run's
// count -- and the command's error with its stderr. Lines that contain
// skip (a detection, say) are not read.
func runLong(t *testing.T, bin string, args []string, interruptAt int, count, skip string) (longRun, error) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	var last longRun
	signalled, firstTotal := false, -1
	for lines := bufio.NewScanner(out); lines.Scan(); {
		if skip != "" && strings.Contains(lines.Text(), skip) {
			continue
		}
		var line map[string]json.RawMessage
		require.NoError(t, json.Unmarshal(lines.Bytes(), &line), lines.Text())
		var r longRun
		require.NoError(t, json.Unmarshal(lines.Bytes(), &r), lines.Text())
		if r.Progress != nil && firstTotal < 0 {
			firstTotal = r.Progress.Total
		}
		if r.Progress != nil && interruptAt > 0 && r.Progress.Done >= interruptAt && !signalled {
			require.NoError(t, cmd.Process.Signal(os.Interrupt))
			signalled = true
		}
		if raw, ok := line[count]; ok {
			var n int
			require.NoError(t, json.Unmarshal(raw, &n), lines.Text())
			r.Count, r.fields, r.FirstTotal = &n, line, firstTotal
			last = r
		}
	}
	err = cmd.Wait()
	require.True(t, interruptAt == 0 || signalled, "the command was still running at %d: %v %s", interruptAt, err, stderr.String())
	if err != nil {
		err = fmt.Errorf("%w: %s", err, stderr.String())
	}
	return last, err
}

// longDB is what the interrupt-and-resume tests share: the binary, a
// migrated database with a pool on it, and a configuration file.
type longDB struct {
	bin, url, cfgFile string
	pool              *pgxpool.Pool
}

// newLongDB builds the binary, makes the database and writes config.
func newLongDB(t *testing.T, config string) longDB {
	t.Helper()
	bin, err := buildOnce()
	require.NoError(t, err)
	d := longDB{bin: bin, url: pgtest.NewDatabase(t), cfgFile: filepath.Join(t.TempDir(), "config.yaml")}
	require.NoError(t, os.WriteFile(d.cfgFile, []byte(config), 0o600))
	d.pool, err = pgxpool.New(context.Background(), d.url)
	require.NoError(t, err)
	t.Cleanup(d.pool.Close)
	return d
}

// count runs sql, a count.
func (d longDB) count(t *testing.T, sql string) int {
	t.Helper()
	var n int
	require.NoError(t, d.pool.QueryRow(context.Background(), sql).Scan(&n))
	return n
}

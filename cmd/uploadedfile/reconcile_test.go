package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReconcileRepairResumesAfterInterrupt: a reconcile --repair over
// 3,000 orphans, interrupted by SIGINT once 1,000 are done, stops after the
// object in hand with its checkpoint kept; --resume with the same flags
// repairs exactly the rest, listing none of the first run's objects again.
func TestReconcileRepairResumesAfterInterrupt(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	d := newLongDB(t, "localRoot: "+root+"\n")
	bin, url, cfgFile := d.bin, d.url, d.cfgFile
	const objects = 3000
	old := time.Now().Add(-time.Hour)
	for i := range objects {
		p := filepath.Join(root, "core", fmt.Sprintf("t-%02d", i/1000), fmt.Sprintf("%05d.pdf", i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o750))
		require.NoError(t, os.WriteFile(p, []byte("%PDF-1.4\n"), 0o600))
		require.NoError(t, os.Chtimes(p, old, old))
	}
	count := func(sql string) int { return d.count(t, sql) }
	left := func() int {
		n := 0
		require.NoError(t, filepath.WalkDir(root, func(_ string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				n++
			}
			return err
		}))
		return n
	}
	reconcile := func(interruptAt int, extra ...string) (longRun, error) {
		args := append([]string{"--database-url", url, "--output", "json", "--progress-every", "1ms", "maintenance", "--config", cfgFile,
			"reconcile", "--repair", "--grace", "10m"}, extra...)
		return runLong(t, bin, args, interruptAt, "objects", `"kind"`)
	}

	first, err := reconcile(1000)
	require.ErrorContains(t, err, "reconcile interrupted", "an interrupted reconcile exits non-zero")
	require.True(t, first.Interrupted)
	require.GreaterOrEqual(t, *first.Count, 1000)
	require.Less(t, *first.Count, objects, "stopped before the end")
	n := *first.Count
	require.Equal(t, fmt.Sprintf("core/t-%02d/%05d.pdf", (n-1)/1000, n-1), first.String(t, "last"), "in key order, none skipped")
	require.Equal(t, objects-n, left(), "each object done is repaired, no other")
	require.Equal(t, 1, count("SELECT count(*) FROM uploaded_file_command_checkpoint WHERE command = 'reconcile'"), "where it stopped is kept")

	_, err = reconcile(0, "--resume", "--grace", "20m")
	require.ErrorContains(t, err, "no interrupted reconcile with these flags", "the checkpoint is the same flags'")

	second, err := reconcile(0, "--resume")
	require.NoError(t, err)
	require.False(t, second.Interrupted)
	require.Equal(t, objects-n, *second.Count, "the rest exactly: none listed twice, none skipped")
	require.Equal(t, fmt.Sprintf("core/t-%02d/%05d.pdf", (objects-1)/1000, objects-1), second.String(t, "last"))
	require.Zero(t, left(), "every orphan repaired")
	require.Zero(t, count("SELECT count(*) FROM uploaded_file_orphan_claim"), "no claim left behind")
	require.Zero(t, count("SELECT count(*) FROM uploaded_file_command_checkpoint"), "a run that ends removes it")

	_, err = reconcile(0, "--resume")
	require.ErrorContains(t, err, "no interrupted reconcile", "nothing to resume")
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// seedExpiredTemporaries inserts n temporary files that expired an hour ago
// (by the database clock), without objects: deleting an absent object is
// done.
func seedExpiredTemporaries(t *testing.T, url string, n int) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `
INSERT INTO uploaded_file (id, tenant_code, user_id, key, cdn, original_name, size_bytes, content_type, is_temporary, status, completed_at, expired_at)
SELECT gen_random_uuid(), 'acme', 'u', 'core/t-x/' || i || '.pdf', 'urn:seed:' || i, 'r.pdf', 1, 'application/pdf', true, 'ready',
       now() - interval '25 hours', now() - interval '1 hour'
FROM generate_series(1, $1::integer) AS i`, n)
	require.NoError(t, err)
}

func TestMaintenanceCommands(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("localRoot: "+t.TempDir()+"\ncleanupBatchSize: 10\n"), 0o600))
	seedExpiredTemporaries(t, url, 25)
	ctx := context.Background()

	out, err := run(t, ctx, url, "maintenance", "--config", cfgFile, "cleanup-temporary")
	require.NoError(t, err)
	require.Equal(t, "cleanup-temporary: 10 rows done\n", out, "one batch")
	out, err = run(t, ctx, url, "maintenance", "--config", cfgFile, "run-track", "temporary")
	require.NoError(t, err)
	require.Equal(t, "run-track temporary: 15 examined, 15 done, 0 failed\n", out, "the track drains the rest")
	for _, cmd := range []string{"retry-deletions", "cleanup-pending", "cleanup-staging"} {
		out, err = run(t, ctx, url, "maintenance", "--config", cfgFile, cmd)
		require.NoError(t, err)
		require.Equal(t, cmd+": 0 rows done\n", out)
	}
	out, err = run(t, ctx, url, "maintenance", "--config", cfgFile, "purge-unused", "--before", "720h")
	require.NoError(t, err)
	require.Contains(t, out, "purge-unused: 0 rows done")

	_, err = run(t, ctx, url, "maintenance", "--config", cfgFile, "purge-unused")
	require.ErrorContains(t, err, "--before is required")
	_, err = run(t, ctx, url, "maintenance", "--config", cfgFile, "retire-tombstone", uuid.NewString())
	require.ErrorContains(t, err, "--confirm", "explains that producers must be stopped first")
	_, err = run(t, ctx, url, "maintenance", "--config", cfgFile, "retire-tombstone", uuid.NewString(), "--confirm")
	require.ErrorContains(t, err, "not an expired tombstone", "exits non-zero when nothing was retired")
	_, err = run(t, ctx, url, "maintenance", "--config", cfgFile, "run-track", "weekly")
	require.ErrorContains(t, err, "unknown track")
	_, err = run(t, ctx, "postgres://postgres@127.0.0.1:1/none?sslmode=disable&connect_timeout=2", "maintenance", "--config", cfgFile, "retry-deletions")
	require.Error(t, err, "a failure exits non-zero")
}

// buildBinary builds the uploadedfile binary once per test run.
var buildOnce = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "uploadedfile-bin-*")
	if err != nil {
		return "", err
	}
	keepBuilt(dir)
	bin := filepath.Join(dir, "uploadedfile")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build: %w: %s", err, out)
	}
	return bin, nil
})

// built holds the directories the build helpers made (a binary each, and
// the previous release's source): TestMain removes them after the run.
var built struct {
	sync.Mutex
	dirs []string
}

// keepBuilt records dir for removeBuilt.
func keepBuilt(dir string) {
	built.Lock()
	defer built.Unlock()
	built.dirs = append(built.dirs, dir)
}

// removeBuilt removes what the build helpers made.
func removeBuilt() {
	built.Lock()
	defer built.Unlock()
	for _, d := range built.dirs {
		_ = os.RemoveAll(d)
	}
}

// logLine is what the test reads of a serve process's JSON log.
type logLine struct {
	Time     time.Time `json:"time"`
	Msg      string    `json:"msg"`
	Track    string    `json:"track"`
	Done     int       `json:"done"`
	Duration string    `json:"duration"`
}

// TestTwoServeProcessesShareTracks: two serve processes on one database
// run the tracks every second; a track never runs in both at once, and
// together they process every row exactly once.
func TestTwoServeProcessesShareTracks(t *testing.T) {
	t.Parallel()
	bin, err := buildOnce()
	require.NoError(t, err)
	url := pgtest.NewDatabase(t)
	const rows = 2500
	seedExpiredTemporaries(t, url, rows)
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(fmt.Sprintf(
		"localRoot: %s\ntemporaryCleanupInterval: '@every 1s'\npendingCleanupInterval: '@every 1s'\nauth:\n  hmacSecret: %s\n",
		t.TempDir(), strings.Repeat("k", 40))), 0o600))

	var mu sync.Mutex
	var lines []struct {
		proc int
		l    logLine
	}
	var procs []*exec.Cmd
	for i := range 2 {
		cmd := exec.Command(bin, "--database-url", url, "serve", "--config", cfgFile, "--listen", "127.0.0.1:0")
		stderr, err := cmd.StderrPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		procs = append(procs, cmd)
		go func() {
			sc := bufio.NewScanner(stderr)
			for sc.Scan() {
				var l logLine
				if json.Unmarshal(sc.Bytes(), &l) == nil && strings.HasPrefix(l.Msg, "sweep") {
					mu.Lock()
					lines = append(lines, struct {
						proc int
						l    logLine
					}{i, l})
					mu.Unlock()
				}
			}
		}()
	}
	t.Cleanup(func() {
		for _, p := range procs {
			_ = p.Process.Kill()
			_ = p.Wait()
		}
	})

	done := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, x := range lines {
			if x.l.Msg == "sweep finished" && x.l.Track == "temporary" {
				n += x.l.Done
			}
		}
		return n
	}
	require.Eventually(t, func() bool { return done() >= rows }, 60*time.Second, 200*time.Millisecond)
	time.Sleep(1500 * time.Millisecond) // a last round of runs and skips
	require.Equal(t, rows, done(), "every row exactly once")

	type interval struct {
		proc       int
		start, end time.Time
	}
	var runs []interval
	procsThatRan := map[int]bool{}
	mu.Lock()
	for _, x := range lines {
		if x.l.Msg != "sweep finished" || x.l.Track != "temporary" {
			continue
		}
		d, err := time.ParseDuration(x.l.Duration)
		require.NoError(t, err)
		runs = append(runs, interval{x.proc, x.l.Time.Add(-d), x.l.Time})
		procsThatRan[x.proc] = true
	}
	mu.Unlock()
	sort.Slice(runs, func(i, j int) bool { return runs[i].start.Before(runs[j].start) })
	for i := 1; i < len(runs); i++ {
		require.False(t, runs[i].start.Before(runs[i-1].end.Add(-time.Millisecond)),
			"runs of the temporary track overlap: %+v and %+v", runs[i-1], runs[i])
	}
	t.Logf("%d runs of the temporary track across %d processes", len(runs), len(procsThatRan))
}

// TestReconcileCommand: findings one per line (text or JSON), the counts
// last; --repair deletes the orphan; a bad flag names itself.
func TestReconcileCommand(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	root := t.TempDir()
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("localRoot: "+root+"\n"), 0o600))
	orphan := filepath.Join(root, "core", "t-x", uuid.NewString()+".pdf")
	require.NoError(t, os.MkdirAll(filepath.Dir(orphan), 0o750))
	require.NoError(t, os.WriteFile(orphan, []byte("%PDF-1.4\n"), 0o600))
	rel, _ := filepath.Rel(root, orphan)
	ctx := context.Background()

	out, err := run(t, ctx, url, "maintenance", "--config", cfgFile, "reconcile")
	require.NoError(t, err)
	require.Contains(t, out, "reconcile: 1 objects, 0 references; 0 orphans", "younger than the default grace of 24h")

	out, err = run(t, ctx, url, "maintenance", "--config", cfgFile, "reconcile", "--grace", "0s", "--output", "json")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	var f map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &f))
	require.Equal(t, "orphan", f["kind"])
	require.Equal(t, filepath.ToSlash(rel), f["key"])
	require.JSONEq(t, `{"progress":{"command":"reconcile","done":1,"total":0}}`, dropRates(t, lines[1]), "the last progress object before the counts")
	var counts struct{ Counts map[string]float64 }
	require.NoError(t, json.Unmarshal([]byte(lines[2]), &counts))
	require.EqualValues(t, 1, counts.Counts["orphans"])

	_, err = run(t, ctx, url, "maintenance", "--config", cfgFile, "reconcile", "--grace", "0s", "--fail-on-findings")
	require.Error(t, err)
	require.Equal(t, exitFindings, exitCode(err), "a finding is an exit status of its own with --fail-on-findings")

	out, err = run(t, ctx, url, "maintenance", "--config", cfgFile, "reconcile", "--grace", "0s", "--repair", "--fail-on-findings")
	require.NoError(t, err, "the repaired orphan is no longer a finding")
	require.Contains(t, out, "orphan "+filepath.ToSlash(rel)+" size=9")
	require.Contains(t, out, " repaired ")
	require.NoFileExists(t, orphan)

	_, err = run(t, ctx, url, "maintenance", "--config", cfgFile, "reconcile", "--output", "yaml")
	require.ErrorContains(t, err, "--output")

	// A longer walk reports how far it is as it goes: objects listed,
	// counted every 1,000.
	for i := range 2500 {
		p := filepath.Join(root, "core", "t-many", fmt.Sprintf("%05d.pdf", i))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o750))
		require.NoError(t, os.WriteFile(p, []byte("%PDF-1.4\n"), 0o600))
	}
	out, err = run(t, ctx, url, "--output", "json", "--progress-every", "1ms", "maintenance", "--config", cfgFile, "reconcile")
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var p struct{ Progress *struct{ Done int } }
		require.NoError(t, json.Unmarshal([]byte(line), &p), line)
		if p.Progress != nil {
			seen[p.Progress.Done] = true
		}
	}
	require.True(t, seen[2500], "the last progress object counts every object: %v", seen)
	require.True(t, seen[1000] || seen[2000], "objects counted as the walk goes: %v", seen)
}

// TestQuotaCommands: set, get and list per-tenant limits; recount-usage.
func TestQuotaCommands(t *testing.T) {
	t.Parallel()
	url := pgtest.NewDatabase(t)
	ctx := context.Background()
	cfg := filepath.Join(t.TempDir(), "c.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("localRoot: "+t.TempDir()+"\nquota:\n  ownerFiles: 100\n"), 0o600))

	out, err := run(t, ctx, url, "quota", "set", "acme", "--config", cfg, "--tenant-files", "3", "--owner-bytes", "0")
	require.NoError(t, err)
	require.Regexp(t, `acme\s+0\s+0\s+unlimited \(default\)\s+3\s+unlimited\s+100 \(default\)`, out, "the limits in force: the override, else the configured default")

	out, err = run(t, ctx, url, "quota", "set", "acme", "--config", cfg, "--tenant-files", "default", "--owner-files", "7")
	require.NoError(t, err)
	require.Regexp(t, `acme\s+0\s+0\s+unlimited \(default\)\s+unlimited \(default\)\s+unlimited\s+7`, out, "default clears one override, the others stay")

	out, err = run(t, ctx, url, "quota", "get", "acme", "--config", cfg, "--output", "json")
	require.NoError(t, err)
	var q struct {
		Tenant                              string
		OwnerFiles, TenantFiles, OwnerBytes struct {
			Value  int64
			Source string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &q))
	require.Equal(t, "acme", q.Tenant)
	require.EqualValues(t, 7, q.OwnerFiles.Value)
	require.Equal(t, "override", q.OwnerFiles.Source)
	require.Equal(t, "default", q.TenantFiles.Source)

	_, err = run(t, ctx, url, "quota", "set", "acme", "--config", cfg, "--owner-files", "-5")
	require.ErrorContains(t, err, "--owner-files must be a number of at least 0, or default")

	out, err = run(t, ctx, url, "quota", "list", "--config", cfg)
	require.NoError(t, err)
	require.Contains(t, out, "acme")
	out, err = run(t, ctx, url, "quota", "get", "globex", "--config", cfg)
	require.NoError(t, err)
	require.NotContains(t, out, "acme")

	out, err = run(t, ctx, url, "maintenance", "--config", cfg, "recount-usage", "--tenant", "acme")
	require.NoError(t, err)
	require.Equal(t, "recount-usage: 1 tenants recounted, 0 usage rows written\n", out, "acme holds no file")
	out, err = run(t, ctx, url, "maintenance", "--config", cfg, "recount-usage", "--tenant", "acme", "-o", "json")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.JSONEq(t, `{"progress":{"command":"recount-usage","done":1,"total":1}}`, dropRates(t, lines[0]), "one progress object before the summary")
	require.JSONEq(t, `{"command":"recount-usage","tenants":1,"written":0,"last":"acme","interrupted":false}`, lines[len(lines)-1])
}

// dropRates is a progress object without its timing fields (rate, time
// left), which vary run to run.
func dropRates(t *testing.T, line string) string {
	t.Helper()
	var obj struct {
		Progress map[string]any `json:"progress"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &obj), line)
	delete(obj.Progress, "ratePerSecond")
	delete(obj.Progress, "remainingSeconds")
	b, err := json.Marshal(obj)
	require.NoError(t, err)
	return string(b)
}

package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db/migrations"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/service"
)

// TestUpgrade follows docs/operations.md's rollout with the previous
// release's binary: two of its replicas behind HAProxy (the documented
// configuration) under steady load from clients that never retry; the
// next release's `migrate up` while a long transaction makes the
// migration wait on a lock for ten seconds (its version dirty meanwhile); an
// old replica SIGKILLed under the load after the migration and started
// again on the new schema; the replicas rolled one by one (SIGTERM, then the new binary);
// and one rolled back to the old binary with no `migrate down`. Not one
// request fails, and after it every acknowledged upload is present once,
// no object is left without its row and usage equals the rows.
func TestUpgrade(t *testing.T) {
	t.Parallel()
	needHAProxy(t)
	prev, err := buildPrevious()
	require.NoError(t, err)
	next, err := buildOnce()
	require.NoError(t, err)
	f := &fleet{t: t, bin: prev, bins: map[int]string{}, dbURL: pgtest.NewEmptyDatabase(t), secret: []byte(strings.Repeat("u", 40)),
		size: 2, serveArgs: []string{"--shutdown-delay", "2s"}, oldBins: map[string]bool{}}
	if help, _ := exec.Command(prev, "serve", "--help").Output(); !bytes.Contains(help, []byte("--shutdown-delay")) {
		f.oldBins[prev] = true // a release from before the flag: stopped without the delay
	}
	out, err := exec.Command(prev, "--database-url", f.dbURL, "migrate", "up").CombinedOutput()
	require.NoError(t, err, "the previous release migrates its schema: %s", out)
	f.configure(service.DriverLocal)
	f.startBalancer()
	for i := range f.size {
		f.start(i)
	}
	f.routed()
	pool, err := pgxpool.New(context.Background(), f.dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	ledger := newFleetLedger()
	ledger.at("old replicas")
	stop := f.load(4, ledger)
	time.Sleep(2 * time.Second)

	// Migrate while a long transaction holds the table the migration
	// writes: it waits, dirty, and the old replicas stay ready.
	ledger.at("migration waiting")
	holder, err := pool.Begin(context.Background())
	require.NoError(t, err)
	_, err = holder.Exec(context.Background(), "LOCK TABLE uploaded_file_schema_compat IN ACCESS EXCLUSIVE MODE")
	require.NoError(t, err)
	migrated := make(chan error, 1)
	go func() {
		out, err := exec.Command(next, "--database-url", f.dbURL, "migrate", "up").CombinedOutput()
		if err != nil {
			err = fmt.Errorf("%w: %s", err, out)
		}
		migrated <- err
	}()
	require.Eventually(t, func() bool {
		var dirty bool
		return pool.QueryRow(context.Background(), "SELECT dirty FROM schema_migrations").Scan(&dirty) == nil && dirty
	}, 30*time.Second, 50*time.Millisecond, "the migration runs and waits on its lock")
	for range 20 { // ten seconds of waiting
		for i := range f.size {
			status, body := f.readyz(i)
			require.Equal(t, http.StatusOK, status, "replica %d while the migration waits: %s", i, body)
		}
		time.Sleep(500 * time.Millisecond)
	}
	require.NoError(t, holder.Rollback(context.Background()))
	require.NoError(t, <-migrated)
	for i := range f.size {
		status, body := f.readyz(i)
		require.Equal(t, http.StatusOK, status, "old replica %d on the new schema: %s", i, body)
	}

	// An old replica that dies after the migration, under load, comes
	// back on the new schema. What the kill cuts in flight the balancer
	// sends again to the other replica (docs/haproxy.cfg's retry-on: every
	// write carries its Idempotency-Key).
	ledger.at("old replica killed")
	f.kill(1)
	time.Sleep(time.Second)
	f.start(1)
	ledger.at("old replicas on the new schema")
	time.Sleep(time.Second)

	// Roll, one replica at a time.
	for i := range f.size {
		ledger.at(fmt.Sprintf("roll of replica %d", i))
		f.term(i)
		f.bins[i] = next
		f.start(i)
		time.Sleep(2 * time.Second)
	}
	// Roll one back: no migrate down.
	ledger.at("roll back")
	f.term(0)
	f.bins[0] = prev
	f.start(0)
	time.Sleep(2 * time.Second)

	stop()
	f.stopAll()
	if ledger.failed > 0 {
		t.Logf("failed calls: %v", ledger.failures)
		b, _ := os.ReadFile(f.lbLog)
		t.Logf("haproxy's checks:\n%s", lastLines(linesWithout(string(b), "Connect from"), 60))
		for _, l := range f.logs {
			b, _ := os.ReadFile(l)
			t.Logf("%s:\n%s", l, lastLines(linesWithout(string(b), `"sweep `), 15))
		}
	}
	f.check(pool, ledger, "upgrade", "migrate up waiting on a lock, a kill, a roll and a roll back")
	require.Zero(t, ledger.failed, "no request failed")
	require.Positive(t, ledger.direct+ledger.buffer, "uploads were acknowledged")
}

// readyz is replica i's /readyz status and body.
func (f *fleet) readyz(i int) (int, string) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", f.ports[i]))
	require.NoError(f.t, err)
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// term stops replica i with SIGTERM, as a rollout does, and waits for it.
func (f *fleet) term(i int) {
	f.mu.Lock()
	cmd := f.replicas[i]
	f.mu.Unlock()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
}

// buildPrevious builds the previous release's binary -- the commit before
// the one that added the newest migration -- from the repository's own
// history (git archive into a temporary directory), once per test run.
var buildPrevious = sync.OnceValues(func() (string, error) {
	names, err := filepath.Glob(fmt.Sprintf("../../db/migrations/%d_*.up.sql", migrations.Latest()))
	if err != nil || len(names) != 1 {
		return "", fmt.Errorf("the newest migration %d: %v", migrations.Latest(), names)
	}
	newest := names[0]
	added, err := exec.Command("git", "log", "--diff-filter=A", "--format=%H", "-1", "--", newest).Output()
	if err != nil || len(bytes.TrimSpace(added)) == 0 {
		return "", fmt.Errorf("find the commit that added %s (a clone with its history is needed): %w", newest, err)
	}
	commit := strings.TrimSpace(string(added)) + "^"
	dir, err := os.MkdirTemp("", "uploadedfile-previous-*")
	if err != nil {
		return "", err
	}
	keepBuilt(dir)
	archive := exec.Command("sh", "-c", fmt.Sprintf("git archive --format=tar %s | tar -x -C %s", commit, dir))
	archive.Dir = "../.."
	if out, err := archive.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %w: %s", commit, err, out)
	}
	bin := filepath.Join(dir, "uploadedfile-previous")
	build := exec.Command("go", "build", "-o", bin, "./cmd/uploadedfile")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the previous release (%s): %w: %s", commit, err, out)
	}
	return bin, nil
})

// linesWithout is s without its lines that hold drop.
func linesWithout(s, drop string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if !strings.Contains(line, drop) {
			b.WriteString(line)
		}
	}
	return b.String()
}

// lastLines is the last n lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

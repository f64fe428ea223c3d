package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// rescanStreams is the concurrency the rescan bench sets against one
// stream: clamd's MaxThreads in startClamd's configuration is 16.
const rescanStreams = 8

// benchRescan measures `maintenance rescan` over small ready files on the
// local driver at one clamd stream and at rescanStreams, rounds
// alternating: the ratio is what streams buy when clamd does the work (20k
// files; 100k with -full).
func benchRescan(ctx context.Context, rep *report, bin, tmp string, full bool) error {
	n := 20_000
	if full {
		n = 100_000
	}
	addr, stop, err := startClamd(tmp)
	if err != nil {
		return err
	}
	defer stop()
	dsn, drop, err := createDatabase(ctx, pgtest.ServerURL())
	if err != nil {
		return err
	}
	defer drop()
	if err := seedRows(ctx, dsn, n); err != nil {
		return err
	}
	root, err := os.MkdirTemp("", "uploadedfile-rescan-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(root) }()
	if err := putSmallObjects(ctx, root, n); err != nil {
		return err
	}
	cfg := filepath.Join(tmp, "rescan.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("localRoot: %s\nscan:\n  clamd: %s\n", root, addr)), 0o600); err != nil {
		return err
	}
	const rounds = 3
	var one, many []float64
	for range rounds {
		for _, streams := range []int{1, rescanStreams} {
			rate, err := runRescan(bin, dsn, cfg, n, streams)
			if err != nil {
				return fmt.Errorf("rescan at %d: %w", streams, err)
			}
			if streams == 1 {
				one = append(one, rate)
			} else {
				many = append(many, rate)
			}
		}
	}
	slices.Sort(one)
	slices.Sort(many)
	a, b := one[rounds/2], many[rounds/2]
	rep.add(fmt.Sprintf("rescan, local, %s small files: %d clamd streams vs 1 (medians of %d)", thousands(n), rescanStreams, rounds),
		fmt.Sprintf("%.2f× (%.0f vs %.0f files/s)", b/a, b, a), "", true)
	return nil
}

// runRescan runs the rescan as its own process and returns its files per
// second, checking that it scanned all n files and found nothing.
func runRescan(bin, dsn, cfg string, n, streams int) (float64, error) {
	cmd := exec.Command(bin, "--database-url", dsn, "--output", "json", "maintenance", "--config", cfg,
		"rescan", "--concurrency", fmt.Sprint(streams))
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("%w: %s", err, stderr.String())
	}
	elapsed := time.Since(start)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var sum struct{ Scanned, Detected, Unscanned int }
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &sum); err != nil {
		return 0, err
	}
	if sum.Scanned != n || sum.Detected != 0 || sum.Unscanned != 0 {
		return 0, fmt.Errorf("rescan found %+v, want %d scanned, none detected or without a verdict", sum, n)
	}
	return float64(n) / elapsed.Seconds(), nil
}

// putSmallObjects writes the object of each of the n seeded rows through
// the local driver (a rescan reads objects as the driver wrote them).
func putSmallObjects(ctx context.Context, root string, n int) error {
	st, err := local.New(local.Config{Root: root})
	if err != nil {
		return err
	}
	defer func() { _ = st.Close() }()
	for i := range n {
		body := []byte("id,name\n" + fmt.Sprint(i) + ",x\n")
		sum := sha256.Sum256(body)
		if _, err := st.Put(ctx, benchKey(i), bytes.NewReader(body), storage.PutOptions{Size: int64(len(body)), ContentType: "text/csv", SHA256: sum[:]}); err != nil {
			return err
		}
	}
	return nil
}

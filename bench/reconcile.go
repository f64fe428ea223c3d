package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
)

// Each reconcile target holds n objects and n rows, of which reconcilePlant
// rows have lost their object (missing) and reconcilePlant objects have no
// row (orphans); every directory (tenant namespace) holds filesPerDir
// objects, as a store with many tenants does.
const (
	reconcilePlant = 10
	filesPerDir    = 1000
)

// reconcileRun is one measured run of `uploadedfile maintenance reconcile`
// as its own process: objects per second and its peak RSS.
type reconcileRun struct {
	objects int64
	elapsed time.Duration
	maxRSS  int64
}

func (r reconcileRun) perObject() time.Duration { return r.elapsed / time.Duration(r.objects) }

// benchReconcile measures reconcile on the local driver at 100k and (full)
// 1M objects, and (full) on S3 at 100k.
func benchReconcile(ctx context.Context, rep *report, bin string, gw *s3test.Server, full bool) error {
	sizes := []int{100_000}
	if full {
		sizes = append(sizes, 1_000_000)
	}
	var runs []reconcileRun
	for _, n := range sizes {
		r, cost, err := reconcileLocal(ctx, bin, n)
		if err != nil {
			return fmt.Errorf("reconcile local %d: %w", n, err)
		}
		runs = append(runs, r)
		rep.add(fmt.Sprintf("reconcile, local, %s objects: throughput, peak RSS", thousands(n)),
			fmt.Sprintf("%.0f objects/s, %.0f MiB", float64(r.objects)/r.elapsed.Seconds(), float64(r.maxRSS)/(1<<20)), "", true)
		if n == sizes[0] {
			rep.add(fmt.Sprintf("reconcile, local, %s objects: objects/s lost to progress objects every 100 ms vs none (medians of %d)", thousands(n), progressRounds),
				fmt.Sprintf("%+.1f%% (%.0f vs %.0f objects/s)", cost.loss()*100, cost.with, cost.without), "≤ 2%", cost.loss() <= 0.02)
		}
	}
	if full {
		small, large := runs[0], runs[1]
		cost := float64(large.perObject()) / float64(small.perObject())
		rep.add("reconcile, local: cost per object at 1M vs 100k", fmt.Sprintf("%.2f× (%s vs %s)", cost, large.perObject(), small.perObject()), "≤ 1.2×", cost <= 1.2)
		rss := float64(large.maxRSS) / float64(small.maxRSS)
		rep.add("reconcile, local: peak RSS at 1M vs 100k", fmt.Sprintf("%.2f× (%.0f vs %.0f MiB)", rss, float64(large.maxRSS)/(1<<20), float64(small.maxRSS)/(1<<20)), "≤ 1.2×", rss <= 1.2)
		r, err := reconcileS3(ctx, bin, gw, 100_000)
		if err != nil {
			return fmt.Errorf("reconcile s3: %w", err)
		}
		rep.add("reconcile, S3 (versitygw), 100k objects: throughput, peak RSS",
			fmt.Sprintf("%.0f objects/s, %.0f MiB", float64(r.objects)/r.elapsed.Seconds(), float64(r.maxRSS)/(1<<20)), "", true)
	}
	return nil
}

func thousands(n int) string {
	if n >= 1_000_000 {
		return fmt.Sprintf("%dM", n/1_000_000)
	}
	return fmt.Sprintf("%dk", n/1000)
}

// seedRows inserts n ready rows whose keys are key(i), the first
// reconcilePlant without an object (the caller skips them).
func seedRows(ctx context.Context, dsn string, n int) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	_, err = pool.Exec(ctx, `
INSERT INTO uploaded_file (id, tenant_code, user_id, key, cdn, original_name, size_bytes, content_type, status, completed_at, created_at)
SELECT gen_random_uuid(), 'tenant-' || (i / $2), 'user', 'core/t-' || (i / $2) || '/' || i || '.csv', 'urn:bench:' || i, 'f.csv', 10, 'text/csv', 'ready',
       now() - interval '2 days', now() - interval '2 days'
FROM generate_series(0, $1::integer - 1) AS i`, n, filesPerDir)
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, "VACUUM ANALYZE uploaded_file")
	return err
}

func benchKey(i int) string { return fmt.Sprintf("core/t-%d/%d.csv", i/filesPerDir, i) }

// objectKeys are the keys the store holds: every row's but the first
// reconcilePlant, and reconcilePlant orphans.
func objectKeys(n int, each func(key string) error) error {
	for i := reconcilePlant; i < n; i++ {
		if err := each(benchKey(i)); err != nil {
			return err
		}
	}
	for i := range reconcilePlant {
		if err := each(fmt.Sprintf("core/t-orphan/%d.csv", i)); err != nil {
			return err
		}
	}
	return nil
}

// seededDatabase creates a database with n seeded rows; drop removes it.
func seededDatabase(ctx context.Context, n int) (dsn string, drop func(), err error) {
	dsn, drop, err = createDatabase(ctx, pgtest.ServerURL())
	if err != nil {
		return "", nil, err
	}
	if err := seedRows(ctx, dsn, n); err != nil {
		drop()
		return "", nil, err
	}
	return dsn, drop, nil
}

// progressRounds is how many runs with progress and without it the
// progress cost takes the median of, alternating.
const progressRounds = 7

// progressCost is a reconcile's throughput with progress objects and
// without (objects per second, medians).
type progressCost struct{ with, without float64 }

// loss is the share of the throughput without progress that progress
// costs (negative: it measured faster).
func (c progressCost) loss() float64 { return 1 - c.with/c.without }

// reconcileLocal measures reconcile over n objects on the local driver,
// and the cost of its progress objects on the same target.
func reconcileLocal(ctx context.Context, bin string, n int) (reconcileRun, progressCost, error) {
	dsn, drop, err := seededDatabase(ctx, n)
	if err != nil {
		return reconcileRun{}, progressCost{}, err
	}
	defer drop()
	root, err := os.MkdirTemp("", "uploadedfile-reconcile-*")
	if err != nil {
		return reconcileRun{}, progressCost{}, err
	}
	defer func() { _ = os.RemoveAll(root) }()
	body := []byte("0123456789")
	err = objectKeys(n, func(key string) error {
		p := filepath.Join(root, key)
		if err := os.WriteFile(p, body, 0o640); err == nil {
			return nil
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			return err
		}
		return os.WriteFile(p, body, 0o640)
	})
	if err != nil {
		return reconcileRun{}, progressCost{}, err
	}
	config := "localRoot: " + root + "\n"
	run, err := runReconcile(bin, dsn, config, n)
	if err != nil {
		return reconcileRun{}, progressCost{}, err
	}
	cost, err := reconcileProgressCost(bin, dsn, config, n)
	return run, cost, err
}

// reconcileProgressCost runs the same reconcile progressRounds times with
// a progress object every 100 ms (--output json) and as many times with
// none (text to a pipe shows no progress), alternating, and returns the
// median throughput of each. Nothing else differs: both walk, merge and
// keep their checkpoint alike.
func reconcileProgressCost(bin, dsn, config string, n int) (progressCost, error) {
	var with, without []float64
	for range progressRounds {
		for _, progress := range []bool{true, false} {
			args := []string{"--output", "text"}
			if progress {
				args = []string{"--output", "json", "--progress-every", "100ms"}
			}
			r, err := runReconcileWith(bin, dsn, config, n, args)
			if err != nil {
				return progressCost{}, err
			}
			rate := float64(r.objects) / r.elapsed.Seconds()
			if progress {
				with = append(with, rate)
			} else {
				without = append(without, rate)
			}
		}
	}
	slices.Sort(with)
	slices.Sort(without)
	return progressCost{with: with[len(with)/2], without: without[len(without)/2]}, nil
}

func reconcileS3(ctx context.Context, bin string, gw *s3test.Server, n int) (reconcileRun, error) {
	dsn, drop, err := seededDatabase(ctx, n)
	if err != nil {
		return reconcileRun{}, err
	}
	defer drop()
	bucket := "reconcile"
	client := gw.Client()
	if _, err := client.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: &bucket}); err != nil {
		return reconcileRun{}, err
	}
	if err := putObjects(ctx, client, bucket, "0123456789", func(each func(string) error) error { return objectKeys(n, each) }); err != nil {
		return reconcileRun{}, err
	}
	return runReconcile(bin, dsn, fmt.Sprintf("driver: s3\nbucket: %s\nendpoint: %s\nregion: us-east-1\nforcePathStyle: true\naccessId: %s\naccessKey: %s\n",
		bucket, gw.Endpoint, gw.AccessKey, gw.SecretKey), n)
}

// runReconcile runs the reconcile command as its own process and checks
// that it found exactly what was planted.
func runReconcile(bin, dsn, config string, n int) (reconcileRun, error) {
	return runReconcileWith(bin, dsn, config, n, []string{"--output", "json"})
}

// runReconcileWith is runReconcile with output flags: --output json reads
// the counts from the last JSON line, text from the summary line.
func runReconcileWith(bin, dsn, config string, n int, output []string) (reconcileRun, error) {
	cfg, err := os.CreateTemp("", "reconcile-*.yaml")
	if err != nil {
		return reconcileRun{}, err
	}
	defer func() { _ = os.Remove(cfg.Name()) }()
	if _, err := cfg.WriteString(config); err != nil {
		return reconcileRun{}, err
	}
	_ = cfg.Close()
	args := append([]string{"--database-url", dsn}, output...)
	cmd := exec.Command(bin, append(args, "maintenance", "--config", cfg.Name(), "reconcile", "--grace", "0s")...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return reconcileRun{}, err
	}
	peak := watchHWM(cmd.Process.Pid)
	err = cmd.Wait()
	rss := peak()
	if err != nil {
		return reconcileRun{}, fmt.Errorf("%w: %s", err, stderr.String())
	}
	elapsed := time.Since(start)
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	c, err := reconcileCounts(lines[len(lines)-1])
	if err != nil {
		return reconcileRun{}, err
	}
	if c.Objects != int64(n) || c.Orphans != reconcilePlant || c.Missing != reconcilePlant || c.Mismatches != 0 || c.StagingLeftovers != 0 {
		return reconcileRun{}, fmt.Errorf("reconcile found %+v, want %d objects, %d orphans, %d missing", c, n, reconcilePlant, reconcilePlant)
	}
	return reconcileRun{objects: c.Objects, elapsed: elapsed, maxRSS: rss}, nil
}

// reconcileFound is what a reconcile's summary line counts.
type reconcileFound struct{ Objects, References, Orphans, StagingLeftovers, Missing, Mismatches int64 }

// reconcileCounts reads the summary line: a JSON object with counts, or
// the text line "reconcile: N objects, N references; N orphans, ...".
func reconcileCounts(line string) (reconcileFound, error) {
	var c reconcileFound
	if strings.HasPrefix(line, "{") {
		var last struct{ Counts reconcileFound }
		err := json.Unmarshal([]byte(line), &last)
		return last.Counts, err
	}
	_, err := fmt.Sscanf(line, "reconcile: %d objects, %d references; %d orphans, %d staging leftovers, %d missing, %d mismatches",
		&c.Objects, &c.References, &c.Orphans, &c.StagingLeftovers, &c.Missing, &c.Mismatches)
	return c, err
}

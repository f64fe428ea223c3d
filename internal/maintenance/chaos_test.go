package maintenance_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/gen/db"
	"github.com/uploadedfile/uploadedfile/internal/maintenance"
	"github.com/uploadedfile/uploadedfile/internal/storage/storagefault"
	"github.com/uploadedfile/uploadedfile/service"
)

// chaosDuration is how long the chaos test runs its workers; `make chaos`
// sets it (`-chaos.duration=2m`), `make test` keeps it brief.
var chaosDuration = flag.Duration("chaos.duration", 4*time.Second, "how long TestChaos runs its workers")

// virtualSpeed: one real second is this much time for the services, so
// leases, expiries and backoffs all happen within a short run.
const virtualSpeed = 60

func virtualClock(start time.Time) func() time.Time {
	real0 := time.Now()
	return func() time.Time { return start.Add(time.Since(real0) * virtualSpeed) }
}

// chaosWorker is one worker process: random uploads, direct uploads,
// completes, deletes and aborts over a store that fails at random, until it
// is killed.
func chaosWorker() int {
	ctx := context.Background()
	pool, store, err := childDeps(ctx)
	if err != nil {
		return 2
	}
	seed, _ := strconv.ParseUint(os.Getenv("UF_SEED"), 10, 64)
	rnd := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	start, _ := time.Parse(time.RFC3339Nano, os.Getenv("UF_START"))
	svc, err := service.New(ctx, service.Config{LocalRoot: os.Getenv("UF_ROOT")}, pool,
		service.WithStore(store), service.WithClock(virtualClock(start)), service.WithLogger(quiet))
	if err != nil {
		return 2
	}
	ops := []storagefault.Op{storagefault.OpPut, storagefault.OpDelete, storagefault.OpStat, storagefault.OpOpen, storagefault.OpPromote}
	var ids []string
	for {
		if rnd.IntN(4) == 0 { // a storage failure on a random step of the next operations
			store.Reset()
			store.Inject(storagefault.Fault{Op: ops[rnd.IntN(len(ops))], Mode: storagefault.Mode(rnd.IntN(2)), Nth: 1 + rnd.IntN(2)})
		}
		uctx := service.WithRequestContext(ctx, service.RequestContext{Tenant: fmt.Sprintf("t%d", rnd.IntN(3)), UserID: "u"})
		body := []byte(fmt.Sprintf("row,%d\n%s\n", rnd.Int(), strings.Repeat("x", rnd.IntN(4000))))
		switch rnd.IntN(6) {
		case 0, 1:
			if r, err := svc.Upload(uctx, bytes.NewReader(body), "data.csv", nil); err == nil {
				ids = append(ids, r.ID.String())
			}
		case 2:
			_, _ = svc.UploadTemporary(uctx, bytes.NewReader(body), "tmp.csv", nil)
		case 3:
			sum := sha256.Sum256(body)
			init, err := svc.InitiateUpload(uctx, service.InitiateInput{OriginalName: "d.csv", ContentType: "text/csv", SizeBytes: int64(len(body)),
				Checksum: "sha256:" + base64.StdEncoding.EncodeToString(sum[:])}, nil)
			if err != nil {
				continue
			}
			if rnd.IntN(5) > 0 {
				_, _ = svc.PutUploadContent(uctx, init.ID.String(), bytes.NewReader(body))
			}
			switch rnd.IntN(4) {
			case 0:
				_ = svc.AbortUpload(uctx, init.ID.String())
			case 1: // left pending: the pending sweep's
			default:
				if r, err := svc.CompleteUpload(uctx, init.ID.String()); err == nil {
					ids = append(ids, r.ID.String())
				}
			}
		default:
			if len(ids) > 0 {
				i := rnd.IntN(len(ids))
				_ = svc.DeleteByID(service.WithRequestContext(ctx, service.RequestContext{Tenant: "t0", UserID: "u"}), ids[i])
				for _, tenant := range []string{"t1", "t2"} {
					_ = svc.DeleteByID(service.WithRequestContext(ctx, service.RequestContext{Tenant: tenant, UserID: "u"}), ids[i])
				}
				ids = append(ids[:i], ids[i+1:]...)
			}
		}
	}
}

// TestChaos runs worker processes with random storage failures, kills them
// at random moments, runs the maintenance tracks alongside, then settles
// everything and checks the invariants over the database and the storage.
func TestChaos(t *testing.T) {
	t.Parallel()
	e := setup(t)
	start := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	clock := virtualClock(start)
	svc, err := service.New(context.Background(), service.Config{LocalRoot: e.root}, e.pool,
		service.WithStore(e.inner), service.WithClock(clock), service.WithLogger(quiet))
	require.NoError(t, err)
	runner := maintenance.New(svc, e.pool, quiet, nil)
	runner.SetClock(clock)

	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	spawn := func(i int) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "UF_CHAOS_CHILD=1", "UF_DB="+e.url, "UF_ROOT="+e.root,
			"UF_SEED="+strconv.FormatUint(rnd.Uint64(), 10), "UF_START="+start.Format(time.RFC3339Nano))
		require.NoError(t, cmd.Start())
		return cmd
	}
	workers := []*exec.Cmd{spawn(0), spawn(1)}
	kills := 0
	deadline := time.Now().Add(*chaosDuration)
	for time.Now().Before(deadline) {
		time.Sleep(time.Duration(50+rnd.IntN(300)) * time.Millisecond)
		if rnd.IntN(3) == 0 { // kill a worker mid-operation and start another
			i := rnd.IntN(len(workers))
			_ = workers[i].Process.Signal(syscall.SIGKILL)
			_ = workers[i].Wait()
			kills++
			workers[i] = spawn(i)
		}
		track := maintenance.TrackPending
		if rnd.IntN(2) == 0 {
			track = maintenance.TrackTemporary
		}
		_, err := runner.Run(context.Background(), track)
		require.NoError(t, err)
	}
	for _, w := range workers {
		_ = w.Process.Signal(syscall.SIGKILL)
		_ = w.Wait()
	}

	// Settle: far past every lease, expiry and window, until a round does
	// nothing but reschedule tombstones.
	later := func(d time.Duration) func() time.Time { return func() time.Time { return clock().Add(d) } }
	for round := 1; round <= 30; round++ {
		s2, err := service.New(context.Background(), service.Config{LocalRoot: e.root}, e.pool,
			service.WithStore(e.inner), service.WithClock(later(time.Duration(round)*48*time.Hour)), service.WithLogger(quiet))
		require.NoError(t, err)
		r := maintenance.New(s2, e.pool, quiet, nil)
		r.SetClock(later(time.Duration(round) * 48 * time.Hour))
		p, err := r.Run(context.Background(), maintenance.TrackPending)
		require.NoError(t, err)
		tmp, err := r.Run(context.Background(), maintenance.TrackTemporary)
		require.NoError(t, err)
		if p.Examined+tmp.Examined == 0 || (round > 3 && p.Done == p.Examined && tmp.Examined == 0 && onlyTombstones(t, e.pool)) {
			break
		}
	}
	counts := checkChaosInvariants(t, e)
	t.Logf("chaos: %s of work, %d worker kills; checked %d rows (%d ready, %d deleted, %d tombstones, %d other) and %d objects: 0 violations",
		*chaosDuration, kills, counts.rows, counts.ready, counts.deleted, counts.tombstones, counts.other, counts.objects)
	require.Positive(t, counts.rows, "the workers did work")
}

// onlyTombstones reports whether every unsettled row is an upload
// tombstone (rescheduled forever until an operator retires it).
func onlyTombstones(t *testing.T, pool *pgxpool.Pool) bool {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM uploaded_file WHERE (deletion_pending_at IS NOT NULL OR upload_pending_at IS NOT NULL) AND NOT (upload_pending_at IS NOT NULL AND upload_expires_at IS NULL)`).Scan(&n))
	return n == 0
}

type chaosCounts struct{ rows, ready, deleted, tombstones, other, objects int }

// checkChaosInvariants: no visible row without its object, whose bytes match
// its checksum (a final key written once, with the declared bytes); no
// object without a row that still owns it; no object left for a deleted row.
func checkChaosInvariants(t *testing.T, e *env) chaosCounts {
	t.Helper()
	ctx := context.Background()
	rows, err := e.pool.Query(ctx, "SELECT * FROM uploaded_file")
	require.NoError(t, err)
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[db.UploadedFile])
	require.NoError(t, err)
	var c chaosCounts
	owned := map[string]bool{}
	for _, r := range all {
		c.rows++
		visible := r.Status == "ready" && r.UploadPendingAt == nil && r.DeletionPendingAt == nil && r.DeletedAt == nil
		tombstone := r.UploadPendingAt != nil && r.UploadExpiresAt == nil && r.DeletedAt != nil
		switch {
		case visible:
			c.ready++
			oi, err := e.inner.Stat(ctx, r.Key)
			require.NoError(t, err, "visible row %s has no object", r.ID)
			require.Equal(t, *r.Checksum, "sha256:"+base64.StdEncoding.EncodeToString(oi.SHA256), "row %s: its object holds other bytes", r.ID)
			owned[r.Key] = true
		case tombstone:
			c.tombstones++
			owned[r.Key] = true // may still receive a late write; the sweeps keep deleting it
		case r.DeletedAt != nil && r.DeletionPendingAt == nil:
			c.deleted++
		default:
			c.other++
			owned[r.Key] = true
			if r.PendingKey != nil {
				owned[*r.PendingKey] = true
			}
		}
		if visible && r.PendingKey != nil {
			owned[*r.PendingKey] = true // S3-style retained staging; never on local
		}
	}
	require.NoError(t, filepath.WalkDir(e.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(e.root, p)
		c.objects++
		if strings.Contains(filepath.Base(rel), ".uploadedfile-tmp-") {
			return errors.New("a temporary write file was left behind: " + rel)
		}
		require.True(t, owned[filepath.ToSlash(rel)], "object %s has no row or pending claim", rel)
		return nil
	}))
	require.Zero(t, c.other, "everything settled: no claim or in-flight row is left but tombstones")
	return c
}

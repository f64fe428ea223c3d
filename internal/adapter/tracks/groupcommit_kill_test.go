package tracks_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/adapter/tracks"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
	"github.com/uploadedfile/uploadedfile/service"
)

// batchChild is a process that uploads until it is killed: a leader in
// tenant ta first, and, once the leader's statement waits on a lock (so
// the committer is busy), three members in ta and one in tb, which queue
// for one batch. It prints "queued" when it has started them.
func batchChild() int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("UF_DB"))
	if err != nil {
		return 2
	}
	store, err := local.New(local.Config{Root: os.Getenv("UF_ROOT")})
	if err != nil {
		return 2
	}
	svc, err := service.New(ctx, service.Config{LocalRoot: os.Getenv("UF_ROOT")}, pool, service.WithStore(store), service.WithLogger(quiet))
	if err != nil {
		return 2
	}
	upload := func(tenant, name string) {
		uctx := service.WithRequestContext(ctx, service.RequestContext{Tenant: tenant, UserID: "u"})
		_, _ = svc.Upload(uctx, strings.NewReader("row,"+name+"\n"), name+".csv", nil)
	}
	go upload("ta", "leader")
	for !waitsOnLock(ctx, pool, "-- name: File%") {
		time.Sleep(5 * time.Millisecond)
	}
	for i := range 3 {
		go upload("ta", fmt.Sprintf("member-%d", i))
	}
	go upload("tb", "member-b")
	time.Sleep(200 * time.Millisecond) // for the goroutines to queue
	fmt.Println("queued")
	select {} // until killed
}

// sessions counts the other sessions of the database that run a
// statement like pattern and match where (a condition on pg_stat_activity,
// $2 its argument); a failed read counts as -1.
func sessions(ctx context.Context, pool *pgxpool.Pool, pattern, where string, arg any) int {
	n := -1
	_ = pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE $1 AND (`+where+`)`, pattern, arg).Scan(&n)
	return n
}

// waitsOnLock reports whether a session runs a statement like pattern and
// waits for a lock.
func waitsOnLock(ctx context.Context, pool *pgxpool.Pool, pattern string) bool {
	return sessions(ctx, pool, pattern, "wait_event_type = $2", "Lock") > 0
}

// blockedBy reports whether a session runs a statement like pattern and
// waits for a lock the session of pid holds.
func blockedBy(ctx context.Context, pool *pgxpool.Pool, pattern string, pid int) bool {
	return sessions(ctx, pool, pattern, "$2::int = ANY (pg_blocking_pids(pid))", pid) > 0
}

// running reports whether a session is inside a statement like pattern
// (or its transaction).
func running(ctx context.Context, pool *pgxpool.Pool, pattern string) bool {
	return sessions(ctx, pool, pattern, "state <> $2", "idle") != 0
}

// holdTx runs sql in a transaction of its own, held until release; pid is
// its session's.
func holdTx(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) (release func(), pid int) {
	t.Helper()
	tx, err := pool.Begin(context.Background())
	require.NoError(t, err)
	_, err = tx.Exec(context.Background(), sql, args...)
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(context.Background(), "SELECT pg_backend_pid()").Scan(&pid))
	done := false
	release = func() {
		if !done {
			done = true
			require.NoError(t, tx.Rollback(context.Background()))
		}
	}
	t.Cleanup(release)
	return release, pid
}

// TestKilledMidBatch: a process killed while a batch of buffer uploads'
// statements is inside PostgreSQL -- past some members' writes (the
// inserts of ta's three, or, when the activations are held, every member's
// object), waiting on a lock for the next -- leaves nothing the sweeps do not settle: once
// they have run, every object has a visible row, no upload is left
// pending, and the usage equals the rows'.
func TestKilledMidBatch(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"insert", "activate"} {
		t.Run(step, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			ctx := context.Background()
			var releaseFirst, releaseSecond func()
			var second int // the session the batch must end up waiting for
			if step == "insert" {
				// The leader's insert waits on ta's usage row; the batch,
				// once the leader is through, inserts ta's three and waits
				// on tb's.
				_, err := e.pool.Exec(ctx, "INSERT INTO uploaded_file_usage (tenant_code, user_id, bytes, files) VALUES ('ta', '', 0, 0), ('tb', '', 0, 0)")
				require.NoError(t, err)
				releaseFirst, _ = holdTx(t, e.pool, "SELECT FROM uploaded_file_usage WHERE tenant_code = 'ta' FOR UPDATE")
				releaseSecond, second = holdTx(t, e.pool, "SELECT FROM uploaded_file_usage WHERE tenant_code = 'tb' FOR UPDATE")
			} else {
				// The leader's activation waits on the event table.
				releaseFirst, _ = holdTx(t, e.pool, "LOCK TABLE uploaded_file_event IN EXCLUSIVE MODE")
			}
			child := exec.Command(os.Args[0], "-test.run=^$")
			child.Env = append(os.Environ(), "UF_BATCH_CHILD=1", "UF_DB="+e.url, "UF_ROOT="+e.root)
			out, err := child.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, child.Start())
			t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
			line, err := bufio.NewReader(out).ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, "queued\n", line)

			pattern := "-- name: FileInsertHidden%"
			if step == "activate" {
				// Every member has written its object and waits for its
				// activation; their rows are locked so that the batch waits
				// inside PostgreSQL once the leader is through.
				require.Eventually(t, func() bool { return e.objects() == 5 }, 10*time.Second, 5*time.Millisecond)
				releaseSecond, second = holdTx(t, e.pool, "SELECT FROM uploaded_file WHERE original_name LIKE 'member-%' FOR UPDATE")
				pattern = "-- name: FileActivateUpload%"
			}
			releaseFirst()
			require.Eventually(t, func() bool { return blockedBy(ctx, e.pool, pattern, second) }, 10*time.Second, 5*time.Millisecond,
				"the batch is inside PostgreSQL, past its first members, waiting")
			require.NoError(t, child.Process.Signal(syscall.SIGKILL))
			_ = child.Wait()
			releaseSecond()
			// The killed process's batch may still commit (PostgreSQL had
			// all of it, its end included): the sweeps come after.
			require.Eventually(t, func() bool { return !running(ctx, e.pool, "-- name: File%") }, 10*time.Second, 5*time.Millisecond)

			settleAfterKill(t, e)
			checkSettledUploads(t, e)
		})
	}
}

// settleAfterKill runs the pending track far past every lease until it
// has nothing left but tombstones to reschedule.
func settleAfterKill(t *testing.T, e *env) {
	t.Helper()
	for round := 1; round <= 10; round++ {
		later := func() time.Time { return time.Now().Add(time.Duration(round) * 48 * time.Hour) }
		svc, err := service.New(context.Background(), service.Config{LocalRoot: e.root}, e.pool, service.WithStore(e.inner), service.WithClock(later), service.WithLogger(quiet))
		require.NoError(t, err)
		r := tracks.New(svc, e.pool, tracks.Options{Logger: quiet})
		r.SetClock(later)
		res, err := r.Run(context.Background(), tracks.TrackPending)
		require.NoError(t, err)
		if res.Examined == 0 || round > 3 && res.Done == res.Examined && onlyTombstones(t, e.pool) {
			return
		}
	}
	t.Fatal("the pending track did not settle")
}

// checkSettledUploads: no upload is pending, every object belongs to a
// visible row and every visible row has its object, and the usage is the
// rows'.
func checkSettledUploads(t *testing.T, e *env) {
	t.Helper()
	ctx := context.Background()
	var pending int
	require.NoError(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM uploaded_file WHERE status = 'pending' AND deleted_at IS NULL").Scan(&pending))
	require.Zero(t, pending, "no upload left pending")
	rows, err := e.pool.Query(ctx, "SELECT key FROM uploaded_file WHERE status = 'ready' AND deleted_at IS NULL AND deletion_pending_at IS NULL")
	require.NoError(t, err)
	visible, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.ElementsMatch(t, visible, localKeys(t, e.root), "the objects are exactly the visible rows'")
	var wrong int
	require.NoError(t, e.pool.QueryRow(ctx, `
SELECT count(*) FROM uploaded_file_usage u
FULL JOIN (
    SELECT tenant_code, user_id, sum(size_bytes) AS bytes, count(*) AS files FROM uploaded_file
    WHERE deletion_pending_at IS NULL AND deleted_at IS NULL GROUP BY tenant_code, user_id
    UNION ALL
    SELECT tenant_code, '', sum(size_bytes), count(*) FROM uploaded_file
    WHERE deletion_pending_at IS NULL AND deleted_at IS NULL GROUP BY tenant_code
) AS r USING (tenant_code, user_id)
WHERE coalesce(u.bytes, 0) <> coalesce(r.bytes, 0) OR coalesce(u.files, 0) <> coalesce(r.files, 0)`).Scan(&wrong))
	require.Zero(t, wrong, "the usage is the rows'")
}

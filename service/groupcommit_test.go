package service_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

// hold runs sql (a lock) in a transaction of its own and keeps it until
// the returned release is called (or the test ends).
func (b *bundle) hold(sql string, args ...any) (release func()) {
	b.t.Helper()
	tx, err := b.db.Pool.Begin(context.Background())
	require.NoError(b.t, err)
	_, err = tx.Exec(context.Background(), sql, args...)
	require.NoError(b.t, err)
	released := false
	release = func() {
		if !released {
			released = true
			require.NoError(b.t, tx.Rollback(context.Background()))
		}
	}
	b.t.Cleanup(release)
	return release
}

// holdInserts makes every buffer upload's insert in tenant wait: it locks
// the tenant's usage row, which each reservation locks first.
func (b *bundle) holdInserts(tenant string) (release func()) {
	return b.hold("SELECT FROM uploaded_file_usage WHERE tenant_code = $1 AND user_id = '' FOR UPDATE", tenant)
}

// holdActivations makes every activation wait: each writes its file.ready
// event (the hidden insert writes none).
func (b *bundle) holdActivations() (release func()) {
	return b.hold("LOCK TABLE uploaded_file_event IN EXCLUSIVE MODE")
}

// uploaded is one upload's outcome in a group-commit test.
type uploaded struct {
	body string
	r    *service.Result
	err  error
}

// startUpload starts a buffer upload of body, named after it, as ctx's user.
func (b *bundle) startUpload(ctx context.Context, body string) chan uploaded {
	ch := make(chan uploaded, 1)
	go func() {
		r, err := b.svc.Upload(ctx, strings.NewReader(body), body+".csv", nil)
		ch <- uploaded{body, r, err}
	}()
	return ch
}

// sharedTransactions is how many distinct transactions wrote the rows sql
// selects (their xmin), and how many rows there are.
func (b *bundle) sharedTransactions(sql string, args ...any) (txs, rows int) {
	b.t.Helper()
	require.NoError(b.t, b.db.Pool.QueryRow(context.Background(),
		"SELECT count(DISTINCT xmin::text), count(*) FROM ("+sql+") AS r", args...).Scan(&txs, &rows))
	return txs, rows
}

// TestConcurrentUploadsShareTransactions: uploads that arrive while
// another's statement is in flight have their inserts committed in one
// transaction, and their activations in one more; each gets its own row,
// with its own name, checksum and object, and the usage is exact.
func TestConcurrentUploadsShareTransactions(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	zeta := as("zeta", "zoe")
	b.upload(alice) // the tenants' usage rows exist
	b.upload(zeta)
	before := b.rowCount()

	// The leader (acme) runs each statement alone and waits; the members
	// (zeta) queue behind it, and their batch waits in its turn until the
	// leader's activation is the one in flight.
	releaseLeader := b.holdInserts("acme")
	releaseMembers := b.holdInserts("zeta")
	releaseActivations := b.holdActivations()
	leader := b.startUpload(alice, "leader")
	require.Eventually(t, func() bool { return b.waiting("-- name: FileInsertHidden %") == 1 }, 10*time.Second, 5*time.Millisecond,
		"the leader's insert runs alone and waits")
	const n = 8
	var waiting []chan uploaded
	for i := range n {
		waiting = append(waiting, b.startUpload(zeta, fmt.Sprintf("member-%d", i)))
	}
	require.Eventually(t, func() bool { return b.svc.QueuedInserts() == n }, 10*time.Second, 5*time.Millisecond)
	releaseLeader()
	require.Eventually(t, func() bool { return b.waiting("-- name: FileActivateUpload %") == 1 }, 10*time.Second, 5*time.Millisecond,
		"the leader's activation runs alone and waits")
	releaseMembers()
	require.Eventually(t, func() bool { return b.svc.QueuedActivations() == n }, 10*time.Second, 5*time.Millisecond,
		"the members were inserted, wrote their bytes and queue for their activation behind the leader's")
	txs, rows := b.sharedTransactions("SELECT xmin FROM uploaded_file WHERE status = 'pending' AND original_name LIKE 'member-%'")
	require.Equal(t, n, rows)
	require.Equal(t, 1, txs, "the members' inserts committed in one transaction")

	releaseActivations()
	for _, ch := range append(waiting, leader) {
		u := <-ch
		require.NoError(t, u.err, u.body)
		require.Equal(t, u.body+".csv", u.r.OriginalName, "each member gets its own row")
		require.Equal(t, service.StatusReady, u.r.Status)
		sum := sha256.Sum256([]byte(u.body))
		require.Equal(t, "sha256:"+base64.StdEncoding.EncodeToString(sum[:]), *b.row(u.r.ID).Checksum)
		require.Equal(t, u.body, b.readObject(u.r.Key), "and its own object")
	}
	txs, rows = b.sharedTransactions(`SELECT e.xmin FROM uploaded_file_event e JOIN uploaded_file f ON f.id = e.file_id
		WHERE e.type = 'file.ready' AND f.original_name LIKE 'member-%'`)
	require.Equal(t, n, rows)
	require.Equal(t, 1, txs, "the members' activations committed in one transaction")
	require.Equal(t, before+n+1, b.rowCount())
	for _, tenant := range []string{"acme", "zeta"} {
		bytes, files := b.usageOf(tenant, "")
		wantBytes, wantFiles := b.rowsHolding(tenant, "")
		require.Equal(t, [2]int64{wantBytes, wantFiles}, [2]int64{bytes, files}, tenant)
	}
	b.checkInvariants()
}

// waiting is how many sessions run a statement like pattern and wait for
// a lock.
func (b *bundle) waiting(pattern string) int {
	b.t.Helper()
	var n int
	require.NoError(b.t, b.db.Pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE $1`, pattern).Scan(&n))
	return n
}

// TestAQuotaRefusalInABatchFailsOnlyItsMember: a batch whose one member
// passes the owner's file quota aborts as a whole; its members run again
// alone, so exactly the ones that fit succeed.
func TestAQuotaRefusalInABatchFailsOnlyItsMember(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	b := setupWith(t, service.DriverLocal, []service.Option{service.WithMetrics(reg)}, quota(service.QuotaConfig{OwnerFiles: 4}))
	b.upload(alice) // 1 of 4
	releaseInserts := b.holdInserts("acme")
	leader := b.startUpload(alice, "leader") // 2 of 4
	require.Eventually(t, b.waitsOnLock, 10*time.Second, 5*time.Millisecond)
	var waiting []chan uploaded
	for i := range 3 { // two fit
		waiting = append(waiting, b.startUpload(alice, fmt.Sprintf("member-%d", i)))
	}
	require.Eventually(t, func() bool { return b.svc.QueuedInserts() == 3 }, 10*time.Second, 5*time.Millisecond)
	releaseInserts()

	require.NoError(t, (<-leader).err)
	ok, refused := 0, 0
	for _, ch := range waiting {
		u := <-ch
		switch {
		case u.err == nil:
			ok++
		case service.Rule(u.err) == service.RuleQuotaOwnerFiles:
			require.ErrorIs(t, u.err, service.ErrQuotaExceeded)
			refused++
		default:
			t.Fatalf("%s: %v", u.body, u.err)
		}
	}
	require.Equal(t, [2]int{2, 1}, [2]int{ok, refused}, "the members that fit were not failed by the one that did not")
	bytes, files := b.usageOf("acme", "alice")
	wantBytes, wantFiles := b.rowsHolding("acme", "alice")
	require.Equal(t, [2]int64{wantBytes, wantFiles}, [2]int64{bytes, files})
	require.EqualValues(t, 4, files)
	b.checkInvariants()

	// The metrics: one failed batch of three inserts; transactions of one
	// statement for the first upload, the leader and the three run alone
	// again (and the activations).
	require.InDelta(t, 1, metric(t, reg, "uploadedfile_group_commit_failed_total", "FileInsertHidden").GetCounter().GetValue(), 0)
	h := metric(t, reg, "uploadedfile_group_commit_statements", "FileInsertHidden").GetHistogram()
	require.EqualValues(t, 6, h.GetSampleCount(), "1 + 1 + a batch of 3 + 3 alone")
	require.InDelta(t, 8, h.GetSampleSum(), 0)
}

// metric finds name's series for statement in reg.
func metric(t *testing.T, reg *prometheus.Registry, name, statement string) *dto.Metric {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() == statement {
				return m
			}
		}
	}
	t.Fatalf("no %s{statement=%q}", name, statement)
	return nil
}

// TestAnUploadCancelledWhileQueuedLeavesNothing: an upload whose context
// ends while it waits for a batch returns, writes no row and no object;
// the batch goes on without it.
func TestAnUploadCancelledWhileQueuedLeavesNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	b.upload(alice)
	releaseInserts := b.holdInserts("acme")
	leader := b.startUpload(alice, "leader")
	require.Eventually(t, b.waitsOnLock, 10*time.Second, 5*time.Millisecond)
	stays := b.startUpload(alice, "stays")
	require.Eventually(t, func() bool { return b.svc.QueuedInserts() == 1 }, 10*time.Second, 5*time.Millisecond)
	ctx, cancel := context.WithCancel(alice)
	gone := b.startUpload(ctx, "gone")
	require.Eventually(t, func() bool { return b.svc.QueuedInserts() == 2 }, 10*time.Second, 5*time.Millisecond)
	cancel()
	require.Error(t, (<-gone).err)
	require.Equal(t, 1, b.svc.QueuedInserts(), "it left the queue")
	releaseInserts()
	require.NoError(t, (<-leader).err)
	require.NoError(t, (<-stays).err)

	var names []string
	rows, err := b.db.Pool.Query(context.Background(), "SELECT original_name FROM uploaded_file ORDER BY original_name")
	require.NoError(t, err)
	names, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"leader.csv", "report.pdf", "stays.csv"}, names)
	require.Len(t, b.objects(), 3, "no object for the upload that left")
	b.checkInvariants()
}

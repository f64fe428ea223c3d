package service_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/adapter/tracks"
	"github.com/uploadedfile/uploadedfile/service"
)

func quota(q service.QuotaConfig) func(*service.Config) {
	return func(c *service.Config) { c.Quota = q }
}

// usageOf reads the usage the transitions kept for (tenant, user); user ""
// is the tenant's total.
func (b *bundle) usageOf(tenant, user string) (bytes, files int64) {
	b.t.Helper()
	err := b.db.Pool.QueryRow(context.Background(),
		"SELECT coalesce(sum(bytes), 0), coalesce(sum(files), 0) FROM uploaded_file_usage WHERE tenant_code = $1 AND user_id = $2", tenant, user).Scan(&bytes, &files)
	require.NoError(b.t, err)
	return bytes, files
}

// rowsHolding is the usage recomputed from the rows: what usageOf must be.
func (b *bundle) rowsHolding(tenant, user string) (bytes, files int64) {
	b.t.Helper()
	err := b.db.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(size_bytes), 0), count(*) FROM uploaded_file
		WHERE tenant_code = $1 AND ($2 = '' OR user_id = $2) AND deletion_pending_at IS NULL AND deleted_at IS NULL`, tenant, user).Scan(&bytes, &files)
	require.NoError(b.t, err)
	return bytes, files
}

// TestQuotaRaceBufferUploads: 32 concurrent buffer uploads against an owner
// quota that fits exactly 10: exactly 10 succeed; the others are
// quota-exceeded (rule quota.owner-files), wrote nothing to storage and
// left nothing reserved.
func TestQuotaRaceBufferUploads(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, quota(service.QuotaConfig{OwnerFiles: 10}))
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := b.svc.Upload(alice, strings.NewReader(fmt.Sprintf("row %d\n", i)), "rows.csv", nil)
			switch {
			case err == nil:
				ok.Add(1)
			case service.Rule(err) == service.RuleQuotaOwnerFiles:
				require.ErrorIs(t, err, service.ErrQuotaExceeded)
				refused.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 10, ok.Load())
	require.EqualValues(t, 22, refused.Load())
	require.Equal(t, 10, b.rowCount(), "a refused upload left no row")
	require.Len(t, b.objects(), 10, "and no object")
	_, files := b.usageOf("acme", "alice")
	require.EqualValues(t, 10, files, "nothing left reserved")
	ub, uf := b.usageOf("acme", "alice")
	rb, rf := b.rowsHolding("acme", "alice")
	require.Equal(t, [2]int64{rb, rf}, [2]int64{ub, uf})
}

// TestQuotaRaceDirectUploads: the same with direct uploads against a byte
// quota for the tenant: the reservation is taken at initiate.
func TestQuotaRaceDirectUploads(t *testing.T) {
	t.Parallel()
	body := realDOCX(t)
	b := setup(t, service.DriverLocal, quota(service.QuotaConfig{TenantBytes: int64(10 * len(body))}))
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			who := as("acme", fmt.Sprintf("user-%d", i%4), "sales")
			_, err := b.svc.InitiateUpload(who, input("plan.docx", docxType, body), nil)
			switch {
			case err == nil:
				ok.Add(1)
			case service.Rule(err) == service.RuleQuotaTenantBytes:
				refused.Add(1)
			default:
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 10, ok.Load())
	require.EqualValues(t, 22, refused.Load())
	bytes, files := b.usageOf("acme", "")
	require.EqualValues(t, 10*len(body), bytes)
	require.EqualValues(t, 10, files)
	require.Empty(t, b.objects(), "nothing is written before the client writes")

	// Abandoned by their clients: the pending sweep gives the space back.
	b.settle()
	bytes, files = b.usageOf("acme", "")
	require.Zero(t, bytes)
	require.Zero(t, files)
}

// TestQuotaCrashedWriterIsReleasedBySweeps: a buffer upload whose writer
// died after its reservation (the hidden row inserted, never activated)
// holds its space until the sweeps reclaim the row, then gives it back.
func TestQuotaCrashedWriterIsReleasedBySweeps(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, quota(service.QuotaConfig{OwnerFiles: 1}))
	// The insert the service makes, and then nothing: the writer is gone.
	_, err := service.InsertHidden(context.Background(), b.db.Pool, db.FileInsertHiddenParams{
		ID: uuidOf(t, "6f1c2b9e-3d4a-4b5c-8d7e-9f0a1b2c3d4e"), TenantCode: "acme", UserID: "alice", Key: "core/acme/crashed.csv",
		OriginalName: "crashed.csv", SizeBytes: 100, ContentType: "text/csv", Visibility: "private", Disposition: "attachment",
		ExtraData: []byte(`{}`), ActivationLease: service.ActivationLease, DefaultOwnerFiles: 1, Now: ptrTime(b.clock.Now()),
	})
	require.NoError(t, err)
	_, err = b.svc.Upload(alice, strings.NewReader("a,b\n"), "rows.csv", nil)
	require.ErrorIs(t, err, service.ErrQuotaExceeded, "the crashed upload still holds the only file")
	b.settle()
	_, files := b.usageOf("acme", "alice")
	require.Zero(t, files, "the sweeps gave it back")
	_, err = b.svc.Upload(alice, strings.NewReader("a,b\n"), "rows.csv", nil)
	require.NoError(t, err)
}

func ptrTime(t time.Time) *time.Time { return &t }

// TestQuotaDeleteFreesAtOnce: a deletion gives the space back in the
// statement that accepts it, before its bytes are gone.
func TestQuotaDeleteFreesAtOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, quota(service.QuotaConfig{OwnerBytes: int64(len(pdf))}))
	f := b.upload(alice)
	_, err := b.svc.Upload(alice, strings.NewReader(pdf), "again.pdf", nil)
	require.ErrorIs(t, err, service.ErrQuotaExceeded)
	require.Equal(t, service.RuleQuotaOwnerBytes, service.Rule(err))
	require.Equal(t, "core.file.quota-exceeded", err.Error())

	require.NoError(t, b.svc.DeleteByID(alice, f.ID.String()))
	_, err = b.svc.Upload(alice, strings.NewReader(pdf), "again.pdf", nil)
	require.NoError(t, err, "the deletion freed the space at once")

	// Another owner of the tenant has a quota of their own.
	_, err = b.svc.Upload(as("acme", "bob", "sales"), strings.NewReader(pdf), "bob.pdf", nil)
	require.NoError(t, err)
}

// TestQuotaOverridesAndUsage: a tenant's override wins over the default;
// -1 clears it; Usage shows the caller's and the tenant's usage and
// limits, nobody else's.
func TestQuotaOverridesAndUsage(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal, quota(service.QuotaConfig{TenantFiles: 1}))
	b.upload(alice)
	_, err := b.svc.Upload(as("acme", "bob", "sales"), strings.NewReader(pdf), "b.pdf", nil)
	require.Equal(t, service.RuleQuotaTenantFiles, service.Rule(err))

	three := int64(3)
	require.NoError(t, b.svc.UnsafeSystemSetQuota(context.Background(), "acme", service.QuotaOverride{TenantFiles: &three}))
	_, err = b.svc.Upload(as("acme", "bob", "sales"), strings.NewReader(pdf), "b.pdf", nil)
	require.NoError(t, err, "the override lifted the limit")
	b.upload(as("globex", "mallory"))

	u, err := b.svc.Usage(alice)
	require.NoError(t, err)
	require.Equal(t, service.UsageOf{Bytes: int64(len(pdf)), Files: 1}, u.Owner)
	require.Equal(t, service.UsageOf{Bytes: int64(2 * len(pdf)), Files: 2, FilesLimit: 3}, u.Tenant, "globex's file is not in it")

	clear := int64(-1)
	require.NoError(t, b.svc.UnsafeSystemSetQuota(context.Background(), "acme", service.QuotaOverride{TenantFiles: &clear}))
	u, err = b.svc.Usage(alice)
	require.NoError(t, err)
	require.EqualValues(t, 1, u.Tenant.FilesLimit, "back to the configured default")

	list, err := b.svc.UnsafeSystemQuotas(context.Background(), "", 100)
	require.NoError(t, err)
	require.Len(t, list, 2)
	require.Equal(t, "acme", list[0].Tenant)
	require.EqualValues(t, 2, list[0].UsedFiles)
	require.Nil(t, list[0].TenantFiles)
	require.ErrorIs(t, b.svc.UnsafeSystemSetQuota(context.Background(), "acme", service.QuotaOverride{OwnerBytes: ptrInt(-2)}), service.ErrInvalidMeta)
}

func ptrInt(v int64) *int64 { return &v }

// TestRecountUsage: after rows are changed by hand, recount-usage makes the
// usage the sum over the rows again.
func TestRecountUsage(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	b.upload(alice)
	b.upload(as("acme", "bob", "sales"))
	b.exec("UPDATE uploaded_file_usage SET bytes = 999999, files = 42")
	b.exec("UPDATE uploaded_file SET size_bytes = 7 WHERE user_id = 'bob'")
	n, err := b.svc.UnsafeSystemRecountUsage(context.Background(), "acme")
	require.NoError(t, err)
	require.EqualValues(t, 3, n)
	for _, user := range []string{"", "alice", "bob"} {
		ub, uf := b.usageOf("acme", user)
		rb, rf := b.rowsHolding("acme", user)
		require.Equal(t, [2]int64{rb, rf}, [2]int64{ub, uf}, "usage of %q", user)
	}
}

// TestRecountReadsTheTableOncePerHundredTenants: recounting 250 tenants
// reads uploaded_file in three passes (a hundred tenants a transaction),
// not once per tenant (250 passes: 1,000 tenants over a million files took
// 3 minutes), and still leaves every tenant's usage equal to its rows.
func TestRecountReadsTheTableOncePerHundredTenants(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	b.upload(alice)
	b.exec(`INSERT INTO uploaded_file_usage (tenant_code, user_id, bytes, files)
SELECT 'tenant-' || lpad(i::text, 3, '0'), '', 5, 1 FROM generate_series(1, 249) AS i`)
	ctx := context.Background()
	scans := func() int64 {
		// Counters are flushed by each backend at most once a second:
		// read them once they have stood still for longer than that.
		var last int64 = -1
		for {
			var n int64
			require.NoError(t, b.db.Pool.QueryRow(ctx, `SELECT pg_stat_force_next_flush(), seq_scan FROM pg_stat_user_tables
WHERE relname = 'uploaded_file'`).Scan(nil, &n))
			if n == last {
				return n
			}
			last = n
			time.Sleep(1500 * time.Millisecond)
		}
	}
	before := scans()
	n, err := b.svc.UnsafeSystemRecountUsage(ctx, "")
	require.NoError(t, err)
	require.EqualValues(t, 2, n, "the rows written from sums: acme's total and alice's (the 249 zeroed ones are not counted)")
	read := scans() - before
	require.LessOrEqual(t, read, int64(2*3), "at most two scans (files, variants' owners) in each of 3 passes")
	ub, uf := b.usageOf("tenant-001", "")
	require.Equal(t, [2]int64{0, 0}, [2]int64{ub, uf}, "a tenant no row holds space for is zeroed")
}

// TestAbandonedUploadReleasesItsQuota: a direct upload whose client is
// gone (never completed, never aborted) holds its quota at most
// AbandonedUploadHold, then the temporary track -- every 15 minutes by
// default, not the daily pending track -- claims it and gives the space
// back; an abort gives it back at once.
func TestAbandonedUploadReleasesItsQuota(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	ctx := context.Background()
	body := []byte("id,amount\n1,42\n")
	_, err := b.svc.InitiateUpload(alice, input("rows.csv", "text/csv", body), nil)
	require.NoError(t, err)
	aborted, err := b.svc.InitiateUpload(alice, input("other.csv", "text/csv", body), nil)
	require.NoError(t, err)
	_, files := b.usageOf("acme", "alice")
	require.EqualValues(t, 2, files)
	require.NoError(t, b.svc.AbortUpload(alice, aborted.ID.String()))
	_, files = b.usageOf("acme", "alice")
	require.EqualValues(t, 1, files, "an abort gives the space back at once")

	runner := tracks.New(b.svc, b.db.Pool, tracks.Options{})
	b.clock.Advance(b.svc.AbandonedUploadHold() - time.Minute)
	_, err = runner.Run(ctx, tracks.TrackTemporary)
	require.NoError(t, err)
	_, files = b.usageOf("acme", "alice")
	require.EqualValues(t, 1, files, "still within the hold: the client may yet complete")

	b.clock.Advance(2 * time.Minute)
	res, err := runner.Run(ctx, tracks.TrackTemporary)
	require.NoError(t, err)
	require.EqualValues(t, 1, res.Done)
	_, files = b.usageOf("acme", "alice")
	require.Zero(t, files, "released by the temporary track once the hold is over")
	b.settle()
	b.checkInvariants()
}

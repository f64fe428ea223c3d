package service_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/testkit/storagefault"
	"github.com/uploadedfile/uploadedfile/service"
)

// reconcile runs a reconcile and returns its findings by key.
func (b *bundle) reconcile(opts service.ReconcileOptions) (map[string]service.Finding, service.ReconcileCounts) {
	b.t.Helper()
	found := map[string]service.Finding{}
	counts, err := b.svc.UnsafeSystemReconcile(context.Background(), opts, func(f service.Finding) error {
		_, dup := found[f.Key]
		require.False(b.t, dup, "one finding per key: %s", f.Key)
		found[f.Key] = f
		return nil
	})
	require.NoError(b.t, err)
	return found, counts
}

// putRaw writes an object straight into the store, behind the service's back.
func (b *bundle) putRaw(key string, body []byte) {
	b.t.Helper()
	_, err := b.inner.Put(context.Background(), key, bytes.NewReader(body), storage.PutOptions{ContentType: "application/pdf", Size: int64(len(body))})
	require.NoError(b.t, err)
}

// TestReconcileFindsEveryKind plants one of each finding on each driver:
// an orphan, a staging leftover, a missing object and two mismatches; a
// healthy file, an in-flight upload and a retained staging object are not
// findings. --repair deletes the orphan and the leftover only, and a second
// run finds what repair must never touch.
func TestReconcileFindsEveryKind(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			healthy := b.upload(alice)
			orphan := "core/t-mfrw2zi-d-onqwyzlt/" + uuid.NewString() + ".pdf"
			b.putRaw(orphan, []byte(pdf))

			missing := b.upload(alice)
			require.NoError(t, b.inner.Delete(context.Background(), missing.Key))

			resized := b.upload(alice)
			require.NoError(t, b.inner.Delete(context.Background(), resized.Key))
			b.putRaw(resized.Key, []byte(pdf+"more"))

			// An aborted direct upload, settled after its window: its row
			// keeps the staging key but no longer owns it.
			body := realDOCX(t)
			aborted := b.written(body)
			staging := *b.row(aborted.ID).PendingKey
			require.NoError(t, b.svc.AbortUpload(alice, aborted.ID.String()))
			b.settle()
			b.putRaw(staging, body)

			inflight := b.written(body) // pending, content written: owned
			inflightStaging := *b.row(inflight.ID).PendingKey

			found, counts := b.reconcile(service.ReconcileOptions{})
			require.Equal(t, service.FindingOrphan, found[orphan].Kind)
			require.Equal(t, service.FindingStagingLeftover, found[staging].Kind)
			require.Equal(t, aborted.ID, *found[staging].FileID)
			require.Equal(t, service.FindingMissing, found[missing.Key].Kind)
			require.Equal(t, missing.ID, *found[missing.Key].FileID)
			require.Equal(t, service.FindingMismatch, found[resized.Key].Kind)
			require.EqualValues(t, len(pdf)+4, found[resized.Key].Size)
			require.NotContains(t, found, healthy.Key)
			require.NotContains(t, found, inflightStaging)
			require.Len(t, found, 4)
			require.EqualValues(t, 1, counts.Orphans)
			require.EqualValues(t, 1, counts.StagingLeftovers)
			require.EqualValues(t, 1, counts.Missing)
			require.EqualValues(t, 1, counts.Mismatches)

			found, counts = b.reconcile(service.ReconcileOptions{Repair: true})
			require.True(t, found[orphan].Repaired)
			require.True(t, found[staging].Repaired)
			require.False(t, found[missing.Key].Repaired)
			require.EqualValues(t, 2, counts.Repaired)
			require.False(t, b.hasObject(orphan))
			require.False(t, b.hasObject(staging))
			require.True(t, b.hasObject(resized.Key), "a mismatch is reported, never deleted")
			require.True(t, b.hasObject(inflightStaging), "an in-flight upload's staging object is never touched")
			_, err := b.svc.Find(alice, missing.ID.String())
			require.NoError(t, err, "a missing object never deletes its row")

			found, _ = b.reconcile(service.ReconcileOptions{Repair: true})
			require.Len(t, found, 2, "what remains is for an operator: %v", found)
		})
	}
}

// TestReconcileGraceAndPrefix: objects younger than the grace are left
// alone, and a prefix limits what is listed and read.
func TestReconcileGraceAndPrefix(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	young := "core/t-mfrw2zi/" + uuid.NewString() + ".pdf"
	b.putRaw(young, []byte(pdf))
	other := "other/t-mfrw2zi/" + uuid.NewString() + ".pdf"
	b.putRaw(other, []byte(pdf))
	b.clock.Advance(time.Hour)

	found, counts := b.reconcile(service.ReconcileOptions{Grace: 24 * time.Hour, Repair: true})
	require.Empty(t, found, "younger than the grace")
	require.EqualValues(t, 2, counts.Young)
	require.True(t, b.hasObject(young))

	found, counts = b.reconcile(service.ReconcileOptions{Prefix: "other/"})
	require.Len(t, found, 1)
	require.Contains(t, found, other)
	require.EqualValues(t, 1, counts.Objects, "only the prefix is listed")
}

// TestReconcileNeverDeletesAConcurrentUpload: a repair running while
// uploads land (grace 0, so only the claim's re-check protects them)
// deletes none of their objects.
func TestReconcileNeverDeletesAConcurrentUpload(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			for range 50 {
				b.upload(alice)
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
						_, err := b.svc.Upload(alice, strings.NewReader(pdf), "late.pdf", nil)
						require.NoError(t, err)
					}
				}
			})
			for range 5 {
				_, counts := b.reconcile(service.ReconcileOptions{Repair: true})
				require.Zero(t, counts.Repaired, "nothing was an orphan")
			}
			close(stop)
			wg.Wait()
			b.checkInvariants()
			found, _ := b.reconcile(service.ReconcileOptions{})
			require.Empty(t, found)
		})
	}
}

// TestReconcileRepairFailureIsFinishedBySweep: a repair whose delete fails
// leaves its claim (released to a retry marker); the pending sweep deletes
// the orphan and removes the claim.
func TestReconcileRepairFailureIsFinishedBySweep(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	orphan := "core/t-mfrw2zi/" + uuid.NewString() + ".pdf"
	b.putRaw(orphan, []byte(pdf))
	b.store.Inject(storagefault.Fault{Op: storagefault.OpDelete, Mode: storagefault.Before, Nth: 1})
	found, counts := b.reconcile(service.ReconcileOptions{Repair: true})
	require.False(t, found[orphan].Repaired)
	require.EqualValues(t, 1, counts.RepairFailed)
	require.True(t, b.hasObject(orphan))

	found, _ = b.reconcile(service.ReconcileOptions{})
	require.Empty(t, found, "an orphan under repair is not reported again")
	b.clock.Advance(2 * time.Minute)
	_, err := b.svc.CleanupPendingUploads(context.Background(), 0)
	require.NoError(t, err)
	require.False(t, b.hasObject(orphan), "the sweep finished the repair")
	var claims int
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT count(*) FROM uploaded_file_orphan_claim").Scan(&claims))
	require.Zero(t, claims)
}

// TestReconcileIsExactUnderTraffic: reconciles with no grace and with
// repair, run while uploads (buffer and direct) and deletions go on, on
// both drivers, report nothing and repair nothing -- no file created or
// deleted during the walk is a finding -- and no repair fails; the one real
// orphan planted before is found and repaired by the first walk. Afterwards
// every file is intact.
func TestReconcileIsExactUnderTraffic(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setupWith(t, driver, nil)
			b.useRealClock()
			ctx := context.Background()
			// Files that exist before the walks start, for the workers to
			// delete while a walk goes on.
			var existing []string
			for range 300 {
				existing = append(existing, b.upload(alice).ID.String())
			}
			orphan := "core/t-mfrw2zi/" + uuid.NewString() + ".pdf"
			b.putRaw(orphan, []byte(pdf))
			var mu sync.Mutex
			next := func() (string, bool) {
				mu.Lock()
				defer mu.Unlock()
				if len(existing) == 0 {
					return "", false
				}
				id := existing[0]
				existing = existing[1:]
				return id, true
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						f, err := b.svc.Upload(alice, strings.NewReader(pdf), "r.pdf", nil)
						if !assert(t, err) {
							return
						}
						if w == 0 {
							body := []byte(pdf)
							init, err := b.svc.InitiateUpload(alice, input("d.pdf", "application/pdf", body), nil)
							if !assert(t, err) {
								return
							}
							b.write(alice, init, body)
							_, err = b.svc.CompleteUpload(alice, init.ID.String())
							assert(t, err)
						}
						if i%2 == 0 {
							assert(t, b.svc.DeleteByID(alice, f.ID.String()))
						}
						if id, ok := next(); ok {
							assert(t, b.svc.DeleteByID(alice, id))
						}
					}
				}()
			}
			// The reconciling replica lists slowly (a large bucket), so the
			// traffic happens during its walks.
			reconciler, err := service.New(ctx, b.cfg, b.db, service.WithStore(slowListing{b.store}), service.WithClock(b.clock.Now),
				service.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
			require.NoError(t, err)
			for walk := range 4 {
				var findings []service.Finding
				counts, err := reconciler.UnsafeSystemReconcile(ctx, service.ReconcileOptions{Repair: true}, func(f service.Finding) error {
					findings = append(findings, f)
					return nil
				})
				require.NoError(t, err)
				require.Zero(t, counts.RepairFailed)
				if walk == 0 {
					require.Len(t, findings, 1, "only the planted orphan: %+v", findings)
					require.Equal(t, orphan, findings[0].Key)
					require.True(t, findings[0].Repaired)
					continue
				}
				require.Empty(t, findings, "nothing is wrong: %+v", findings)
			}
			require.False(t, b.hasObject(orphan))
			close(stop)
			wg.Wait()
			b.settle()
			b.checkInvariants()
		})
	}
}

// assert reports err from a workload goroutine (require may not stop it).
func assert(t *testing.T, err error) bool {
	t.Helper()
	if err != nil {
		t.Errorf("workload: %v", err)
		return false
	}
	return true
}

// slowListing lists its store a millisecond per object.
type slowListing struct{ storage.Store }

func (s slowListing) List(ctx context.Context, prefix, after string, fn func(storage.ObjectInfo) error) error {
	return s.Store.List(ctx, prefix, after, func(oi storage.ObjectInfo) error {
		time.Sleep(time.Millisecond)
		return fn(oi)
	})
}

package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/storagefault"
	"github.com/uploadedfile/uploadedfile/service"
)

// TestFaultsAtEveryStorageStep injects a failure at each storage step of an
// upload and of a deletion; after each, and after the sweeps settle, the
// invariants hold: no visible row without its object, no object without a
// row or a pending claim; and a file whose deletion was accepted is gone.
func TestFaultsAtEveryStorageStep(t *testing.T) {
	t.Parallel()
	type step struct {
		name   string
		faults []storagefault.Fault
		// deleteAfter deletes the uploaded file (when the upload succeeded)
		// with the faults active during the deletion instead.
		deleteAfter bool
		timeout     time.Duration
	}
	steps := []step{
		{name: "put fails before writing", faults: []storagefault.Fault{{Op: storagefault.OpPut, Mode: storagefault.Before}}},
		{name: "put writes, response lost", faults: []storagefault.Fault{{Op: storagefault.OpPut, Mode: storagefault.After}}},
		{name: "put hangs until the request ends", faults: []storagefault.Fault{{Op: storagefault.OpPut, Mode: storagefault.Hang}}, timeout: 200 * time.Millisecond},
		{name: "put lost and cleanup delete fails", faults: []storagefault.Fault{
			{Op: storagefault.OpPut, Mode: storagefault.After}, {Op: storagefault.OpDelete, Mode: storagefault.Before, Nth: 1}}},
		{name: "put lost and cleanup delete lost", faults: []storagefault.Fault{
			{Op: storagefault.OpPut, Mode: storagefault.After}, {Op: storagefault.OpDelete, Mode: storagefault.After, Nth: 1}}},
		{name: "delete fails before deleting", deleteAfter: true, faults: []storagefault.Fault{{Op: storagefault.OpDelete, Mode: storagefault.Before, Nth: 1}}},
		{name: "delete deletes, response lost", deleteAfter: true, faults: []storagefault.Fault{{Op: storagefault.OpDelete, Mode: storagefault.After, Nth: 1}}},
		{name: "delete fails on every try", deleteAfter: true, faults: []storagefault.Fault{{Op: storagefault.OpDelete, Mode: storagefault.Before, Nth: 0}}},
	}
	for _, driver := range drivers {
		for _, st := range steps {
			t.Run(driver+"/"+st.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t, driver)
				inject := func() {
					for _, f := range st.faults {
						b.store.Inject(f)
					}
				}
				ctx := alice
				if st.timeout > 0 {
					var cancel context.CancelFunc
					ctx, cancel = context.WithTimeout(alice, st.timeout)
					defer cancel()
				}
				if !st.deleteAfter {
					inject()
				}
				r, err := b.svc.Upload(ctx, strings.NewReader(pdf), "report.pdf", nil)
				if !st.deleteAfter {
					require.Error(t, err, "the upload reports its failure")
					require.ErrorIs(t, err, service.ErrUploadFailed)
				} else {
					require.NoError(t, err)
					inject()
					require.NoError(t, b.svc.DeleteByID(alice, r.ID.String()), "the deletion is accepted durably")
					_, err := b.svc.Find(alice, r.ID.String())
					requireNotFound(t, err, "the file is gone for readers at once")
				}
				b.checkInvariants()

				if st.faults[len(st.faults)-1].Nth == 0 && st.deleteAfter {
					// Storage keeps failing: the claim survives every sweep.
					b.settle()
					b.checkInvariants()
					require.True(t, b.hasObject(r.Key))
					require.NotNil(t, b.row(r.ID).DeletionPendingAt, "still claimed, retried later")
					b.store.Reset()
				}
				b.settle()
				b.checkInvariants()
				require.Empty(t, b.objects(), "every object of a failed upload or an accepted deletion is gone once the sweeps settle")
			})
		}
	}
}

package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/storagefault"
	"github.com/uploadedfile/uploadedfile/service"
)

// TestUploadKey: a buffer upload under an Idempotency-Key (WithUploadKey)
// is made once per key of its caller: the same request again answers with
// the first file (Replayed) and writes nothing; another request under the
// key is ErrIdempotencyKeyReused and writes nothing; another caller's key
// of the same name is another key; once the file is deleted, or 24 hours
// after the first request, the key makes a new file.
func TestUploadKey(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	upload := func(ctx context.Context, key, body string) (*service.Result, *service.UploadKey, error) {
		k := service.NewUploadKey(key, []byte("POST /uploaded-file"))
		r, err := b.svc.Upload(service.WithUploadKey(ctx, k), strings.NewReader(body), "report.pdf", nil)
		return r, k, err
	}

	first, k, err := upload(alice, "k", pdf)
	require.NoError(t, err)
	require.False(t, k.Replayed())
	again, k, err := upload(alice, "k", pdf)
	require.NoError(t, err)
	require.True(t, k.Replayed())
	require.Equal(t, first.ID, again.ID)
	require.Equal(t, first.CreatedAt, again.CreatedAt)
	require.Equal(t, 1, b.rowCount())

	_, _, err = upload(alice, "k", pdf+"%another\n")
	require.ErrorIs(t, err, service.ErrIdempotencyKeyReused)
	require.Equal(t, 1, b.rowCount(), "another request under the key writes nothing")

	bobs, k, err := upload(as("acme", "bob", "sales"), "k", pdf)
	require.NoError(t, err)
	require.False(t, k.Replayed())
	require.NotEqual(t, first.ID, bobs.ID)

	require.NoError(t, b.svc.DeleteByID(alice, first.ID.String()))
	afterDelete, k, err := upload(alice, "k", pdf)
	require.NoError(t, err)
	require.False(t, k.Replayed(), "a deleted file's key makes a new file")
	require.NotEqual(t, first.ID, afterDelete.ID)

	b.clock.Advance(service.IdempotencyRetention + time.Minute)
	dayAfter, k, err := upload(alice, "k", pdf)
	require.NoError(t, err)
	require.False(t, k.Replayed(), "24 hours on, the key makes a new file")
	require.NotEqual(t, afterDelete.ID, dayAfter.ID)
	_, err = b.svc.Find(alice, afterDelete.ID.String())
	require.NoError(t, err, "the older file stays")
}

// TestUploadKeyLeaseFollowsItsWriter: a keyed buffer upload's hidden row
// holds a short activation lease, which its writer extends while it stores
// the bytes. A retry under the key answers that the first request is in
// flight for as long as the writer lives, well past its first lease, and
// the writer activates its file under the lease it moved on. (A writer
// that died stops extending: TestUploadKeyRecoversADeadUpload kills one.)
func TestUploadKeyLeaseFollowsItsWriter(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	service.SetActivationBeat(b.svc, 20*time.Millisecond)
	upload := func(ctx context.Context) (*service.Result, error) {
		k := service.NewUploadKey("k", []byte("POST /uploaded-file"))
		return b.svc.Upload(service.WithUploadKey(ctx, k), strings.NewReader(pdf), "report.pdf", nil)
	}
	release, writing := make(chan struct{}), make(chan struct{}, 1)
	b.store.Inject(storagefault.Fault{Op: storagefault.OpPut, Mode: storagefault.Delay, Nth: 1, Release: release,
		OnHit: func() { writing <- struct{}{} }})
	done := make(chan error, 1)
	go func() { _, err := upload(alice); done <- err }()
	<-writing
	var id uuid.UUID
	require.NoError(t, b.db.Pool.QueryRow(context.Background(), "SELECT id FROM uploaded_file").Scan(&id))
	require.Equal(t, b.clock.Now().Add(service.ActivationLease), b.row(id).UploadPendingAt.UTC(), "a short lease")

	for range 3 { // a lease and a half
		b.clock.Advance(service.ActivationLease / 2)
		want := b.clock.Now().Add(service.ActivationLease)
		require.Eventually(t, func() bool { return b.row(id).UploadPendingAt.UTC().Equal(want) },
			5*time.Second, 5*time.Millisecond, "the writer extends its lease")
		_, err := upload(alice)
		var inFlight *service.KeyInFlightError
		require.ErrorAs(t, err, &inFlight, "the writer lives: its request is in flight")
	}
	close(release)
	require.NoError(t, <-done, "the writer activates under the lease it moved on")
	row := b.row(id)
	require.Equal(t, "ready", row.Status)
	require.Nil(t, row.UploadPendingAt)
	require.Equal(t, 1, b.rowCount())
	b.checkInvariants()
}

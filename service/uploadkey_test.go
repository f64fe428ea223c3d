package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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

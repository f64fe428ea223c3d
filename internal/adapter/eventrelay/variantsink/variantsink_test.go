package variantsink_test

import (
	"bytes"
	"context"
	"image"
	"image/png"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay/variantsink"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/service"
)

func pic(t *testing.T) []byte {
	t.Helper()
	m := image.NewGray(image.Rect(0, 0, 64, 48))
	for i := range m.Pix {
		m.Pix[i] = uint8(i)
	}
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, m))
	return b.Bytes()
}

// TestEagerPresetsAreGeneratedByTheRelay: an upload's request makes no
// variant; the relay's pass after file.ready generates the eager presets
// (and only those) of images, and acknowledges non-images and refused
// images without generating anything.
func TestEagerPresetsAreGeneratedByTheRelay(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pgtest.New(t)
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := service.New(ctx, service.Config{LocalRoot: t.TempDir(), Variants: service.VariantsConfig{
		MaxPixels: 4000,
		Presets: map[string]service.VariantPreset{
			"thumb": {Width: 16, Height: 16, Fit: "cover", Format: "png", Eager: true},
			"card":  {Width: 32, Height: 32, Fit: "inside", Format: "jpeg", Eager: true},
			"large": {Width: 64, Height: 64, Fit: "inside", Format: "jpeg"},
		},
	}}, pool, service.WithLogger(quiet))
	require.NoError(t, err)
	require.Equal(t, []string{"card", "thumb"}, svc.EagerVariantPresets())

	alice := service.WithRequestContext(ctx, service.RequestContext{Tenant: "acme", UserID: "alice"})
	img, err := svc.Upload(alice, bytes.NewReader(pic(t)), "p.png", nil)
	require.NoError(t, err)
	_, err = svc.Upload(alice, strings.NewReader("a,b\n1,2\n"), "t.csv", nil)
	require.NoError(t, err)
	count := func() (n int) {
		require.NoError(t, pool.QueryRow(ctx, "SELECT count(*) FROM uploaded_file_variant WHERE status = 'ready'").Scan(&n))
		return n
	}
	require.Zero(t, count(), "nothing on the upload's request path")

	r, err := eventrelay.New(pool, eventrelay.Config{Sinks: []eventrelay.SinkConfig{variantsink.Config(svc)}, Batch: 10})
	require.NoError(t, err)
	deadline := time.Now().Add(20 * time.Second)
	for count() < 2 && time.Now().Before(deadline) {
		_, err := r.Pass(ctx)
		require.NoError(t, err)
		time.Sleep(10 * time.Millisecond)
	}
	var presets []string
	rows, err := pool.Query(ctx, "SELECT preset FROM uploaded_file_variant WHERE file_id = $1 ORDER BY preset", img.ID)
	require.NoError(t, err)
	for rows.Next() {
		var p string
		require.NoError(t, rows.Scan(&p))
		presets = append(presets, p)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"card", "thumb"}, presets)

	// Served from storage now, without generating again.
	v, err := svc.FindVariant(alice, img.ID.String(), "thumb")
	require.NoError(t, err)
	require.Equal(t, 16, v.Width)
	require.Equal(t, 2, count())

	// The sink acknowledges everything (the non-image too, and the
	// variant events it caused): its backlog empties.
	require.Eventually(t, func() bool {
		_, err := r.Pass(ctx)
		require.NoError(t, err)
		st, err := r.Status(ctx)
		require.NoError(t, err)
		return len(st) == 1 && st[0].Depth == 0
	}, 20*time.Second, 20*time.Millisecond)
	require.Equal(t, 2, count(), "and generated nothing more")
}

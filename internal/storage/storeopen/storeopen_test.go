package storeopen_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
	"github.com/uploadedfile/uploadedfile/internal/storage/storeopen"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

// TestOpenEachDriver: Open gives a working store of the kind asked for,
// reading only that kind's settings.
func TestOpenEachDriver(t *testing.T) {
	ctx := context.Background()
	for name, s := range map[string]storeopen.Settings{
		"local": {Kind: storage.KindLocal, Local: local.Config{Root: t.TempDir()}, S3: s3test.New(t)},
		"s3":    {Kind: storage.KindS3, Local: local.Config{Root: "/proc/none"}, S3: s3test.New(t)},
	} {
		st, err := storeopen.Open(ctx, s)
		require.NoError(t, err, name)
		require.Equal(t, s.Kind, st.Kind(), name)
		putAndRead(t, st)
		require.NoError(t, st.Close(), name)
	}
}

// TestOpenNamesTheRefusedSetting: a setting a driver refuses is an error
// naming its group, and an unknown kind is refused.
func TestOpenNamesTheRefusedSetting(t *testing.T) {
	ctx := context.Background()
	file := filepath.Join(t.TempDir(), "a-file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err := storeopen.Open(ctx, storeopen.Settings{Kind: storage.KindLocal, Local: local.Config{Root: file}})
	require.ErrorContains(t, err, "localRoot: ")
	_, err = storeopen.Open(ctx, storeopen.Settings{Kind: storage.KindS3})
	require.ErrorContains(t, err, "s3: ")
	_, err = storeopen.Open(ctx, storeopen.Settings{Kind: "ftp"})
	require.ErrorContains(t, err, `driver: "ftp"`)
}

// TestInstrument: with a registry and a tracer provider every call is
// counted and traced; with neither the store is returned as it is.
func TestInstrument(t *testing.T) {
	ctx := context.Background()
	st, err := storeopen.Open(ctx, storeopen.Settings{Kind: storage.KindLocal, Local: local.Config{Root: t.TempDir()}})
	require.NoError(t, err)
	require.Same(t, st, storeopen.Instrument(st, nil, nil), "nothing to add: the store itself")

	reg := prometheus.NewRegistry()
	rec := tracetest.NewSpanRecorder()
	w := storeopen.Instrument(st, reg, sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	putAndRead(t, w)
	n, err := testutil.GatherAndCount(reg, "uploadedfile_storage_requests_total")
	require.NoError(t, err)
	require.Positive(t, n, "counted")
	names := map[string]bool{}
	for _, s := range rec.Ended() {
		names[s.Name()] = true
	}
	require.True(t, names["storage.put"] && names["storage.open"], "traced: %v", names)
}

func putAndRead(t *testing.T, st storage.Store) {
	t.Helper()
	ctx := context.Background()
	body := []byte("%PDF-1.4 assembled")
	sum := sha256.Sum256(body)
	key := "core/t-mfrggzdf/assembled/a.pdf"
	_, err := st.Put(ctx, key, bytes.NewReader(body), storage.PutOptions{Size: int64(len(body)), ContentType: "application/pdf", SHA256: sum[:]})
	require.NoError(t, err)
	rc, err := st.Open(ctx, key, nil)
	require.NoError(t, err)
	var got bytes.Buffer
	_, err = got.ReadFrom(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, body, got.Bytes())
}

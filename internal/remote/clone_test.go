package remote_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/remote"
	"github.com/uploadedfile/uploadedfile/internal/testkit/clamdtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/service"
)

const pdf = "%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"

func cloneService(t *testing.T, cfg service.Config, f *remote.Fetcher) *service.Service {
	t.Helper()
	cfg.LocalRoot = t.TempDir()
	opts := []service.Option{service.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))}
	if f != nil {
		opts = append(opts, service.WithFetcher(f))
	}
	s, err := service.New(context.Background(), cfg, pgtest.New(t), opts...)
	require.NoError(t, err)
	return s
}

var alice = service.WithRequestContext(context.Background(), service.RequestContext{Tenant: "acme", UserID: "alice"})

type invoice struct {
	Source string `json:"source"`
}

func TestCloneFromURLDisabledByDefault(t *testing.T) {
	t.Parallel()
	s := cloneService(t, service.Config{}, nil)
	require.False(t, s.EffectiveConfig().RemoteClone.Enabled)
	_, err := service.CloneFromURL(alice, s, "http://files.example.com/report.pdf", "", nil, invoice{})
	require.ErrorIs(t, err, service.ErrRemoteDisabled)
}

func TestCloneFromURL(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("/report.pdf", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		_, _ = io.WriteString(w, pdf)
	})
	mux.HandleFunc("/fake.pdf", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("\x89PNG\r\n\x1a\n" + strings.Repeat("\x00", 64)))
	})
	mux.HandleFunc("/huge.txt", func(w http.ResponseWriter, _ *http.Request) {
		for range 20 {
			_, _ = w.Write([]byte(strings.Repeat("x", 1024)))
		}
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://127.0.0.1/admin", http.StatusFound)
	})
	f, h := newHarness(t, mux, remote.Config{MaxBytes: 10 << 10}, map[string]string{"files.example.com": publicIP})
	s := cloneService(t, service.Config{RemoteClone: service.RemoteCloneConfig{Enabled: true, MaxBytes: 10 << 10}}, f)

	file, err := service.CloneFromURL(alice, s, "http://files.example.com/report.pdf", "", &service.Meta{Entity: "invoice"}, invoice{Source: "import"})
	require.NoError(t, err)
	require.Equal(t, "report.pdf", file.OriginalName)
	require.Equal(t, "application/pdf", file.ContentType)
	require.Equal(t, invoice{Source: "import"}, file.ExtraData)
	d, err := s.Download(alice, file.ID.String())
	require.NoError(t, err)
	got, _ := io.ReadAll(d.Body)
	d.Body.Close()
	require.Equal(t, pdf, string(got))

	named, err := service.CloneFromURL(alice, s, "http://files.example.com/report.pdf", "Q1.pdf", nil, invoice{})
	require.NoError(t, err)
	require.Equal(t, "Q1.pdf", named.OriginalName)

	_, err = service.CloneFromURL(alice, s, "http://files.example.com/fake.pdf", "", nil, invoice{})
	require.ErrorIs(t, err, service.ErrInvalidUpload, "the bytes pass the ordinary upload validation")

	for _, u := range []string{"http://files.example.com/huge.txt", "http://files.example.com/redirect", "http://127.0.0.1/", "http://files.example.com:8443/x"} {
		_, err := service.CloneFromURL(alice, s, u, "", nil, invoice{})
		require.ErrorIs(t, err, service.ErrRemoteFetchFailed, u)
		require.Equal(t, "core.file.remote-fetch-failed", err.Error(), "no detail about the network")
	}
	for _, d := range h.dials() {
		require.Equal(t, publicIP+":80", d)
	}

	_, err = service.CloneFromURL(context.Background(), s, "http://files.example.com/report.pdf", "", nil, invoice{})
	require.ErrorIs(t, err, service.ErrNotFound, "no trusted context")
}

// TestCloneThroughTheScanGate: a clone is scanned like a buffer upload (on
// the real clamd): a clean remote file is stored, an infected one is
// invalid-upload content.infected and never visible.
func TestCloneThroughTheScanGate(t *testing.T) {
	t.Parallel()
	d := clamdtest.Start(t, 30)
	mux := http.NewServeMux()
	mux.HandleFunc("/clean.txt", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "plain notes\n") })
	mux.HandleFunc("/infected.txt", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, clamdtest.EICAR) })
	f, _ := newHarness(t, mux, remote.Config{}, map[string]string{"files.example.com": publicIP})
	s, err := service.New(context.Background(),
		service.Config{LocalRoot: t.TempDir(), ScanMode: service.ScanGate, RemoteClone: service.RemoteCloneConfig{Enabled: true}}, pgtest.New(t),
		service.WithFetcher(f), service.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
		service.WithScanner(d.Scanner(10*time.Second)))
	require.NoError(t, err)

	clean, err := service.CloneFromURL(alice, s, "http://files.example.com/clean.txt", "", nil, invoice{})
	require.NoError(t, err)
	require.Equal(t, service.StatusReady, clean.Status)
	_, err = service.CloneFromURL(alice, s, "http://files.example.com/infected.txt", "", nil, invoice{})
	require.ErrorIs(t, err, service.ErrInvalidUpload)
	require.Equal(t, service.RuleContentInfected, service.Rule(err))
	page, err := s.List(alice, service.ListOptions{})
	require.NoError(t, err)
	require.Len(t, page.Files, 1, "only the clean clone is visible")
}

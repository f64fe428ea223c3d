// Package storagemetrics counts what the service asks of its storage:
// requests per operation, and the bytes it reads and writes through its
// own process (a server-side copy moves none).
package storagemetrics

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// Store wraps a storage.Store with counters.
type Store struct {
	// inner is the wrapped store: every method of storage.Store is
	// written out below, none promoted, so a new one cannot pass through
	// unmeasured (the compile-time assertion fails until it is wrapped).
	inner    storage.Store
	requests *prometheus.CounterVec
	bytes    *prometheus.CounterVec
}

var (
	_ storage.Store      = (*Store)(nil)
	_ storage.FileOpener = (*Store)(nil)
)

// Wrap counts s's requests and bytes into reg.
func Wrap(s storage.Store, reg prometheus.Registerer) *Store {
	w := &Store{
		inner: s,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uploadedfile_storage_requests_total", Help: "Storage requests by operation and outcome (ok, not_found, exists, precondition, no_space, read_only, io_error, unavailable, error).",
		}, []string{"op", "outcome"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uploadedfile_storage_bytes_total", Help: "Object bytes that passed through the service process (read or written).",
		}, []string{"direction"}),
	}
	reg.MustRegister(w.requests, w.bytes)
	return w
}

// Kind implements storage.Store: the wrapped store's driver.
func (w *Store) Kind() storage.Kind { return w.inner.Kind() }

// Close implements storage.Store: it closes the wrapped store.
func (w *Store) Close() error {
	return w.inner.Close()
}

// Ping implements storage.Store: it pings the wrapped store.
func (w *Store) Ping(ctx context.Context) error {
	return w.inner.Ping(ctx)
}

// Put implements storage.Store.
func (w *Store) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.ObjectInfo, error) {
	oi, err := w.inner.Put(ctx, key, &counting{r: body, c: w.bytes.WithLabelValues("written")}, opts)
	return oi, w.count("put", err)
}

// Stat implements storage.Store.
func (w *Store) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	oi, err := w.inner.Stat(ctx, key)
	return oi, w.count("stat", err)
}

// Open implements storage.Store.
func (w *Store) Open(ctx context.Context, key string, rng *storage.Range) (io.ReadCloser, error) {
	rc, err := w.inner.Open(ctx, key, rng)
	if err != nil {
		return nil, w.count("open", err)
	}
	_ = w.count("open", nil)
	return &countingCloser{counting: counting{r: rc, c: w.bytes.WithLabelValues("read")}, closer: rc}, nil
}

// Promote implements storage.Store.
func (w *Store) Promote(ctx context.Context, src, dst, etag string, opts storage.PromoteOptions) (storage.ObjectInfo, error) {
	oi, err := w.inner.Promote(ctx, src, dst, etag, opts)
	return oi, w.count("promote", err)
}

// Delete implements storage.Store.
func (w *Store) Delete(ctx context.Context, key string) error {
	return w.count("delete", w.inner.Delete(ctx, key))
}

// PresignPut implements storage.Store.
func (w *Store) PresignPut(ctx context.Context, key string, opts storage.PresignPutOptions) (storage.Presigned, error) {
	p, err := w.inner.PresignPut(ctx, key, opts)
	return p, w.count("presign_put", err)
}

// PresignGet implements storage.Store.
func (w *Store) PresignGet(ctx context.Context, key string, opts storage.PresignGetOptions) (storage.Presigned, error) {
	p, err := w.inner.PresignGet(ctx, key, opts)
	return p, w.count("presign_get", err)
}

// List implements storage.Store: one count per listing, however many
// pages it read.
func (w *Store) List(ctx context.Context, prefix, after string, fn func(storage.ObjectInfo) error) error {
	return w.count("list", w.inner.List(ctx, prefix, after, fn))
}

// count counts one request of op by its outcome and returns err.
func (w *Store) count(op string, err error) error {
	outcome := "error"
	switch {
	case err == nil:
		outcome = "ok"
	case errors.Is(err, storage.ErrNotFound):
		outcome = "not_found"
	case errors.Is(err, storage.ErrExists):
		outcome = "exists"
	case errors.Is(err, storage.ErrPrecondition):
		outcome = "precondition"
	case errors.Is(err, storage.ErrUnavailable):
		outcome = storage.FaultKind(err) // no_space, read_only, io_error or unavailable
	}
	w.requests.WithLabelValues(op, outcome).Inc()
	return err
}

type counting struct {
	r io.Reader
	c prometheus.Counter
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.c.Add(float64(n))
	return n, err
}

type countingCloser struct {
	counting
	closer io.Closer
}

func (c *countingCloser) Close() error { return c.closer.Close() }

// OpenFile forwards to a store that can open seekable files (the local
// driver), counting it as an open; others answer storage.ErrUnsupported.
func (w *Store) OpenFile(key, etag string) (*os.File, storage.ObjectInfo, error) {
	fo, ok := w.inner.(storage.FileOpener)
	if !ok {
		return nil, storage.ObjectInfo{}, storage.ErrUnsupported
	}
	f, oi, err := fo.OpenFile(key, etag)
	return f, oi, w.count("open", err)
}

// Spool forwards to a store that has spools; others answer
// storage.ErrUnsupported. A commit counts as a put, and the bytes it makes
// an object as written (they passed through this process into the spool).
func (w *Store) Spool(ctx context.Context) (storage.Spool, error) {
	sp, ok := w.inner.(storage.Spooler)
	if !ok {
		return nil, storage.ErrUnsupported
	}
	inner, err := sp.Spool(ctx)
	if err != nil {
		return nil, err
	}
	return &spool{Spool: inner, w: w}, nil
}

type spool struct {
	storage.Spool
	w *Store
}

// Write forwards to the spool; a write that fails counts as a failed
// request of op "spool" (a full disk shows here first: the local driver's
// spool is an unnamed file in its root). Writes that succeed are not
// counted: a commit counts the upload.
func (sp *spool) Write(p []byte) (int, error) {
	n, err := sp.Spool.Write(p)
	if err != nil {
		_ = sp.w.count("spool", err)
	}
	return n, err
}

func (sp *spool) Commit(ctx context.Context, key string, opts storage.PutOptions) (storage.ObjectInfo, error) {
	oi, err := sp.Spool.Commit(ctx, key, opts)
	_ = sp.w.count("put", err)
	if err == nil {
		sp.w.bytes.WithLabelValues("written").Add(float64(sp.Size()))
	}
	return oi, err
}

// Package storagemetrics counts what the service asks of its storage:
// requests per operation, and the bytes it reads and writes through its
// own process (a server-side copy moves none).
package storagemetrics

import (
	"context"
	"io"
	"os"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// Store wraps a storage.Store with counters.
type Store struct {
	storage.Store
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
		Store: s,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uploadedfile_storage_requests_total", Help: "Storage requests by operation.",
		}, []string{"op"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "uploadedfile_storage_bytes_total", Help: "Object bytes that passed through the service process (read or written).",
		}, []string{"direction"}),
	}
	reg.MustRegister(w.requests, w.bytes)
	return w
}

// Close closes the wrapped store when it can be closed.
func (w *Store) Close() error {
	if c, ok := w.Store.(interface{ Close() error }); ok {
		return c.Close()
	}
	return nil
}

// Ping pings the wrapped store when it can be pinged.
func (w *Store) Ping(ctx context.Context) error {
	if p, ok := w.Store.(interface{ Ping(context.Context) error }); ok {
		return p.Ping(ctx)
	}
	return nil
}

// Put implements storage.Store.
func (w *Store) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.ObjectInfo, error) {
	w.requests.WithLabelValues("put").Inc()
	return w.Store.Put(ctx, key, &counting{r: body, c: w.bytes.WithLabelValues("written")}, opts)
}

// Stat implements storage.Store.
func (w *Store) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	w.requests.WithLabelValues("stat").Inc()
	return w.Store.Stat(ctx, key)
}

// Open implements storage.Store.
func (w *Store) Open(ctx context.Context, key string, rng *storage.Range) (io.ReadCloser, error) {
	w.requests.WithLabelValues("open").Inc()
	rc, err := w.Store.Open(ctx, key, rng)
	if err != nil {
		return nil, err
	}
	return &countingCloser{counting: counting{r: rc, c: w.bytes.WithLabelValues("read")}, closer: rc}, nil
}

// Promote implements storage.Store.
func (w *Store) Promote(ctx context.Context, src, dst, etag string, opts storage.PromoteOptions) (storage.ObjectInfo, error) {
	w.requests.WithLabelValues("promote").Inc()
	return w.Store.Promote(ctx, src, dst, etag, opts)
}

// Delete implements storage.Store.
func (w *Store) Delete(ctx context.Context, key string) error {
	w.requests.WithLabelValues("delete").Inc()
	return w.Store.Delete(ctx, key)
}

// PresignPut implements storage.Store.
func (w *Store) PresignPut(ctx context.Context, key string, opts storage.PresignPutOptions) (storage.Presigned, error) {
	w.requests.WithLabelValues("presign_put").Inc()
	return w.Store.PresignPut(ctx, key, opts)
}

// PresignGet implements storage.Store.
func (w *Store) PresignGet(ctx context.Context, key string, opts storage.PresignGetOptions) (storage.Presigned, error) {
	w.requests.WithLabelValues("presign_get").Inc()
	return w.Store.PresignGet(ctx, key, opts)
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
func (w *Store) OpenFile(key string) (*os.File, storage.ObjectInfo, error) {
	fo, ok := w.Store.(storage.FileOpener)
	if !ok {
		return nil, storage.ObjectInfo{}, storage.ErrUnsupported
	}
	w.requests.WithLabelValues("open").Inc()
	return fo.OpenFile(key)
}

// Spool forwards to a store that has spools; others answer
// storage.ErrUnsupported. A commit counts as a put, and the bytes it makes
// an object as written (they passed through this process into the spool).
func (w *Store) Spool(ctx context.Context) (storage.Spool, error) {
	sp, ok := w.Store.(storage.Spooler)
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

func (sp *spool) Commit(ctx context.Context, key string, opts storage.PutOptions) (storage.ObjectInfo, error) {
	sp.w.requests.WithLabelValues("put").Inc()
	oi, err := sp.Spool.Commit(ctx, key, opts)
	if err == nil {
		sp.w.bytes.WithLabelValues("written").Add(float64(sp.Size()))
	}
	return oi, err
}

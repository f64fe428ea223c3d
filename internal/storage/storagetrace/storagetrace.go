// Package storagetrace gives every storage call a span (storage.<op>, with
// the driver and, for single objects, no key: keys name tenants and files,
// which a trace backend need not hold).
package storagetrace

import (
	"context"
	"io"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// Store wraps a storage.Store with spans.
type Store struct {
	// inner is the wrapped store: every method of storage.Store is
	// written out below, none promoted, so a new one cannot pass through
	// unmeasured (the compile-time assertion fails until it is wrapped).
	inner  storage.Store
	tracer trace.Tracer
}

var (
	_ storage.Store      = (*Store)(nil)
	_ storage.FileOpener = (*Store)(nil)
)

// Wrap traces s's calls with tp's tracer.
func Wrap(s storage.Store, tp trace.TracerProvider) *Store {
	return &Store{inner: s, tracer: tp.Tracer("github.com/uploadedfile/uploadedfile/internal/storage")}
}

func (w *Store) start(ctx context.Context, op string) (context.Context, trace.Span) {
	return w.tracer.Start(ctx, "storage."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("storage.driver", string(w.inner.Kind()))))
}

func end(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "storage call failed")
	}
	span.End()
}

// Kind implements storage.Store: the wrapped store's driver.
func (w *Store) Kind() storage.Kind { return w.inner.Kind() }

// Close implements storage.Store: it closes the wrapped store.
func (w *Store) Close() error {
	return w.inner.Close()
}

// Ping implements storage.Store: it pings the wrapped store.
func (w *Store) Ping(ctx context.Context) error {
	ctx, span := w.start(ctx, "ping")
	err := w.inner.Ping(ctx)
	end(span, err)
	return err
}

// Put implements storage.Store.
func (w *Store) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.ObjectInfo, error) {
	ctx, span := w.start(ctx, "put")
	oi, err := w.inner.Put(ctx, key, body, opts)
	end(span, err)
	return oi, err
}

// Stat implements storage.Store.
func (w *Store) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	ctx, span := w.start(ctx, "stat")
	oi, err := w.inner.Stat(ctx, key)
	end(span, err)
	return oi, err
}

// Open implements storage.Store (the span covers opening, not reading).
func (w *Store) Open(ctx context.Context, key string, rng *storage.Range) (io.ReadCloser, error) {
	ctx, span := w.start(ctx, "open")
	rc, err := w.inner.Open(ctx, key, rng)
	end(span, err)
	return rc, err
}

// Promote implements storage.Store.
func (w *Store) Promote(ctx context.Context, src, dst, etag string, opts storage.PromoteOptions) (storage.ObjectInfo, error) {
	ctx, span := w.start(ctx, "promote")
	oi, err := w.inner.Promote(ctx, src, dst, etag, opts)
	end(span, err)
	return oi, err
}

// Delete implements storage.Store.
func (w *Store) Delete(ctx context.Context, key string) error {
	ctx, span := w.start(ctx, "delete")
	err := w.inner.Delete(ctx, key)
	end(span, err)
	return err
}

// PresignPut implements storage.Store.
func (w *Store) PresignPut(ctx context.Context, key string, opts storage.PresignPutOptions) (storage.Presigned, error) {
	ctx, span := w.start(ctx, "presign_put")
	p, err := w.inner.PresignPut(ctx, key, opts)
	end(span, err)
	return p, err
}

// PresignGet implements storage.Store.
func (w *Store) PresignGet(ctx context.Context, key string, opts storage.PresignGetOptions) (storage.Presigned, error) {
	ctx, span := w.start(ctx, "presign_get")
	p, err := w.inner.PresignGet(ctx, key, opts)
	end(span, err)
	return p, err
}

// List implements storage.Store.
func (w *Store) List(ctx context.Context, prefix, after string, fn func(storage.ObjectInfo) error) error {
	ctx, span := w.start(ctx, "list")
	err := w.inner.List(ctx, prefix, after, fn)
	end(span, err)
	return err
}

// OpenFile forwards to a store that can open seekable files (the local
// driver); others answer storage.ErrUnsupported.
func (w *Store) OpenFile(key, etag string) (*os.File, storage.ObjectInfo, error) {
	fo, ok := w.inner.(storage.FileOpener)
	if !ok {
		return nil, storage.ObjectInfo{}, storage.ErrUnsupported
	}
	return fo.OpenFile(key, etag)
}

// Spool forwards to a store that has spools (its commit is a span);
// others answer storage.ErrUnsupported.
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

func (sp *spool) Commit(ctx context.Context, key string, opts storage.PutOptions) (storage.ObjectInfo, error) {
	ctx, span := sp.w.start(ctx, "commit")
	oi, err := sp.Spool.Commit(ctx, key, opts)
	end(span, err)
	return oi, err
}

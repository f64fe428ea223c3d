// Package storagefault wraps a storage.Store with injected faults, for the
// service and maintenance tests that prove nothing is lost when storage
// fails at any step. Test code only.
//
// A fault names an operation, which call of it to hit (the Nth matching
// call, or every one), an optional key filter, and what happens:
//
//   - Before: the call fails without touching storage;
//   - After: the call is performed, then reports failure (the write
//     happened but the caller never learns it: a lost response);
//   - Hang: the call blocks until its context ends, then fails with the
//     context's error;
//   - Delay: the call waits until Release is closed (or its context
//     ends), then is performed: a slow storage call.
package storagefault

import (
	"context"
	"errors"
	"io"
	"os"
	"sync"

	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// Op names a Store operation.
type Op string

// The operations a fault can target.
const (
	OpPut        Op = "put"
	OpStat       Op = "stat"
	OpOpen       Op = "open"
	OpPromote    Op = "promote"
	OpDelete     Op = "delete"
	OpPresignPut Op = "presign-put"
	OpPresignGet Op = "presign-get"
	// OpSpool is the creation of a spool (Before, Hang and Delay faults);
	// committing a spool is an OpPut of its key, so Put faults hit both
	// ways of writing an object.
	OpSpool Op = "spool"
)

// Mode is what an injected fault does.
type Mode int

// The fault modes.
const (
	Before     Mode = iota // fail without performing the call
	After                  // perform the call, then fail
	Hang                   // block until the context ends
	Delay                  // wait for Release, then perform the call
	DelayAfter             // perform the call, then wait for Release before returning
)

// ErrInjected is the error an injected fault returns unless the fault
// names another.
var ErrInjected = errors.New("storagefault: injected failure")

// Fault is one injected failure.
type Fault struct {
	Op   Op
	Mode Mode
	// Nth is the matching call (1-based) that fails; 0 means every
	// matching call.
	Nth int
	// Key, when set, restricts the fault to calls whose key (for Promote:
	// the destination) it accepts.
	Key func(key string) bool
	// Err is returned instead of ErrInjected when set.
	Err error
	// Release ends a Delay or DelayAfter.
	Release <-chan struct{}
	// OnHit, when set, is called when the fault triggers: before it acts,
	// or for DelayAfter once the call has been performed.
	OnHit func()

	seen int
}

// Store is a storage.Store with faults.
type Store struct {
	storage.Store
	mu     sync.Mutex
	faults []*Fault
	calls  map[Op]int
}

var (
	_ storage.Store      = (*Store)(nil)
	_ storage.FileOpener = (*Store)(nil)
)

// Wrap returns s with no faults yet.
func Wrap(s storage.Store) *Store { return &Store{Store: s, calls: map[Op]int{}} }

// Inject adds a fault.
func (s *Store) Inject(f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// Reset removes every fault (the call counts stay).
func (s *Store) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// Calls returns how many times op was called.
func (s *Store) Calls(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// match counts the call and returns the fault it triggers, if any.
func (s *Store) match(op Op, key string) *Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	for _, f := range s.faults {
		if f.Op != op || (f.Key != nil && !f.Key(key)) {
			continue
		}
		f.seen++
		if f.Nth == 0 || f.Nth == f.seen {
			return f
		}
	}
	return nil
}

func (f *Fault) err() error {
	if f.Err != nil {
		return f.Err
	}
	return ErrInjected
}

// run applies the fault around the real call.
func run[T any](ctx context.Context, s *Store, op Op, key string, call func() (T, error)) (T, error) {
	var zero T
	f := s.match(op, key)
	if f != nil && f.OnHit != nil && f.Mode != DelayAfter {
		f.OnHit()
	}
	switch {
	case f == nil:
		return call()
	case f.Mode == DelayAfter:
		v, err := call()
		if f.OnHit != nil {
			f.OnHit()
		}
		select {
		case <-f.Release:
			return v, err
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	case f.Mode == Hang:
		<-ctx.Done()
		return zero, ctx.Err()
	case f.Mode == Delay:
		select {
		case <-f.Release:
			return call()
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	case f.Mode == After:
		if _, err := call(); err != nil {
			return zero, err
		}
		return zero, f.err()
	default:
		return zero, f.err()
	}
}

// Put implements storage.Store.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, opts storage.PutOptions) (storage.ObjectInfo, error) {
	return run(ctx, s, OpPut, key, func() (storage.ObjectInfo, error) { return s.Store.Put(ctx, key, body, opts) })
}

// Stat implements storage.Store.
func (s *Store) Stat(ctx context.Context, key string) (storage.ObjectInfo, error) {
	return run(ctx, s, OpStat, key, func() (storage.ObjectInfo, error) { return s.Store.Stat(ctx, key) })
}

// Open implements storage.Store.
func (s *Store) Open(ctx context.Context, key string, rng *storage.Range) (io.ReadCloser, error) {
	return run(ctx, s, OpOpen, key, func() (io.ReadCloser, error) { return s.Store.Open(ctx, key, rng) })
}

// Promote implements storage.Store; a key filter sees the destination.
func (s *Store) Promote(ctx context.Context, src, dst, srcETag string, opts storage.PromoteOptions) (storage.ObjectInfo, error) {
	return run(ctx, s, OpPromote, dst, func() (storage.ObjectInfo, error) { return s.Store.Promote(ctx, src, dst, srcETag, opts) })
}

// Delete implements storage.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	_, err := run(ctx, s, OpDelete, key, func() (struct{}, error) { return struct{}{}, s.Store.Delete(ctx, key) })
	return err
}

// PresignPut implements storage.Store.
func (s *Store) PresignPut(ctx context.Context, key string, opts storage.PresignPutOptions) (storage.Presigned, error) {
	return run(ctx, s, OpPresignPut, key, func() (storage.Presigned, error) { return s.Store.PresignPut(ctx, key, opts) })
}

// PresignGet implements storage.Store.
func (s *Store) PresignGet(ctx context.Context, key string, opts storage.PresignGetOptions) (storage.Presigned, error) {
	return run(ctx, s, OpPresignGet, key, func() (storage.Presigned, error) { return s.Store.PresignGet(ctx, key, opts) })
}

// OpenFile forwards to a store that opens objects as seekable files (the
// local driver), so a download under test takes the path it takes in
// production; other stores answer storage.ErrUnsupported, as the service's
// own wrappers do. It counts and fails as an open (OpOpen); a file opened
// by a call that then reports failure (After) is closed. It has no
// context: a Hang fault on it never ends, and a Delay waits for Release.
func (s *Store) OpenFile(key, etag string) (*os.File, storage.ObjectInfo, error) {
	fo, ok := s.Store.(storage.FileOpener)
	if !ok {
		return nil, storage.ObjectInfo{}, storage.ErrUnsupported
	}
	var opened *os.File
	var oi storage.ObjectInfo
	f, err := run(context.Background(), s, OpOpen, key, func() (*os.File, error) {
		var err error
		opened, oi, err = fo.OpenFile(key, etag)
		return opened, err
	})
	if err != nil {
		if opened != nil {
			_ = opened.Close()
		}
		return nil, storage.ObjectInfo{}, err
	}
	return f, oi, nil
}

// Spool implements storage.Spooler for a store that has spools (others
// answer storage.ErrUnsupported, as the store itself would); the spool's
// Commit is subject to OpPut faults.
func (s *Store) Spool(ctx context.Context) (storage.Spool, error) {
	sp, ok := s.Store.(storage.Spooler)
	if !ok {
		return nil, storage.ErrUnsupported
	}
	inner, err := run(ctx, s, OpSpool, "", func() (storage.Spool, error) { return sp.Spool(ctx) })
	if err != nil {
		return nil, err
	}
	return &spool{Spool: inner, s: s}, nil
}

type spool struct {
	storage.Spool
	s *Store
}

func (sp *spool) Commit(ctx context.Context, key string, opts storage.PutOptions) (storage.ObjectInfo, error) {
	return run(ctx, sp.s, OpPut, key, func() (storage.ObjectInfo, error) { return sp.Spool.Commit(ctx, key, opts) })
}

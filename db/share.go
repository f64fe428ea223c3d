package db

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Shared is c with the calls of one key -- a tenant -- holding at most
// perKey of its connections at once: a tenant whose statements wait (on
// its own rows' locks, on a slow plan) queues behind its own calls and
// leaves the rest of the pool to the other tenants, instead of taking
// every connection they need. keyOf names the key a context carries; calls
// of the empty key are not limited. A call waits for its key's slot as
// long as its context allows (Bounded's call timeout, when Shared is
// inside it), and holds it for the call: until Exec returns, the rows are
// closed, the row scanned, the batch closed, or the transaction ends.
func Shared(c Conn, perKey int, keyOf func(context.Context) string) Conn {
	return &sharedDB{inner: c, slotTable: &slotTable{perKey: max(perKey, 1), keyOf: keyOf, slots: map[string]*keySlots{}}}
}

// sharedDB is Shared's Conn. Its slots are a table of their own, so a
// copy around another Conn (rewrap) limits the same keys.
type sharedDB struct {
	inner Conn
	*slotTable
}

// rewrap implements around: the copy shares this one's slot table.
func (s *sharedDB) rewrap(f func(Conn) Conn) Conn {
	return &sharedDB{inner: f(s.inner), slotTable: s.slotTable}
}

// slotTable is the keys' slots: at most perKey calls of a key at once.
type slotTable struct {
	perKey int
	keyOf  func(context.Context) string

	mu    sync.Mutex
	slots map[string]*keySlots
}

// keySlots are one key's slots, and how many calls hold or wait for one
// (the entry goes once none does).
type keySlots struct {
	ch    chan struct{}
	users int
}

// acquire takes a slot of ctx's key, or fails with ctx's error (the
// caller then runs its call on the done context, which fails it as the
// inner Conn fails a call out of time); release gives the slot back (a
// no-op for the empty key).
func (s *slotTable) acquire(ctx context.Context) (release func(), err error) {
	key := s.keyOf(ctx)
	if key == "" {
		return func() {}, nil
	}
	s.mu.Lock()
	ks, ok := s.slots[key]
	if !ok {
		ks = &keySlots{ch: make(chan struct{}, s.perKey)}
		s.slots[key] = ks
	}
	ks.users++
	s.mu.Unlock()
	done := func() {
		s.mu.Lock()
		if ks.users--; ks.users == 0 {
			delete(s.slots, key)
		}
		s.mu.Unlock()
	}
	select {
	case ks.ch <- struct{}{}:
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
	var once sync.Once
	return func() { once.Do(func() { <-ks.ch; done() }) }, nil
}

// Exec implements DBTX.
func (s *sharedDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	release, err := s.acquire(ctx)
	if err != nil {
		return s.inner.Exec(ctx, sql, args...)
	}
	defer release()
	return s.inner.Exec(ctx, sql, args...)
}

// Query implements DBTX; the slot is held until the rows are closed.
func (s *sharedDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	release, err := s.acquire(ctx)
	if err != nil {
		return s.inner.Query(ctx, sql, args...)
	}
	rows, err := s.inner.Query(ctx, sql, args...)
	if err != nil {
		release()
		return nil, err
	}
	return sharedRows{Rows: rows, release: release}, nil
}

// QueryRow implements DBTX; the slot is held until Scan.
func (s *sharedDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	release, err := s.acquire(ctx)
	if err != nil {
		return s.inner.QueryRow(ctx, sql, args...)
	}
	return sharedRow{Row: s.inner.QueryRow(ctx, sql, args...), release: release}
}

// SendBatch implements DBTX; the slot is held until the batch is closed.
func (s *sharedDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	release, err := s.acquire(ctx)
	if err != nil {
		return s.inner.SendBatch(ctx, b)
	}
	return sharedBatch{BatchResults: s.inner.SendBatch(ctx, b), release: release}
}

// Begin implements Conn; the slot is held until the transaction ends.
func (s *sharedDB) Begin(ctx context.Context) (pgx.Tx, error) {
	release, err := s.acquire(ctx)
	if err != nil {
		return s.inner.Begin(ctx)
	}
	tx, err := s.inner.Begin(ctx)
	if err != nil {
		release()
		return nil, err
	}
	return sharedTx{Tx: tx, release: release}, nil
}

type sharedRows struct {
	pgx.Rows
	release func()
}

func (r sharedRows) Close() { r.Rows.Close(); r.release() }

type sharedRow struct {
	pgx.Row
	release func()
}

func (r sharedRow) Scan(dest ...any) error {
	defer r.release()
	return r.Row.Scan(dest...)
}

type sharedBatch struct {
	pgx.BatchResults
	release func()
}

func (b sharedBatch) Close() error {
	defer b.release()
	return b.BatchResults.Close()
}

type sharedTx struct {
	pgx.Tx
	release func()
}

func (t sharedTx) Commit(ctx context.Context) error {
	defer t.release()
	return t.Tx.Commit(ctx)
}

func (t sharedTx) Rollback(ctx context.Context) error {
	defer t.release()
	return t.Tx.Rollback(ctx)
}

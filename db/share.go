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

// hold is one call's slot of its key, from acquire until release. The
// zero hold holds nothing (the empty key, or a wait that failed).
type hold struct {
	table *slotTable
	slots *keySlots
	key   string
}

// acquire takes a slot of ctx's key into h, or fails with ctx's error (the
// caller then runs its call on the done context, which fails it as the
// inner Conn fails a call out of time). The empty key takes nothing.
func (s *slotTable) acquire(ctx context.Context, h *hold) error {
	key := s.keyOf(ctx)
	if key == "" {
		return nil
	}
	s.mu.Lock()
	ks, ok := s.slots[key]
	if !ok {
		ks = &keySlots{ch: make(chan struct{}, s.perKey)}
		s.slots[key] = ks
	}
	ks.users++
	s.mu.Unlock()
	select {
	case ks.ch <- struct{}{}:
		*h = hold{table: s, slots: ks, key: key}
		return nil
	case <-ctx.Done():
		s.leave(key, ks)
		return ctx.Err()
	}
}

// leave drops one user of key's slots, and the entry with its last.
func (s *slotTable) leave(key string, ks *keySlots) {
	s.mu.Lock()
	if ks.users--; ks.users == 0 {
		delete(s.slots, key)
	}
	s.mu.Unlock()
}

// release gives h's slot back; a second release (a second Close, a
// Rollback after the Commit) gives nothing.
func (h *hold) release() {
	if h.slots == nil {
		return
	}
	<-h.slots.ch
	h.table.leave(h.key, h.slots)
	h.slots = nil
}

// Exec implements DBTX.
func (s *sharedDB) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	var h hold
	if err := s.acquire(ctx, &h); err != nil {
		return s.inner.Exec(ctx, sql, args...)
	}
	defer h.release()
	return s.inner.Exec(ctx, sql, args...)
}

// Query implements DBTX; the slot is held until the rows are closed.
func (s *sharedDB) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	r := &sharedRows{}
	if err := s.acquire(ctx, &r.hold); err != nil {
		return s.inner.Query(ctx, sql, args...)
	}
	rows, err := s.inner.Query(ctx, sql, args...)
	if err != nil {
		r.release()
		return nil, err
	}
	r.Rows = rows
	return r, nil
}

// QueryRow implements DBTX; the slot is held until Scan.
func (s *sharedDB) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	r := &sharedRow{}
	if err := s.acquire(ctx, &r.hold); err != nil {
		return s.inner.QueryRow(ctx, sql, args...)
	}
	r.Row = s.inner.QueryRow(ctx, sql, args...)
	return r
}

// SendBatch implements DBTX; the slot is held until the batch is closed.
func (s *sharedDB) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	r := &sharedBatch{}
	if err := s.acquire(ctx, &r.hold); err != nil {
		return s.inner.SendBatch(ctx, b)
	}
	r.BatchResults = s.inner.SendBatch(ctx, b)
	return r
}

// Begin implements Conn; the slot is held until the transaction ends.
func (s *sharedDB) Begin(ctx context.Context) (pgx.Tx, error) {
	t := &sharedTx{}
	if err := s.acquire(ctx, &t.hold); err != nil {
		return s.inner.Begin(ctx)
	}
	tx, err := s.inner.Begin(ctx)
	if err != nil {
		t.release()
		return nil, err
	}
	t.Tx = tx
	return t, nil
}

type sharedRows struct {
	pgx.Rows
	hold
}

func (r *sharedRows) Close() { r.Rows.Close(); r.release() }

type sharedRow struct {
	pgx.Row
	hold
}

func (r *sharedRow) Scan(dest ...any) error {
	defer r.release()
	return r.Row.Scan(dest...)
}

type sharedBatch struct {
	pgx.BatchResults
	hold
}

func (b *sharedBatch) Close() error {
	defer b.release()
	return b.BatchResults.Close()
}

type sharedTx struct {
	pgx.Tx
	hold
}

func (t *sharedTx) Commit(ctx context.Context) error {
	defer t.release()
	return t.Tx.Commit(ctx)
}

func (t *sharedTx) Rollback(ctx context.Context) error {
	defer t.release()
	return t.Tx.Rollback(ctx)
}

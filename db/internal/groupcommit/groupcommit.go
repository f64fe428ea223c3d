// Package groupcommit runs one statement for many concurrent callers in
// shared transactions (group commit): while a batch is in flight, the
// callers that arrive queue, and the next batch takes all of them at once
// (up to a bound), so k callers pay one transaction, one commit and one WAL
// flush instead of k.
//
// At low load nothing waits and nothing changes: a caller that finds no
// batch in flight runs its statement alone, at once, in its own goroutine
// and context, exactly as it would without a committer.
//
// A batch is one transaction, all or nothing. When it fails as a whole --
// a member's statement failed, or the commit did -- no member takes a
// result from it: every member runs again alone, in its own context, so
// one member cannot fail another. The statements must allow that: a member
// whose batch's outcome is unknown (the connection dropped during the
// commit) runs its statement a second time, and that must give a clear
// answer (a duplicate key, zero rows), never a second effect.
package groupcommit

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Config is what a Committer runs.
type Config[P, R any] struct {
	// Name names the statement in spans (its sqlc query name).
	Name string
	// Alone runs one member's statement on its own, in the member's
	// context.
	Alone func(ctx context.Context, p P) (R, error)
	// Together runs the members' statements, in the order given, in one
	// transaction, and returns each member's row and the error of its own
	// that did not abort the transaction (zero rows, say) -- only once the
	// transaction has committed. A non-nil err means nothing of the batch
	// counts: its members run again alone.
	Together func(ctx context.Context, ps []P) (rows []R, errs []error, err error)
	// Compare orders a batch's members before it runs (the order in which
	// the statements take their locks, the same in every batch); nil
	// keeps arrival order.
	Compare func(a, b P) int
	// MaxBatch bounds the members of one batch.
	MaxBatch int
	// Tracer, when set, gives every batch a span linked to its members'
	// and every queued member a span of its wait.
	Tracer trace.Tracer
	// Observe, when set, is told of every transaction the committer ran:
	// its statements (1 for a member run alone) and whether it failed as a
	// whole (a batch whose members then ran alone).
	Observe func(statements int, failed bool)
}

// batchTimeout bounds a batch's transaction; a member also stops waiting
// when its own context ends, and a batch all of whose members have gone is
// cancelled.
const batchTimeout = time.Minute

// Committer is one statement's group commit. Its zero value is not usable:
// see New.
type Committer[P, R any] struct {
	cfg Config[P, R]

	mu sync.Mutex
	// busy: a member is running alone or a batch is being drained; the
	// callers that arrive meanwhile queue.
	busy  bool
	queue []*member[P, R]
}

// member is one queued caller.
type member[P, R any] struct {
	params P
	span   trace.Span // the wait, when tracing
	// batch is the batch that took the member (nil while queued), guarded
	// by the committer's mu.
	batch *batch
	// Set before done is closed: the member's row and error, or alone
	// when it must run on its own -- the only member of its batch, or one
	// of a batch that failed (err: why).
	row   R
	err   error
	alone bool
	done  chan struct{}
}

// batch is one batch's cancellation: cancelled when its last member has
// stopped waiting.
type batch struct {
	waiting int // guarded by the committer's mu
	cancel  context.CancelFunc
}

// New returns a committer of cfg's statement.
func New[P, R any](cfg Config[P, R]) *Committer[P, R] {
	if cfg.MaxBatch < 1 {
		cfg.MaxBatch = 1
	}
	return &Committer[P, R]{cfg: cfg}
}

// Do runs p's statement and returns its row: alone, at once, when no batch
// is in flight; otherwise in the next batch. When ctx ends while p waits,
// Do returns ctx's error; if a batch had already taken p, its statement
// may still commit (as a statement whose context is cancelled in flight
// may), and the caller must treat the outcome as unknown.
func (c *Committer[P, R]) Do(ctx context.Context, p P) (R, error) {
	c.mu.Lock()
	if !c.busy {
		c.busy = true
		c.mu.Unlock()
		defer c.release()
		return c.alone(ctx, p)
	}
	m := &member[P, R]{params: p, done: make(chan struct{})}
	if c.cfg.Tracer != nil {
		_, m.span = c.cfg.Tracer.Start(ctx, "group commit "+c.cfg.Name)
	}
	c.queue = append(c.queue, m)
	c.mu.Unlock()
	return c.wait(ctx, m)
}

// Queued is how many members wait for a batch (tests and metrics).
func (c *Committer[P, R]) Queued() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.queue)
}

// wait returns m's result once its batch has answered, runs m alone when
// the batch failed, and leaves when ctx ends.
func (c *Committer[P, R]) wait(ctx context.Context, m *member[P, R]) (R, error) {
	select {
	case <-m.done:
	case <-ctx.Done():
		c.leave(m)
		endSpan(m.span, ctx.Err())
		var zero R
		return zero, ctx.Err()
	}
	if m.alone {
		if m.span != nil && m.err != nil {
			m.span.AddEvent("batch failed: running alone", trace.WithAttributes(attribute.String("error", m.err.Error())))
		}
		row, err := c.alone(ctx, m.params)
		endSpan(m.span, err)
		return row, err
	}
	endSpan(m.span, nil) // the statement's own answer, not a failure of the wait
	return m.row, m.err
}

// alone runs p's statement on its own.
func (c *Committer[P, R]) alone(ctx context.Context, p P) (R, error) {
	row, err := c.cfg.Alone(ctx, p)
	c.observe(1, false)
	return row, err
}

// observe reports a transaction to Observe, when set.
func (c *Committer[P, R]) observe(statements int, failed bool) {
	if c.cfg.Observe != nil {
		c.cfg.Observe(statements, failed)
	}
}

// leave takes m out of the queue, or, when a batch has it already, tells
// the batch one member fewer waits (the last one to go cancels it).
func (c *Committer[P, R]) leave(m *member[P, R]) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m.batch == nil {
		c.queue = slices.DeleteFunc(c.queue, func(q *member[P, R]) bool { return q == m })
		return
	}
	m.batch.waiting--
	if m.batch.waiting == 0 {
		m.batch.cancel()
	}
}

// release follows a statement run alone: the members that queued meanwhile
// go to a goroutine that drains the queue; with none, the committer is
// idle again.
func (c *Committer[P, R]) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		c.busy = false
		return
	}
	go c.drain()
}

// drain runs batches until the queue is empty, one at a time: the members
// that arrive while one runs make the next.
func (c *Committer[P, R]) drain() {
	for {
		ms, b, ctx := c.take()
		if ms == nil {
			return
		}
		c.run(ctx, b, ms)
	}
}

// take moves up to MaxBatch queued members into a new batch, or marks the
// committer idle when none waits.
func (c *Committer[P, R]) take() ([]*member[P, R], *batch, context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := min(len(c.queue), c.cfg.MaxBatch)
	if n == 0 {
		c.busy = false
		return nil, nil, nil
	}
	ms := slices.Clone(c.queue[:n])
	c.queue = slices.Delete(c.queue, 0, n)
	ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
	b := &batch{waiting: n, cancel: cancel}
	for _, m := range ms {
		m.batch = b
	}
	return ms, b, ctx
}

// run answers a batch's members. A single member runs alone, on its own
// context; more run Together, in Compare order, and take their results
// when it committed, or run alone when it did not.
func (c *Committer[P, R]) run(ctx context.Context, b *batch, ms []*member[P, R]) {
	defer b.cancel()
	if len(ms) == 1 {
		ms[0].alone = true
		close(ms[0].done)
		return
	}
	if c.cfg.Compare != nil {
		slices.SortStableFunc(ms, func(x, y *member[P, R]) int { return c.cfg.Compare(x.params, y.params) })
	}
	ctx, span := c.batchSpan(ctx, ms)
	ps := make([]P, len(ms))
	for i, m := range ms {
		ps[i] = m.params
	}
	rows, errs, err := c.cfg.Together(ctx, ps)
	c.observe(len(ps), err != nil)
	endSpan(span, err)
	for i, m := range ms {
		if err != nil {
			m.alone, m.err = true, err
		} else {
			m.row, m.err = rows[i], errs[i]
		}
		close(m.done)
	}
}

// batchSpan starts a batch's span, a root linked to its members' waits
// (each linked back), when tracing.
func (c *Committer[P, R]) batchSpan(ctx context.Context, ms []*member[P, R]) (context.Context, trace.Span) {
	if c.cfg.Tracer == nil {
		return ctx, nil
	}
	links := make([]trace.Link, 0, len(ms))
	for _, m := range ms {
		if m.span != nil {
			links = append(links, trace.Link{SpanContext: m.span.SpanContext()})
		}
	}
	ctx, span := c.cfg.Tracer.Start(ctx, "group commit "+c.cfg.Name+" batch", trace.WithNewRoot(), trace.WithLinks(links...),
		trace.WithAttributes(attribute.Int("uploadedfile.group_commit.members", len(ms))))
	for _, m := range ms {
		if m.span != nil {
			m.span.AddLink(trace.Link{SpanContext: span.SpanContext()})
		}
	}
	return ctx, span
}

// endSpan ends a span (nil: not tracing), marking it failed for err.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "failed")
	}
	span.End()
}

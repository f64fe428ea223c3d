package groupcommit_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/uploadedfile/uploadedfile/db/internal/groupcommit"
)

// statement is a test's statement: it records every run, alone or
// together, and can hold the runs until the test releases them.
type statement struct {
	mu       sync.Mutex
	alone    []int   // members run alone, in order
	together [][]int // batches, as run
	hold     chan struct{}
	started  chan int // each run's first member, once it started
	fail     func(ps []int) error
	observed []string // Observe's reports: "n" or "n failed"
}

func newStatement() *statement {
	return &statement{started: make(chan int, 1000)}
}

func (s *statement) config(max int) groupcommit.Config[int, string] {
	return groupcommit.Config[int, string]{
		Name: "Test",
		Alone: func(ctx context.Context, p int) (string, error) {
			s.mu.Lock()
			s.alone = append(s.alone, p)
			hold := s.hold
			s.mu.Unlock()
			s.started <- p
			if hold != nil {
				select {
				case <-hold:
				case <-ctx.Done():
					return "", ctx.Err()
				}
			}
			return fmt.Sprintf("alone %d", p), nil
		},
		Together: func(ctx context.Context, ps []int) ([]string, []error, error) {
			s.mu.Lock()
			s.together = append(s.together, slices.Clone(ps))
			fail := s.fail
			s.mu.Unlock()
			if fail != nil {
				if err := fail(ps); err != nil {
					return nil, nil, err
				}
			}
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			rows, errs := make([]string, len(ps)), make([]error, len(ps))
			for i, p := range ps {
				rows[i] = fmt.Sprintf("batch %d", p)
				if p%10 == 7 {
					errs[i] = errNoRow // a member's own answer
				}
			}
			return rows, errs, nil
		},
		Compare:  cmp.Compare[int],
		MaxBatch: max,
		Observe: func(n int, failed bool) {
			s.mu.Lock()
			defer s.mu.Unlock()
			if failed {
				s.observed = append(s.observed, fmt.Sprintf("%d failed", n))
			} else {
				s.observed = append(s.observed, fmt.Sprint(n))
			}
		},
	}
}

// observations snapshots Observe's reports, sorted.
func (s *statement) observations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(slices.Values(s.observed))
}

var errNoRow = errors.New("no row")

// runs snapshots what ran.
func (s *statement) runs() (alone []int, together [][]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.alone), slices.Clone(s.together)
}

// queue starts Do for each p in its own goroutine once a leader is held,
// and waits until all of them wait in the queue.
func queue(t *testing.T, c *groupcommit.Committer[int, string], ctx context.Context, ps ...int) map[int]chan answer {
	t.Helper()
	out := map[int]chan answer{}
	for _, p := range ps {
		ch := make(chan answer, 1)
		out[p] = ch
		go func() { row, err := c.Do(ctx, p); ch <- answer{row, err} }()
	}
	require.Eventually(t, func() bool { return c.Queued() == len(ps) }, 5*time.Second, time.Millisecond)
	return out
}

type answer struct {
	row string
	err error
}

// lead starts a leader (member p, run alone) that holds until release is
// closed, and waits until it runs.
func lead(t *testing.T, s *statement, c *groupcommit.Committer[int, string], p int) (release func(), done chan answer) {
	t.Helper()
	hold := make(chan struct{})
	s.mu.Lock()
	s.hold = hold
	s.mu.Unlock()
	done = make(chan answer, 1)
	go func() { row, err := c.Do(context.Background(), p); done <- answer{row, err} }()
	require.Equal(t, p, <-s.started)
	return func() {
		s.mu.Lock()
		s.hold = nil
		s.mu.Unlock()
		close(hold)
	}, done
}

func TestAloneWhenNothingIsInFlight(t *testing.T) {
	s := newStatement()
	c := groupcommit.New(s.config(32))
	for p := range 5 {
		row, err := c.Do(context.Background(), p)
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("alone %d", p), row)
	}
	alone, together := s.runs()
	require.Equal(t, []int{0, 1, 2, 3, 4}, alone, "one after another, each runs alone at once")
	require.Empty(t, together)
}

func TestCallersThatArriveMeanwhileShareABatch(t *testing.T) {
	s := newStatement()
	c := groupcommit.New(s.config(32))
	release, leader := lead(t, s, c, 100)
	waiting := queue(t, c, context.Background(), 5, 3, 9, 1, 17)
	release()
	require.Equal(t, answer{row: "alone 100"}, <-leader)
	for p, ch := range waiting {
		a := <-ch
		require.Equal(t, fmt.Sprintf("batch %d", p), a.row, "each member gets its own row")
		if p == 17 {
			require.ErrorIs(t, a.err, errNoRow, "a member's own answer reaches it alone")
		} else {
			require.NoError(t, a.err)
		}
	}
	alone, together := s.runs()
	require.Equal(t, []int{100}, alone)
	require.Equal(t, [][]int{{1, 3, 5, 9, 17}}, together, "one batch, in Compare order")
	require.Equal(t, []string{"1", "5"}, s.observations(), "two transactions: the leader's, the batch's")
}

func TestMaxBatchBoundsABatch(t *testing.T) {
	s := newStatement()
	c := groupcommit.New(s.config(2))
	release, leader := lead(t, s, c, 100)
	waiting := queue(t, c, context.Background(), 1, 2, 3, 4, 5)
	release()
	<-leader
	for _, ch := range waiting {
		require.NoError(t, (<-ch).err)
	}
	alone, together := s.runs()
	// Five members (queued in whatever order their goroutines ran), at
	// most two a batch: two batches of two, then the last one on its own
	// (a batch of one runs alone, in its member's context).
	require.Len(t, together, 2)
	require.Len(t, alone, 2)
	require.Equal(t, 100, alone[0])
	all := []int{alone[1]}
	for _, b := range together {
		require.Len(t, b, 2)
		require.True(t, slices.IsSorted(b))
		all = append(all, b...)
	}
	slices.Sort(all)
	require.Equal(t, []int{1, 2, 3, 4, 5}, all)
}

func TestAFailedBatchRunsEveryMemberAlone(t *testing.T) {
	s := newStatement()
	s.fail = func([]int) error { return errors.New("quota exceeded for one member") }
	c := groupcommit.New(s.config(32))
	release, leader := lead(t, s, c, 100)
	waiting := queue(t, c, context.Background(), 1, 2, 3)
	release()
	<-leader
	for p, ch := range waiting {
		a := <-ch
		require.NoError(t, a.err)
		require.Equal(t, fmt.Sprintf("alone %d", p), a.row, "the batch's failure is no member's answer")
	}
	alone, together := s.runs()
	require.Equal(t, [][]int{{1, 2, 3}}, together)
	slices.Sort(alone)
	require.Equal(t, []int{1, 2, 3, 100}, alone)
	require.Equal(t, []string{"1", "1", "1", "1", "3 failed"}, s.observations())
}

func TestAMemberThatLeavesTheQueueIsNotRun(t *testing.T) {
	s := newStatement()
	c := groupcommit.New(s.config(32))
	release, leader := lead(t, s, c, 100)
	stay := queue(t, c, context.Background(), 1, 3)
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() { _, err := c.Do(ctx, 2); gone <- err }()
	require.Eventually(t, func() bool { return c.Queued() == 3 }, 5*time.Second, time.Millisecond)
	cancel()
	require.ErrorIs(t, <-gone, context.Canceled)
	require.Equal(t, 2, c.Queued(), "it left the queue")
	release()
	<-leader
	for _, ch := range stay {
		require.NoError(t, (<-ch).err)
	}
	_, together := s.runs()
	require.Equal(t, [][]int{{1, 3}}, together)
}

func TestABatchWhoseMembersAllLeftIsCancelled(t *testing.T) {
	s := newStatement()
	entered, cancelled := make(chan struct{}), make(chan error, 1)
	cfg := s.config(32)
	together := cfg.Together
	cfg.Together = func(ctx context.Context, ps []int) ([]string, []error, error) {
		close(entered)
		<-ctx.Done() // a statement that hangs until its context ends
		cancelled <- ctx.Err()
		return together(ctx, ps)
	}
	c := groupcommit.New(cfg)
	release, leader := lead(t, s, c, 100)
	ctx, cancel := context.WithCancel(context.Background())
	waiting := queue(t, c, ctx, 1, 2)
	release()
	<-leader
	<-entered
	cancel()
	for _, ch := range waiting {
		require.ErrorIs(t, (<-ch).err, context.Canceled)
	}
	require.ErrorIs(t, <-cancelled, context.Canceled, "the batch's own context ended with its last member")
}

func TestManyCallersAllAnswered(t *testing.T) {
	s := newStatement()
	c := groupcommit.New(s.config(8))
	var wg sync.WaitGroup
	errs := make(chan error, 400)
	for p := range 400 {
		wg.Go(func() {
			row, err := c.Do(context.Background(), p)
			if p%10 != 7 && err != nil || row != fmt.Sprintf("alone %d", p) && row != fmt.Sprintf("batch %d", p) {
				errs <- fmt.Errorf("member %d: %q, %w", p, row, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	alone, together := s.runs()
	seen := slices.Clone(alone)
	for _, b := range together {
		require.LessOrEqual(t, len(b), 8)
		require.True(t, slices.IsSorted(b))
		seen = append(seen, b...)
	}
	slices.Sort(seen)
	require.Len(t, seen, 400)
	for i, p := range seen {
		require.Equal(t, i, p, "every member ran exactly once")
	}
	require.Zero(t, c.Queued())
}

func TestSpansLinkMembersAndTheirBatch(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	s := newStatement()
	cfg := s.config(32)
	cfg.Tracer = tp.Tracer("test")
	c := groupcommit.New(cfg)
	release, leader := lead(t, s, c, 100)
	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	waiting := queue(t, c, ctx, 1, 2)
	release()
	<-leader
	for _, ch := range waiting {
		require.NoError(t, (<-ch).err)
	}
	parent.End()
	var batch sdktrace.ReadOnlySpan
	var members []sdktrace.ReadOnlySpan
	for _, sp := range rec.Ended() {
		switch sp.Name() {
		case "group commit Test batch":
			batch = sp
		case "group commit Test":
			members = append(members, sp)
		}
	}
	require.NotNil(t, batch)
	require.Len(t, members, 2, "one span per queued member; the leader ran alone")
	require.False(t, batch.Parent().IsValid(), "a batch is its own root")
	require.Len(t, batch.Links(), 2)
	for _, m := range members {
		require.Equal(t, parent.SpanContext().TraceID(), m.SpanContext().TraceID(), "a member's wait is in its request's trace")
		require.Len(t, m.Links(), 1)
		require.Equal(t, batch.SpanContext(), m.Links()[0].SpanContext)
	}
}

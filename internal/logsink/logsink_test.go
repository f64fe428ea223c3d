package logsink

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder keeps every write(2) the sink makes, one entry each.
type recorder struct {
	mu     sync.Mutex
	writes []string
	fail   error
}

func (r *recorder) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return 0, r.fail
	}
	r.writes = append(r.writes, string(p))
	return len(p), nil
}

func (r *recorder) output() (string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.Join(r.writes, ""), len(r.writes)
}

func TestDeferredLinesWaitAndGoOutTogether(t *testing.T) {
	rec := &recorder{}
	s := New(rec, time.Hour, 1<<10)
	for i := range 3 {
		_, err := fmt.Fprintf(s.Deferred(), "access %d\n", i)
		require.NoError(t, err)
	}
	out, n := rec.output()
	require.Zero(t, n, "deferred lines wait for the limit or the delay")
	require.Empty(t, out)
	require.NoError(t, s.Close())
	out, n = rec.output()
	require.Equal(t, "access 0\naccess 1\naccess 2\n", out)
	require.Equal(t, 1, n, "the waiting lines go out in one write")
}

func TestImmediateLineWritesWhatWaitsFirst(t *testing.T) {
	rec := &recorder{}
	s := New(rec, time.Hour, 1<<10)
	fmt.Fprint(s.Deferred(), "access 1\n")
	fmt.Fprint(s.Deferred(), "access 2\n")
	_, err := fmt.Fprint(s.Immediate(), "warning\n")
	require.NoError(t, err)
	out, n := rec.output()
	require.Equal(t, "access 1\naccess 2\nwarning\n", out, "the output keeps the order lines were logged in")
	require.Equal(t, 2, n, "the waiting batch, then the line, before Write returns")
	fmt.Fprint(s.Immediate(), "error\n")
	_, n = rec.output()
	require.Equal(t, 3, n, "with nothing waiting a line is one write")
}

func TestDeferredLinesGoOutAtTheLimit(t *testing.T) {
	rec := &recorder{}
	line := strings.Repeat("x", 99) + "\n" // 100 bytes
	s := New(rec, time.Hour, 250)
	for range 2 {
		fmt.Fprint(s.Deferred(), line)
	}
	_, n := rec.output()
	require.Zero(t, n, "200 bytes wait under a 250-byte limit")
	fmt.Fprint(s.Deferred(), line)
	out, n := rec.output()
	require.Equal(t, 1, n, "the third line would pass the limit: the two waiting go out")
	require.Equal(t, strings.Repeat(line, 2), out)

	big := strings.Repeat("y", 299) + "\n"
	fmt.Fprint(s.Deferred(), big)
	out, n = rec.output()
	require.Equal(t, 3, n, "a line as long as the limit goes out at once, after the one waiting")
	require.Equal(t, strings.Repeat(line, 3)+big, out)
}

func TestDeferredLinesGoOutAfterTheDelay(t *testing.T) {
	rec := &recorder{}
	s := New(rec, 20*time.Millisecond, 1<<10)
	fmt.Fprint(s.Deferred(), "access 1\n")
	require.Eventually(t, func() bool { out, _ := rec.output(); return out == "access 1\n" },
		5*time.Second, 5*time.Millisecond, "a quiet server's line goes out after the delay")
	fmt.Fprint(s.Deferred(), "access 2\n")
	require.Eventually(t, func() bool { out, _ := rec.output(); return out == "access 1\naccess 2\n" },
		5*time.Second, 5*time.Millisecond, "the timer arms again for the next line")
}

func TestCloseWritesWhatWaitsAndStopsWaiting(t *testing.T) {
	rec := &recorder{}
	s := New(rec, time.Hour, 1<<10)
	fmt.Fprint(s.Deferred(), "access 1\n")
	require.NoError(t, s.Close())
	out, _ := rec.output()
	require.Equal(t, "access 1\n", out)
	fmt.Fprint(s.Deferred(), "access 2\n")
	out, _ = rec.output()
	require.Equal(t, "access 1\naccess 2\n", out, "after Close a deferred line goes out at once")
}

func TestBatchWriteErrorIsReported(t *testing.T) {
	rec := &recorder{}
	s := New(rec, 10*time.Millisecond, 1<<10)
	broken := errors.New("disk full")
	rec.mu.Lock()
	rec.fail = broken
	rec.mu.Unlock()
	fmt.Fprint(s.Deferred(), "access 1\n")
	// The timer's batch fails with no caller to tell; the next Write does.
	require.Eventually(t, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.err != nil
	}, 5*time.Second, 5*time.Millisecond)
	_, err := fmt.Fprint(s.Deferred(), "access 2\n")
	require.ErrorIs(t, err, broken)
	_, err = fmt.Fprint(s.Immediate(), "warning\n")
	require.ErrorIs(t, err, broken, "an immediate line over a failing writer fails as it is written")
}

// Lines from many goroutines through both doors come out whole, each
// once, and each goroutine's lines in the order it wrote them.
func TestConcurrentLinesStayWholeAndOrdered(t *testing.T) {
	var out bytes.Buffer
	var mu sync.Mutex
	w := writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	})
	s := New(w, time.Millisecond, 512)
	const writers, lines = 8, 500
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range lines {
				door := s.Deferred()
				if i%50 == 0 {
					door = s.Immediate()
				}
				fmt.Fprintf(door, "g%d line %04d\n", g, i)
			}
		})
	}
	wg.Wait()
	require.NoError(t, s.Close())
	next := make([]int, writers)
	got := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	require.Len(t, got, writers*lines)
	for _, l := range got {
		var g, i int
		_, err := fmt.Sscanf(l, "g%d line %d", &g, &i)
		require.NoError(t, err, "a whole line: %q", l)
		require.Equal(t, next[g], i, "goroutine %d's lines in order", g)
		next[g]++
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

package main

import (
	"bytes"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// stats is a load run's outcome.
type stats struct {
	n        int
	errors   int64
	firstErr error // the first failed call's error, for the report's message
	elapsed  time.Duration
	p50, p99 time.Duration
	dbCPU    time.Duration // PostgreSQL's CPU per call, where a load measures it
	// The server process's scheduler accounting per call, where a load
	// measures it (withSched).
	server perCall
}

func (s stats) rps() float64 { return float64(s.n) / s.elapsed.Seconds() }

// rounds is how many times each throughput figure is measured, the loads
// of one comparison interleaved; the median round is reported (this
// machine is shared and noisy) and, for the compared pairs, the worst
// round's ratio beside the median one.
const rounds = 5

// pairRounds is how many rounds a no-difference pair runs: two servers
// started alike, one with a feature on, judged against a line (0.9×,
// 0.95×) that sits within one short round's noise on a 2-core host. Those
// pairs run more rounds, each of twice the calls (pairCalls), so that the
// median moves with the feature's cost rather than with the machine.
const pairRounds = 9

// pairCalls is the call count of one round of a no-difference pair.
func pairCalls(size int) int { return 2 * count(size) }

// compareRounds runs the loads of one comparison in n interleaved rounds
// and returns every round: out[round][load], in roundOrder.
func compareRounds(n int, loads ...func() stats) [][]stats {
	out := make([][]stats, n)
	for i := range n {
		out[i] = make([]stats, len(loads))
		for _, j := range roundOrder(i, len(loads)) {
			out[i][j] = loads[j]()
		}
	}
	return out
}

// roundOrder is the order in which round i runs n compared loads: each
// round starts one load later than the one before, so no load always
// follows the same other one (a load after a disk-heavy or a CPU-heavy one
// inherits its aftermath, and a load that always runs second pays it in
// every round).
func roundOrder(i, n int) []int {
	order := make([]int, n)
	for k := range order {
		order[k] = (i + k) % n
	}
	return order
}

// medians is, for each load, its median round by throughput.
func medians(rs [][]stats) []stats {
	out := make([]stats, len(rs[0]))
	for j := range out {
		col := make([]stats, len(rs))
		for i := range rs {
			col[i] = rs[i][j]
		}
		sort.Slice(col, func(a, b int) bool { return col[a].rps() < col[b].rps() })
		out[j] = col[len(col)/2]
	}
	return out
}

// ratioDist is a throughput ratio over rounds: each round's ours/peer.
type ratioDist struct {
	median, worst float64
	n             int
}

// ratioOf is load a's throughput over load b's, round by round.
func ratioOf(rs [][]stats, a, b int) ratioDist {
	rat := make([]float64, len(rs))
	for i, r := range rs {
		rat[i] = r[a].rps() / r[b].rps()
	}
	sort.Float64s(rat)
	return ratioDist{median: rat[len(rat)/2], worst: rat[0], n: len(rat)}
}

// p50RatioOf is load a's p50 latency over load b's, round by round; lower
// is better, so the worst round is the highest ratio.
func p50RatioOf(rs [][]stats, a, b int) ratioDist {
	rat := make([]float64, len(rs))
	for i, r := range rs {
		rat[i] = float64(r[a].p50) / float64(r[b].p50)
	}
	return costRatios(rat)
}

// costRatios is the distribution of round ratios where lower is better:
// the median, and the highest as the worst. It sorts rat.
func costRatios(rat []float64) ratioDist {
	sort.Float64s(rat)
	return ratioDist{median: rat[len(rat)/2], worst: rat[len(rat)-1], n: len(rat)}
}

// String reads "0.97× (worst 0.91× of 5)".
func (d ratioDist) String() string {
	return fmt.Sprintf("%.2f× (worst %.2f× of %d)", d.median, d.worst, d.n)
}

// failed describes the failed calls of loads: how many and the first.
func failed(ss ...stats) error {
	var n int64
	var first error
	for _, s := range ss {
		n += s.errors
		if first == nil {
			first = s.firstErr
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d failed calls, the first: %w", n, first)
}

// measure runs the loads of one comparison in interleaved rounds
// (compareRounds) and returns every round and each load's median round
// (medians); a failed call in any round of any load fails it, named what.
func measure(what string, loads ...func() stats) (rs [][]stats, m []stats, err error) {
	return measureRounds(what, rounds, loads...)
}

// measureRounds is measure in n rounds (pairRounds for the no-difference
// pairs).
func measureRounds(what string, n int, loads ...func() stats) (rs [][]stats, m []stats, err error) {
	rs = compareRounds(n, loads...)
	var all []stats
	for _, r := range rs {
		all = append(all, r...)
	}
	if err := failed(all...); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return rs, medians(rs), nil
}

// load runs total calls of fn over clients workers and measures them, on
// connections of its own: the ones an earlier load left idle are closed
// first, so no load inherits a connection another shaped (see
// docs/performance-notes.md, "Each load on fresh connections").
func load(clients, total int, fn func(i int) error) stats {
	client.CloseIdleConnections()
	lat := make([]time.Duration, total)
	var next, errs atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				t := time.Now()
				if err := fn(i); err != nil {
					errs.Add(1)
					first.CompareAndSwap(nil, err)
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	s := stats{n: total, errors: errs.Load(), elapsed: time.Since(start)}
	if err, ok := first.Load().(error); ok {
		s.firstErr = err
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	s.p50, s.p99 = lat[total/2], lat[min(total-1, total*99/100)]
	return s
}

// payload is size bytes of CSV-shaped text (valid for every check).
func payload(size int) []byte {
	line := []byte("id,name,amount,note\n")
	b := bytes.Repeat(line, size/len(line)+1)[:size]
	b[len(b)-1] = '\n'
	return b
}

func count(size int) int {
	switch {
	case size >= 10<<20:
		return 48
	case size >= 1<<20:
		return 320
	default:
		return 1000
	}
}

func human(size int) string {
	if size >= 1<<20 {
		return fmt.Sprintf("%d MiB", size>>20)
	}
	return fmt.Sprintf("%d KiB", size>>10)
}

func latencies(s stats) string {
	return fmt.Sprintf("p50 %s, p99 %s (%.0f req/s)", s.p50.Round(time.Microsecond), s.p99.Round(time.Microsecond), s.rps())
}

// clientsLabel spells a client count: "1 client", "8 clients".
func clientsLabel(n int) string {
	if n == 1 {
		return "1 client"
	}
	return fmt.Sprintf("%d clients", n)
}

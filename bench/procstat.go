package main

import (
	"cmp"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sched is what the scheduler accounted to a set of threads so far
// (/proc/<pid>/task/<tid>/schedstat): time on a CPU, time runnable but
// waiting for one, and the times they were switched in.
type sched struct {
	run, wait time.Duration
	slices    int64
}

func (s sched) sub(o sched) sched {
	return sched{run: s.run - o.run, wait: s.wait - o.wait, slices: s.slices - o.slices}
}

// schedOf sums the scheduler's accounting over every thread of pid (a
// thread that exited takes its share with it; Go keeps its threads).
func schedOf(pid int) sched {
	var s sched
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	tasks, _ := os.ReadDir(dir)
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) < 3 {
			continue
		}
		run, _ := strconv.ParseInt(f[0], 10, 64)
		wait, _ := strconv.ParseInt(f[1], 10, 64)
		n, _ := strconv.ParseInt(f[2], 10, 64)
		s.run += time.Duration(run)
		s.wait += time.Duration(wait)
		s.slices += n
	}
	return s
}

// perCall is the accounting s spread over n calls.
type perCall struct {
	run, wait time.Duration
	switches  float64
	db        time.Duration // every PostgreSQL process's CPU time
	client    time.Duration // the bench's own threads on a CPU: the load generator
	// grouped is the statements per transaction of the server's group
	// commit during the load (0: none ran, or the server is not ours).
	grouped float64
}

// withSched wraps a load against p's server process: its stats carry the
// scheduler's accounting of that process per call (every thread's time on
// a CPU -- the process's CPU time, Go runtime and kernel included -- the
// time its threads waited runnable, and how often they were switched in)
// PostgreSQL's CPU per call (postgresProcesses: the bench's loads are the
// database's only work while they run) and the load generator's (this
// process's threads on a CPU): the three that share the machine's cores.
// For an uploadedfile server it also reads, from its /metrics, how many
// statements its group commit put in a transaction meanwhile.
func withSched(p *proc, fn func() stats) func() stats {
	return func() stats {
		pid, self := p.cmd.Process.Pid, os.Getpid()
		statements, transactions := grouped(p)
		before, dbBefore, clientBefore := schedOf(pid), postgresProcesses(), schedOf(self)
		s := fn()
		d, db, client := schedOf(pid).sub(before), postgresProcesses().since(dbBefore), schedOf(self).sub(clientBefore)
		statementsAfter, transactionsAfter := grouped(p)
		if n := time.Duration(s.n); n > 0 {
			s.server = perCall{run: d.run / n, wait: d.wait / n, switches: float64(d.slices) / float64(s.n), db: db / n, client: client.run / n}
			if t := transactionsAfter - transactions; t > 0 {
				s.server.grouped = (statementsAfter - statements) / t
			}
		}
		return s
	}
}

// grouped reads the group commit's totals from an uploadedfile server's
// /metrics (both statements): statements and the transactions they ran
// in. A server without metrics, or one that is not ours, has none.
func grouped(p *proc) (statements, transactions float64) {
	if p.metrics == "" {
		return 0, 0
	}
	text, err := metricsText(p)
	if err != nil {
		return 0, 0
	}
	return sumOf(text, "uploadedfile_group_commit_statements_sum{"), sumOf(text, "uploadedfile_group_commit_statements_count{")
}

// medianSched is load j's per-call accounting, each figure the median
// over the rounds.
func medianSched(rs [][]stats, j int) perCall {
	return perCall{
		run:      medianOf(rs, j, func(p perCall) time.Duration { return p.run }),
		wait:     medianOf(rs, j, func(p perCall) time.Duration { return p.wait }),
		switches: medianOf(rs, j, func(p perCall) float64 { return p.switches }),
		db:       medianOf(rs, j, func(p perCall) time.Duration { return p.db }),
		client:   medianOf(rs, j, func(p perCall) time.Duration { return p.client }),
		grouped:  medianOf(rs, j, func(p perCall) float64 { return p.grouped }),
	}
}

// medianOf is the median over the rounds of one figure of load j's
// accounting.
func medianOf[T cmp.Ordered](rs [][]stats, j int, figure func(perCall) T) T {
	xs := make([]T, len(rs))
	for i, r := range rs {
		xs[i] = figure(r[j].server)
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// postgresCPU is the time on a CPU of every process named postgres, each
// by its pid and start time: a pid the kernel hands to a later process is
// another process.
type postgresCPU map[processID]time.Duration

// processID tells a process from any other this boot: its pid and its
// start time in clock ticks since boot (/proc/<pid>/stat's 22nd field).
type processID struct {
	pid   int
	start int64
}

// postgresProcesses reads every postgres process's time on a CPU so far,
// in nanoseconds (schedOf; the user and system times of /proc/<pid>/stat
// come in 10 ms ticks, and a load spread over 32 backends lost up to a
// tick on each).
func postgresProcesses() postgresCPU {
	cpu := postgresCPU{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		// A process gone before its threads are read has none: left out,
		// as one that exited is (since).
		if id, ok := postgresProcess(pid); ok {
			if run := schedOf(pid).run; run > 0 {
				cpu[id] = run
			}
		}
	}
	return cpu
}

// postgresProcess tells who the process pid is if it is named postgres.
func postgresProcess(pid int) (processID, bool) {
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	comm, err := os.ReadFile(filepath.Join(dir, "comm"))
	if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
		return processID{}, false
	}
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return processID{}, false
	}
	s := string(stat)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return processID{}, false
	}
	start, _ := strconv.ParseInt(f[19], 10, 64)
	return processID{pid: pid, start: start}, true
}

// since is the CPU time PostgreSQL spent between before and c: each
// process's time less what it had at before, a process started since
// counted whole. A process that exited since is left out: its time since
// before is lost, where a sum over the processes alive would subtract all
// it ever had -- and the pools close idle connections (a backend idle
// since the last round of its server ends in the middle of another's).
func (c postgresCPU) since(before postgresCPU) time.Duration {
	var d time.Duration
	for id, now := range c {
		d += now - before[id]
	}
	return d
}

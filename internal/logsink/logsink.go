// Package logsink puts two kinds of log lines on one writer: lines that
// may wait, gathered and written together, and lines that may not, written
// at once.
//
// The server writes one access line per request. Written one write(2)
// each, the lines cost every small request a system call and wake whoever
// reads the output (a log shipper, a terminal) once per request. Through
// Deferred they are gathered and written when Limit bytes are waiting or
// Delay has passed since the first of them, whichever comes first. Every
// other line goes through Immediate: the waiting lines are written first,
// then the line itself, before Write returns, so the output keeps the
// order in which lines were logged and a warning is out before the process
// can die of what it warns about.
//
// What a deferred line risks: a process killed outright (SIGKILL, a
// runtime crash) loses the lines that were waiting, at most Delay's worth.
// Close writes them on an orderly stop.
package logsink

import (
	"io"
	"sync"
	"time"
)

// Defaults of New: at 10,000 requests a second a 32 KiB batch is about 13
// ms of access lines, so the limit decides under load and the delay when
// the server is quiet.
const (
	DefaultDelay = 100 * time.Millisecond
	DefaultLimit = 32 << 10
)

// Sink serializes the lines of its two doors onto one writer. It is safe
// for concurrent use; the zero value is not usable (New).
type Sink struct {
	mu     sync.Mutex
	w      io.Writer
	buf    []byte // deferred lines not yet written
	limit  int
	delay  time.Duration
	timer  *time.Timer // armed by the first line of buf: writes it delay later
	closed bool        // Close ran: every line is written at once
	err    error       // the last failed write of a batch, for the next caller
}

// New returns a sink over w that writes deferred lines when limit bytes
// wait or delay has passed (zero or less: DefaultLimit, DefaultDelay).
func New(w io.Writer, delay time.Duration, limit int) *Sink {
	if delay <= 0 {
		delay = DefaultDelay
	}
	if limit <= 0 {
		limit = DefaultLimit
	}
	s := &Sink{w: w, limit: limit, delay: delay, buf: make([]byte, 0, limit)}
	s.timer = time.AfterFunc(time.Hour, s.expire)
	s.timer.Stop()
	return s
}

// Deferred is the door of lines that may wait (access lines). Each Write
// must be whole lines, as a slog handler writes them; the sink copies p.
// A write error of an earlier batch is returned by the next Write.
func (s *Sink) Deferred() io.Writer { return deferredDoor{s} }

// Immediate is the door of every other line: the waiting lines are written
// first, then p, before Write returns.
func (s *Sink) Immediate() io.Writer { return immediateDoor{s} }

// Close writes the waiting lines and stops waiting: lines written to
// either door afterwards go out at once.
func (s *Sink) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.timer.Stop()
	return s.flushLocked()
}

type deferredDoor struct{ s *Sink }

func (d deferredDoor) Write(p []byte) (int, error) {
	s := d.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.err; err != nil {
		s.err = nil
		return 0, err
	}
	if s.closed || len(p) >= s.limit {
		return s.writeThroughLocked(p)
	}
	if len(s.buf)+len(p) > s.limit {
		if err := s.flushLocked(); err != nil {
			return 0, err
		}
	}
	if len(s.buf) == 0 {
		s.timer.Reset(s.delay)
	}
	s.buf = append(s.buf, p...)
	return len(p), nil
}

type immediateDoor struct{ s *Sink }

func (i immediateDoor) Write(p []byte) (int, error) {
	s := i.s
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writeThroughLocked(p)
}

// writeThroughLocked writes the waiting lines, then p.
func (s *Sink) writeThroughLocked(p []byte) (int, error) {
	if err := s.flushLocked(); err != nil {
		return 0, err
	}
	return s.w.Write(p)
}

// flushLocked writes buf. A failed batch is dropped (the writer is not
// retried with half a batch) and its error returned.
func (s *Sink) flushLocked() error {
	if len(s.buf) == 0 {
		return nil
	}
	_, err := s.w.Write(s.buf)
	s.buf = s.buf[:0]
	return err
}

// expire is the timer's: the first waiting line has waited delay. A timer
// that fires after its batch went out (full, or before an immediate line)
// writes the next batch early, never late.
func (s *Sink) expire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.flushLocked(); err != nil {
		s.err = err
	}
}

package main

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
)

// serverLogs holds the tail of every server the driver started, stopped
// ones included, so a section whose calls failed can say what the servers
// logged about it: their output is otherwise never shown, and a failed
// section's servers are stopped before its error reaches run.
var serverLogs logTails

// tailBytes is how much of each server's output is kept.
const tailBytes = 64 << 10

// logTails are the servers' output tails, in start order.
type logTails struct {
	mu    sync.Mutex
	tails []*logTail
}

// add returns a new tail for a server called name.
func (l *logTails) add(name string) *logTail {
	t := &logTail{name: name}
	l.mu.Lock()
	l.tails = append(l.tails, t)
	l.mu.Unlock()
	return t
}

// report is the last n lines of each server's output that report an
// error or a warning (the servers log JSON lines with a level; a panic's
// first line too), one block per server, or "" when there are none.
func (l *logTails) report(n int) string {
	l.mu.Lock()
	tails := append([]*logTail(nil), l.tails...)
	l.mu.Unlock()
	var b strings.Builder
	for i, t := range tails {
		lines := t.problems(n)
		if len(lines) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s (server %d of %d started) logged:", t.name, i+1, len(tails))
		for _, line := range lines {
			b.WriteString("\n  ")
			b.WriteString(line)
		}
	}
	return b.String()
}

// logTail is an io.Writer keeping the last tailBytes of what it is given.
type logTail struct {
	name string
	mu   sync.Mutex
	buf  []byte
}

// Write keeps p, dropping the oldest output past twice tailBytes.
func (t *logTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 2*tailBytes {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailBytes:]...)
	}
	return len(p), nil
}

// problems is the last n complete lines of the tail that report an error,
// a warning or a panic.
func (t *logTail) problems(n int) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []string
	for _, line := range bytes.Split(t.buf, []byte("\n")) {
		s := string(line)
		if strings.Contains(s, `"level":"ERROR"`) || strings.Contains(s, `"level":"WARN"`) || strings.HasPrefix(s, "panic:") {
			out = append(out, s)
		}
	}
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

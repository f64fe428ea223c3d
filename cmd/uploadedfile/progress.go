package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/uploadedfile/uploadedfile/db"
)

// progress shows how far a long command is: on a terminal (stderr), one
// progress bar -- done of the estimated total, the rate and the time left
// (schollz/progressbar: one bar is all a command shows; mpb's several
// concurrent bars are more than that needs); with --output json, a progress
// object on stdout every --progress-every, before the summary; otherwise
// nothing, so a script that reads text output sees only the findings.
type progress struct {
	g       *globals
	command string
	total   int64
	start   time.Time
	bar     *progressbar.ProgressBar

	mu   sync.Mutex
	done int64
	stop chan struct{}
	wg   sync.WaitGroup
}

// startProgress starts the display of command's progress over an
// estimated total of items, counted in unit (files, tenants).
func (g *globals) startProgress(command, unit string, total int64) *progress {
	p := &progress{g: g, command: command, total: total, start: time.Now(), stop: make(chan struct{})}
	switch {
	case g.output == "json":
		p.wg.Add(1)
		go p.tick()
	case isTerminal(g.stderr):
		barMax := total
		if barMax <= 0 {
			barMax = -1 // no estimate: a spinner with the count and the rate
		}
		p.bar = progressbar.NewOptions64(barMax,
			progressbar.OptionSetWriter(g.stderr), progressbar.OptionSetDescription(command),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString(unit),
			progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(200*time.Millisecond),
			// Drawn empty now, so that the bar's clock starts with the
			// command: it starts at the first drawing, and a first count a
			// millisecond later showed a rate a thousand times the walk's.
			progressbar.OptionSetRenderBlankState(true),
			progressbar.OptionClearOnFinish())
	}
	return p
}

// set records that done items are done.
func (p *progress) set(done int) {
	p.mu.Lock()
	p.done = int64(done)
	if p.total > 0 && p.done > p.total {
		p.total = p.done // the estimate was short
		if p.bar != nil {
			p.bar.ChangeMax64(p.total)
		}
	}
	p.mu.Unlock()
	if p.bar != nil {
		_ = p.bar.Set64(int64(done))
	}
}

// finish ends the display (before the command's summary): with --output
// json, a last progress object, so there is one however short the run.
func (p *progress) finish() {
	close(p.stop)
	p.wg.Wait()
	if p.g.output == "json" {
		_ = p.g.emit("", map[string]any{"progress": p.snapshot()})
	}
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}

// tick prints a progress object every progressEvery until finish.
func (p *progress) tick() {
	defer p.wg.Done()
	every := p.g.progressEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case <-t.C:
			_ = p.g.emit("", map[string]any{"progress": p.snapshot()})
		}
	}
}

// snapshot is the progress object: done, the estimated total, the rate
// and the time left at that rate.
func (p *progress) snapshot() map[string]any {
	p.mu.Lock()
	defer p.mu.Unlock()
	elapsed := time.Since(p.start).Seconds()
	rate := float64(p.done) / max(elapsed, 1e-9)
	left := -1.0 // unknown until something is done, or without a total
	if rate > 0 && p.total > 0 {
		left = float64(max(p.total-p.done, 0)) / rate
	}
	return map[string]any{"command": p.command, "done": p.done, "total": p.total, "ratePerSecond": rate, "remainingSeconds": left}
}

// isTerminal reports whether w is a terminal.
func isTerminal(w any) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// saveCheckpoint writes where a long command stands (p), on a context of
// its own: an interrupt has ended ctx, and this is what the interrupt must
// leave behind. A failure is logged, not returned: the run goes on, and at
// worst a --resume starts from an earlier checkpoint.
func (g *globals) saveCheckpoint(ctx context.Context, conn db.DBTX, p db.CheckpointSaveParams) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if p.DoneAbove == nil {
		p.DoneAbove = []uuid.UUID{}
	}
	if err := db.New().CheckpointSave(cctx, conn, p); err != nil {
		g.logger.Warn(p.Command+": checkpoint not written", "error", err.Error())
	}
}

// resumeAfter is the key after which a --resume of key goes on: the last
// key its interrupted run wrote ("" when it wrote none). No checkpoint of
// key is an error saying that nothing of what (a "recount of this
// selection") is there to resume.
func resumeAfter(ctx context.Context, conn db.DBTX, key db.CheckpointGetParams, what string) (string, error) {
	cp, err := db.New().CheckpointGet(ctx, conn, key)
	if errors.Is(err, db.ErrNoRows) {
		return "", fmt.Errorf("%s --resume: no interrupted %s (%s) to resume", key.Command, what, key.Selection)
	}
	if err != nil || cp.AfterKey == nil {
		return "", err
	}
	return *cp.AfterKey, nil
}

package main

import (
	"context"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/db/migrations"
)

// watchIndexBuilds reports the index builds running while migrate up
// applies its migrations (pg_stat_progress_create_index, read on a
// connection of its own): with --output json, a progress object per build
// every --progress-every; on a terminal, a bar per build and phase (done
// of the phase's total, the rate, the time left); otherwise nothing. It
// returns the function that stops it, which the caller runs before the
// summary.
func (g *globals) watchIndexBuilds(ctx context.Context) (stop func()) {
	asJSON, onTerminal := g.output == "json", isTerminal(g.stderr)
	if !asJSON && !onTerminal {
		return func() {}
	}
	pool, err := openPool(ctx, g.databaseURL, nil, maintenanceLimits)
	if err != nil {
		return func() {} // the migration itself reports the database's failure
	}
	every := time.Second
	if asJSON && g.progressEvery > 0 {
		every = g.progressEvery
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer pool.Close()
		w := indexWatch{g: g, asJSON: asJSON}
		defer w.finish()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if builds, err := migrations.IndexBuilds(ctx, db.Wrap(pool)); err == nil {
				w.report(builds)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// indexWatch is what watchIndexBuilds shows: JSON objects, or the bar of
// the build and phase seen last.
type indexWatch struct {
	g      *globals
	asJSON bool
	bar    *progressbar.ProgressBar
	barFor string
}

func (w *indexWatch) report(builds []migrations.IndexBuild) {
	for _, b := range builds {
		if w.asJSON {
			_ = w.g.emit("", map[string]any{"progress": map[string]any{"command": "migrate up", "index": b.Index, "table": b.Table,
				"phase": b.Phase, "done": b.Done, "total": b.Total, "unit": b.Unit}})
			continue
		}
		if key := b.Index + " " + b.Phase; w.bar == nil || w.barFor != key {
			w.finish()
			w.bar = progressbar.NewOptions64(max(b.Total, 1),
				progressbar.OptionSetWriter(w.g.stderr), progressbar.OptionSetDescription("index "+b.Index+": "+b.Phase),
				progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString(b.Unit),
				progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(200*time.Millisecond))
			w.barFor = key
		}
		_ = w.bar.Set64(b.Done)
	}
}

func (w *indexWatch) finish() {
	if w.bar != nil {
		_ = w.bar.Finish()
		w.bar = nil
	}
}

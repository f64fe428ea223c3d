package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/clamd"
	"github.com/uploadedfile/uploadedfile/service"
)

// rescanFlags are rescan's options.
type rescanFlags struct {
	since, tenant string
	quarantine    bool
	concurrency   int
	retries       int
	resume        bool
}

// selection names what the flags choose to read: a checkpoint's key (the
// resumed run must be given the same).
func (f rescanFlags) selection() string {
	return fmt.Sprintf("since=%s tenant=%s quarantine=%t", f.since, f.tenant, f.quarantine)
}

// newRescanCommand is rescan.
func newRescanCommand(g *globals) *cobra.Command {
	var f rescanFlags
	rescan := &cobra.Command{
		Use:   "rescan [--since 720h] [--tenant T] [--quarantine] [--concurrency N] [--retries N] [--resume]",
		Short: "Scan ready files again with clamd (after a signature update); --quarantine hides each detection",
		Example: `  uploadedfile maintenance rescan --since 168h
  uploadedfile maintenance rescan --tenant acme --quarantine --concurrency 8
  uploadedfile maintenance rescan --tenant acme --quarantine --resume`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withConfiguredPool(cmd.Context(), g, func(cfg fileConfig, pool *db.Pool) error {
				o, err := f.options(cmd.Context(), pool)
				if err != nil {
					return err
				}
				o.Concurrency = f.concurrency
				if o.Concurrency <= 0 {
					o.Concurrency = rescanStreams(cmd.Context(), cfg)
				}
				svc, err := cfg.newService(cmd.Context(), g, pool)
				if err != nil {
					return err
				}
				defer func() { _ = svc.Close() }()
				return runRescan(cmd.Context(), g, svc, pool, f, o)
			})
		},
	}
	rescan.Flags().StringVar(&f.since, "since", "", "only files created since (RFC 3339 or an age like 168h)")
	rescan.Flags().StringVar(&f.tenant, "tenant", "", "only this tenant")
	rescan.Flags().BoolVar(&f.quarantine, "quarantine", false, "hide each detected file from every read (emits file.quarantined)")
	rescan.Flags().IntVar(&f.concurrency, "concurrency", 0, "files scanned at once, each on a clamd stream of its own (default: clamd's MaxThreads)")
	rescan.Flags().IntVar(&f.retries, "retries", 2, "times a file clamd gives no verdict for is sent again before it is reported and passed")
	rescan.Flags().BoolVar(&f.resume, "resume", false, "go on from where an interrupted rescan of the same selection stopped")
	return rescan
}

// options are the rescan's selection, resumed from its checkpoint with
// --resume (its --since as resolved when the run began).
func (f rescanFlags) options(ctx context.Context, pool *db.Pool) (service.RescanOptions, error) {
	o := service.RescanOptions{Tenant: f.tenant, Quarantine: f.quarantine, Retries: f.retries}
	if f.resume {
		cp, err := db.New().CheckpointGet(ctx, db.Wrap(pool), db.CheckpointGetParams{Command: "rescan", Selection: f.selection()})
		if errors.Is(err, db.ErrNoRows) {
			return o, fmt.Errorf("rescan --resume: no interrupted rescan of this selection (%s) to resume", f.selection())
		}
		if err != nil {
			return o, err
		}
		o.After, o.DoneAbove, o.Since = cp.AfterID, cp.DoneAbove, cp.Since
		return o, nil
	}
	if f.since != "" {
		t, err := parseCutoff(f.since, time.Now())
		if err != nil {
			return o, err
		}
		o.Since = &t
	}
	return o, nil
}

// errInterrupted: a rescan stopped by a signal (the files in flight
// finished, its checkpoint written).
var errInterrupted = errors.New("rescan interrupted: go on with --resume (and the same flags)")

// runRescan runs the rescan, one line per detection and per file without
// a verdict, its progress (startProgress) over the planner's estimate of
// the files it reads, its checkpoint in the database as it goes, and the
// summary. An interrupted run says where it stopped and exits non-zero; a
// run that ends removes its checkpoint.
func runRescan(ctx context.Context, g *globals, svc *service.Service, pool *db.Pool, f rescanFlags, o service.RescanOptions) error {
	q := db.New()
	o.Checkpoint = func(after uuid.UUID, doneAbove []uuid.UUID) {
		g.saveCheckpoint(ctx, db.Wrap(pool), db.CheckpointSaveParams{Command: "rescan", Selection: f.selection(), AfterID: after, DoneAbove: doneAbove, Since: o.Since})
	}
	o.NoVerdict = func(n service.NoVerdict) {
		_ = g.emit(fmt.Sprintf("no verdict %s tenant=%s error=%s\n", n.ID, n.Tenant, n.Err),
			map[string]any{"noVerdict": n.ID, "tenant": n.Tenant, "error": n.Err.Error()})
	}
	total, err := svc.UnsafeSystemRescanEstimate(ctx, o)
	if err != nil {
		return err
	}
	shown := g.startProgress("rescan", "files", total)
	o.Progress = shown.set
	rep, err := svc.UnsafeSystemRescan(ctx, o, func(d service.Detection) {
		_ = g.emit(fmt.Sprintf("detected %s tenant=%s signature=%s quarantined=%t\n", d.ID, d.Tenant, d.Signature, d.Quarantined),
			map[string]any{"detected": d.ID, "tenant": d.Tenant, "signature": d.Signature, "quarantined": d.Quarantined})
	})
	shown.finish()
	if eerr := g.emit(fmt.Sprintf("rescan: %d scanned, %d detected, %d quarantined, %d without a verdict (%d streams)\n", rep.Scanned, rep.Detected, rep.Quarantined, rep.Unscanned, o.Concurrency),
		map[string]any{"command": "rescan", "scanned": rep.Scanned, "detected": rep.Detected, "quarantined": rep.Quarantined, "unscanned": rep.Unscanned,
			"concurrency": o.Concurrency, "interrupted": rep.Interrupted}); err == nil {
		err = eerr
	}
	switch {
	case err != nil:
		return err
	case rep.Interrupted:
		return errInterrupted
	}
	return q.CheckpointClear(context.WithoutCancel(ctx), db.Wrap(pool), db.CheckpointClearParams{Command: "rescan", Selection: f.selection()})
}

// rescanStreams is how many files a rescan scans at once by default:
// clamd's MaxThreads (what it runs at once; more streams queue inside
// clamd), or the CPUs the command runs on when clamd does not say.
func rescanStreams(ctx context.Context, cfg fileConfig) int {
	if c, err := clamd.New(cfg.Scan.Clamd, cfg.Scan.Timeout); err == nil {
		if n, err := c.MaxThreads(ctx); err == nil {
			return n
		}
	}
	return runtime.NumCPU()
}

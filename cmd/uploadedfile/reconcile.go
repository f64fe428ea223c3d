package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/service"
)

// errReconcileInterrupted: a reconcile stopped by a signal (the object in
// hand finished, its checkpoint written).
var errReconcileInterrupted = errors.New("reconcile interrupted: go on with --resume (and the same flags)")

// reconcileCheckpointEvery is how often a reconcile writes where it
// stands: a walk lists tens of thousands of objects a second, so a write
// per progress step (1,000 objects) would be a cost of its own; after a
// crash --resume repeats at most this much of the walk.
const reconcileCheckpointEvery = time.Second

// runReconcile runs the reconcile: one finding per line (a JSON object
// per line with --output json), its progress (objects listed of about as
// many as the rows name, when no --prefix narrows it) with a checkpoint
// in the database every reconcileCheckpointEvery and when interrupted,
// then the counts. An interrupted run says where it stopped and exits
// non-zero; a run that ends removes its checkpoint.
func runReconcile(ctx context.Context, g *globals, svc *service.Service, conn db.Conn, opts service.ReconcileOptions, failOnFindings, resume bool) error {
	q := db.New()
	key := db.CheckpointGetParams{Command: "reconcile", Selection: fmt.Sprintf("prefix=%s grace=%s repair=%t", opts.Prefix, opts.Grace, opts.Repair)}
	if resume {
		var err error
		if opts.After, err = resumeAfter(ctx, conn, key, "reconcile with these flags"); err != nil {
			return err
		}
	}
	save := func(last string) {
		g.saveCheckpoint(ctx, conn, db.CheckpointSaveParams{Command: key.Command, Selection: key.Selection, AfterKey: &last})
	}
	var total int64
	if opts.Prefix == "" && opts.After == "" {
		total, _ = db.EstimateObjects(ctx, conn) // an estimate: none is no total
	}
	shown := g.startProgress("reconcile", "objects", total)
	saved := time.Now()
	opts.Progress = func(objects int64, last string) {
		shown.set(int(objects))
		if time.Since(saved) >= reconcileCheckpointEvery {
			save(last)
			saved = time.Now()
		}
	}
	var failed []string // the first keys whose repair failed
	counts, err := svc.UnsafeSystemReconcile(ctx, opts, func(f service.Finding) error {
		if opts.Repair && !f.Repaired && (f.Kind == service.FindingOrphan || f.Kind == service.FindingStagingLeftover) && len(failed) < 10 {
			failed = append(failed, f.Key)
		}
		return g.emit(findingLine(f)+"\n", f)
	})
	shown.set(int(counts.Objects))
	shown.finish()
	if counts.Interrupted && counts.Last != "" {
		save(counts.Last)
	}
	if eerr := g.emit(fmt.Sprintf("reconcile: %d objects, %d references; %d orphans, %d staging leftovers, %d missing, %d mismatches, %d younger than the grace; %d repaired, %d repairs failed\n",
		counts.Objects, counts.References, counts.Orphans, counts.StagingLeftovers, counts.Missing, counts.Mismatches, counts.Young, counts.Repaired, counts.RepairFailed),
		map[string]any{"counts": counts, "objects": counts.Objects, "interrupted": counts.Interrupted, "last": counts.Last}); err == nil {
		err = eerr
	}
	if err == nil && counts.RepairFailed > 0 {
		err = fmt.Errorf("reconcile: %d repairs failed (their claims are retried by the pending sweep): %s", counts.RepairFailed, strings.Join(failed, ", "))
	}
	if left := counts.Orphans + counts.StagingLeftovers + counts.Missing + counts.Mismatches - counts.Repaired; err == nil && failOnFindings && left > 0 {
		err = &exitError{code: exitFindings, err: fmt.Errorf("reconcile: %d findings", left)}
	}
	switch {
	case err != nil:
		return err
	case counts.Interrupted:
		return errReconcileInterrupted
	}
	return q.CheckpointClear(context.WithoutCancel(ctx), conn, db.CheckpointClearParams(key))
}

package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/service"
)

// errRecountInterrupted: a recount stopped by a signal (the tenant in
// flight finished, its checkpoint written).
var errRecountInterrupted = errors.New("recount-usage interrupted: go on with --resume (and the same flags)")

// recountCheckpointEvery is how many tenants a recount finishes between
// two writes of its checkpoint (and it writes one when interrupted).
const recountCheckpointEvery = 50

// newRecountCommand is recount-usage.
func newRecountCommand(g *globals) *cobra.Command {
	var tenant string
	var resume bool
	recount := &cobra.Command{
		Use:   "recount-usage [--tenant T] [--resume]",
		Short: "Recompute the quota usage from the rows (after rows were changed by hand)",
		Example: `  uploadedfile maintenance recount-usage --tenant acme
  uploadedfile maintenance recount-usage
  uploadedfile maintenance recount-usage --resume`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withConfiguredService(cmd.Context(), g, func(svc *service.Service, pool *db.Pool) error {
				return runRecount(cmd.Context(), g, svc, db.Wrap(pool), tenant, resume)
			})
		},
	}
	recount.Flags().StringVar(&tenant, "tenant", "", "only this tenant (default: every tenant)")
	recount.Flags().BoolVar(&resume, "resume", false, "go on from where an interrupted recount of the same selection stopped")
	return recount
}

// runRecount recounts tenant by tenant with its progress (startProgress),
// its checkpoint in the database every recountCheckpointEvery tenants and
// when interrupted, and the summary. An interrupted run says where it
// stopped and exits non-zero; a run that ends removes its checkpoint.
func runRecount(ctx context.Context, g *globals, svc *service.Service, conn db.Conn, tenant string, resume bool) error {
	q := db.New()
	key := db.CheckpointGetParams{Command: "recount-usage", Selection: "tenant=" + tenant}
	o := service.RecountOptions{Tenant: tenant}
	if resume {
		var err error
		if o.After, err = resumeAfter(ctx, conn, key, "recount of this selection"); err != nil {
			return err
		}
	}
	save := func(last string) {
		g.saveCheckpoint(ctx, conn, db.CheckpointSaveParams{Command: key.Command, Selection: key.Selection, AfterKey: &last})
	}
	var shown *progress
	o.Progress = func(done, total int, last string) {
		if shown == nil {
			shown = g.startProgress("recount-usage", "tenants", int64(total))
		}
		shown.set(done)
		if done > 0 && done%recountCheckpointEvery == 0 {
			save(last)
		}
	}
	rep, err := svc.UnsafeSystemRecount(ctx, o)
	if shown != nil {
		shown.finish()
	}
	if rep.Interrupted && rep.Last != "" {
		save(rep.Last)
	}
	if eerr := g.emit(fmt.Sprintf("recount-usage: %d tenants recounted, %d usage rows written\n", rep.Tenants, rep.Written),
		map[string]any{"command": "recount-usage", "tenants": rep.Tenants, "written": rep.Written, "last": rep.Last, "interrupted": rep.Interrupted}); err == nil {
		err = eerr
	}
	switch {
	case err != nil:
		return err
	case rep.Interrupted:
		return errRecountInterrupted
	}
	return q.CheckpointClear(context.WithoutCancel(ctx), conn, db.CheckpointClearParams(key))
}

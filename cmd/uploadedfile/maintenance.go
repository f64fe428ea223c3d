package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/adapter/tracks"
	"github.com/uploadedfile/uploadedfile/service"
)

// newMaintenanceCommand is the operators' entry to the sweeps. These are
// cross-tenant operations: they are commands, never HTTP routes.
func newMaintenanceCommand(g *globals) *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:     "maintenance",
		Short:   "Run a maintenance sweep once (cross-tenant; operators only)",
		Example: "  DATABASE_URL=postgres://… uploadedfile maintenance --config /etc/uploadedfile.yaml reconcile",
	}
	cmd.PersistentFlags().IntVar(&limit, "limit", 0, "rows per batch (default and maximum: cleanupBatchSize)")
	// withService opens the configured service for one command.
	withService := func(ctx context.Context, fn func(*service.Service, *db.Pool) error) error {
		return withConfiguredService(ctx, g, fn)
	}
	cmd.AddCommand(newBatchCommands(g, &limit)...)
	cmd.AddCommand(newPurgeCommand(g), newRetireTombstoneCommand(g), newRunTrackCommand(g), newRecountCommand(g),
		newRescanCommand(g), newUnquarantineCommand(g), newReconcileCommand(g, withService))
	return cmd
}

// newBatchCommands are the one-batch sweeps: retry-deletions,
// cleanup-pending, cleanup-temporary and cleanup-staging, each printing
// the rows it finished.
func newBatchCommands(g *globals, limit *int) []*cobra.Command {
	count := func(name string, run func(context.Context, *service.Service) (int, error)) *cobra.Command {
		return &cobra.Command{
			Use:  name,
			Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				return withConfiguredService(cmd.Context(), g, func(svc *service.Service, _ *db.Pool) error {
					n, err := run(cmd.Context(), svc)
					if eerr := g.emit(fmt.Sprintf("%s: %d rows done\n", name, n), map[string]any{"command": name, "done": n}); err == nil {
						err = eerr
					}
					return err
				})
			},
		}
	}
	retry := count("retry-deletions", func(ctx context.Context, s *service.Service) (int, error) {
		return s.UnsafeSystemRetryPendingDeletions(ctx, *limit)
	})
	retry.Short = "Retry deletions whose claim or retry marker elapsed, then expired upload tombstones"
	retry.Example = "  uploadedfile maintenance retry-deletions --limit 50"
	pending := count("cleanup-pending", func(ctx context.Context, s *service.Service) (int, error) {
		return s.CleanupPendingUploads(ctx, *limit)
	})
	pending.Short = "Remove expired direct uploads, retry deletions, remove retained staging objects (one batch)"
	pending.Example = "  uploadedfile maintenance cleanup-pending"
	temporary := count("cleanup-temporary", func(ctx context.Context, s *service.Service) (int, error) {
		return s.CleanupExpiredTemporaryFiles(ctx, nil, *limit)
	})
	temporary.Short = "Delete temporary files past their expiry (one batch)"
	temporary.Example = "  uploadedfile maintenance cleanup-temporary --config /etc/uploadedfile.yaml"
	staging := count("cleanup-staging", func(ctx context.Context, s *service.Service) (int, error) {
		return s.UnsafeSystemCleanupCompletedStaging(ctx, *limit)
	})
	staging.Short = "Remove staging objects S3 direct uploads kept after completion (one batch)"
	staging.Example = "  uploadedfile maintenance cleanup-staging"

	return []*cobra.Command{retry, pending, temporary, staging}
}

// newPurgeCommand is purge-unused: the age purge, once.
func newPurgeCommand(g *globals) *cobra.Command {
	var before string
	purge := &cobra.Command{
		Use:   "purge-unused --before <time>",
		Short: "Delete permanent files never marked used and created before a time (RFC 3339, or an age like 720h)",
		Example: `  uploadedfile maintenance purge-unused --before 720h
  uploadedfile maintenance purge-unused --before 2026-01-01T00:00:00Z`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cutoff, err := parseCutoff(before, time.Now())
			if err != nil {
				return err
			}
			return withConfiguredService(cmd.Context(), g, func(svc *service.Service, _ *db.Pool) error {
				n, err := svc.UnsafeSystemPurgeUnusedBefore(cmd.Context(), cutoff)
				if eerr := g.emit(fmt.Sprintf("purge-unused: %d rows done (created before %s)\n", n, cutoff.Format(time.RFC3339)),
					map[string]any{"command": "purge-unused", "done": n, "before": cutoff}); err == nil {
					err = eerr
				}
				return err
			})
		},
	}
	purge.Flags().StringVar(&before, "before", "", "cutoff: an RFC 3339 time or an age (e.g. 720h)")

	return purge
}

// newRetireTombstoneCommand is retire-tombstone.
func newRetireTombstoneCommand(g *globals) *cobra.Command {
	var confirm bool
	retire := &cobra.Command{
		Use:     "retire-tombstone <id> --confirm",
		Short:   "Turn an abandoned upload tombstone into an ordinary deletion retry",
		Example: "  uploadedfile maintenance retire-tombstone 6f1c2b9e-3d4a-4b5c-8d7e-9f0a1b2c3d4e --confirm",
		Long: `Turn an expired upload tombstone into an ordinary elapsed deletion retry,
which the next retry-deletions settles for good.

Only do this after every producer (every serve replica and host process that
uploads) has been stopped and drained: a tombstone exists because a writer
never reported back, and while any writer could still write its object, the
tombstone is what makes sure that object is deleted later. The command
refuses a live upload lease and a live deletion lease.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := uuid.Parse(args[0])
			if err != nil {
				return fmt.Errorf("retire-tombstone: %q is not a file id", args[0])
			}
			if !confirm {
				return errors.New("retire-tombstone: stop and drain every producer first, then run again with --confirm")
			}
			return withConfiguredService(cmd.Context(), g, func(svc *service.Service, _ *db.Pool) error {
				ok, err := svc.UnsafeSystemRetireUploadTombstone(cmd.Context(), id)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("retire-tombstone: %s is not an expired tombstone, or a lease on it is still live", id)
				}
				if err := g.emit(fmt.Sprintf("retire-tombstone: %s retired; run retry-deletions to settle it\n", id), map[string]any{"command": "retire-tombstone", "id": id, "retired": true}); err != nil {
					return err
				}
				return nil
			})
		},
	}
	retire.Flags().BoolVar(&confirm, "confirm", false, "confirm that every producer is stopped and drained")

	return retire
}

// newRunTrackCommand is run-track: one cron track, under its lock.
func newRunTrackCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:       "run-track pending|temporary|reconcile",
		Short:     "Run one cron track now, under its advisory lock and the sweeps' database bounds, as serve would",
		Example:   "  uploadedfile maintenance run-track pending",
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{tracks.TrackPending, tracks.TrackTemporary, tracks.TrackReconcile},
		RunE: func(cmd *cobra.Command, args []string) error {
			sweeps := func(cfg fileConfig) db.Limits { return cfg.Database.sweeps() }
			return withLimitedService(cmd.Context(), g, sweeps, func(svc *service.Service, pool *db.Pool) error {
				res, err := tracks.New(svc, pool, tracks.Options{Logger: g.logger}).Run(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if !res.Ran {
					return g.emit(fmt.Sprintf("run-track %s: skipped, another replica is running it\n", args[0]), map[string]any{"command": "run-track", "track": args[0], "ran": false})
				}
				return g.emit(fmt.Sprintf("run-track %s: %d examined, %d done, %d failed\n", args[0], res.Examined, res.Done, res.Failed),
					map[string]any{"command": "run-track", "track": args[0], "ran": true, "examined": res.Examined, "done": res.Done, "failed": res.Failed})
			})
		},
	}
}

// newUnquarantineCommand is unquarantine.
func newUnquarantineCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "unquarantine <id>",
		Short:   "Bring a quarantined file back (a false positive)",
		Example: "  uploadedfile maintenance unquarantine 6f1c2b9e-3d4a-4b5c-8d7e-9f0a1b2c3d4e",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withConfiguredService(cmd.Context(), g, func(svc *service.Service, _ *db.Pool) error {
				if err := svc.UnsafeSystemUnquarantine(cmd.Context(), args[0]); err != nil {
					return fmt.Errorf("unquarantine %s: %w (not a quarantined file)", args[0], err)
				}
				if err := g.emit(fmt.Sprintf("unquarantine: %s is visible again\n", args[0]), map[string]any{"command": "unquarantine", "id": args[0], "visible": true}); err != nil {
					return err
				}
				return nil
			})
		},
	}
}

// withConfiguredPool opens the configuration (g.config) and the database
// (openPool, as serve does) for one command.
func withConfiguredPool(ctx context.Context, g *globals, fn func(fileConfig, *db.Pool) error) error {
	return withLimitedPool(ctx, g, commandLimits, fn)
}

// commandLimits are a maintenance command's database bounds, whatever the
// configuration says (maintenanceLimits).
func commandLimits(fileConfig) db.Limits { return maintenanceLimits }

// withLimitedPool is withConfiguredPool with the limits limits gives for
// the configuration (run-track takes the sweeps' own, as serve's tracks do).
func withLimitedPool(ctx context.Context, g *globals, limits func(fileConfig) db.Limits, fn func(fileConfig, *db.Pool) error) error {
	cfg, err := g.config()
	if err != nil {
		return err
	}
	pool, err := openPool(ctx, g.databaseURL, nil, limits(cfg))
	if err != nil {
		return g.databaseError(err)
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil { // the pool connects lazily: ask once, explain a failure
		return g.databaseError(err)
	}
	return fn(cfg, pool)
}

// withConfiguredService is withConfiguredPool with the configured service,
// closed after fn.
func withConfiguredService(ctx context.Context, g *globals, fn func(*service.Service, *db.Pool) error) error {
	return withLimitedService(ctx, g, commandLimits, fn)
}

// withLimitedService is withConfiguredService on a pool with the limits
// limits gives (withLimitedPool).
func withLimitedService(ctx context.Context, g *globals, limits func(fileConfig) db.Limits, fn func(*service.Service, *db.Pool) error) error {
	return withLimitedPool(ctx, g, limits, func(cfg fileConfig, pool *db.Pool) error {
		svc, err := cfg.newService(ctx, g, pool)
		if err != nil {
			return err
		}
		defer func() { _ = svc.Close() }()
		return fn(svc, pool)
	})
}

// newService is the configured service of a command on pool (the scanner
// included, for the commands that scan); the caller closes it.
func (c fileConfig) newService(ctx context.Context, g *globals, pool *db.Pool) (*service.Service, error) {
	scfg, err := c.serviceConfig()
	if err != nil {
		return nil, err
	}
	scan, err := c.scanner(ctx, 0, false)
	if err != nil {
		return nil, err
	}
	store, err := openStore(ctx, scfg, nil, nil)
	if err != nil {
		return nil, err
	}
	svc, err := service.New(ctx, scfg, pool, append([]service.Option{service.WithStore(store), service.WithLogger(g.logger)}, scan...)...)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	return svc, nil
}

// newReconcileCommand is `maintenance reconcile`: one finding per line (a
// JSON object per line with --output json), then the counts.
func newReconcileCommand(g *globals, withService func(context.Context, func(*service.Service, *db.Pool) error) error) *cobra.Command {
	var opts service.ReconcileOptions
	var failOnFindings, resume bool
	cmd := &cobra.Command{
		Use:   "reconcile [--repair] [--grace 24h] [--prefix KEY-PREFIX] [--fail-on-findings] [--resume] [--output text|json]",
		Short: "Compare the store with the rows: orphan, missing and mismatched objects, staging leftovers",
		Long: `Stream the store's listing and every storage reference of the rows, both in
key order, and merge-join them (memory does not grow with the number of
objects). Reports, one line each:

  orphan            an object no row, claim or pending upload points to
  staging-leftover  a staging object whose upload is over
  missing           a visible file whose object is absent
  mismatch          a visible file whose object's size or checksum differs

Objects younger than --grace are never reported or touched. --repair deletes
orphans and staging leftovers through durable claims (a crash mid-repair is
finished by the pending sweep); missing objects and mismatches are only
reported -- no row is ever deleted.

SIGINT or SIGTERM finishes the object in hand, keeps where the walk stopped
in the database and exits 1; --resume with the same --prefix, --grace and
--repair goes on after that key (the counts are the resumed part's).

Exit status: 0 when the walk completed (findings or not), 3 with
--fail-on-findings when it reported a finding that is still there after
--repair, 1 when a repair failed (named) or the walk could not complete.`,
		Example: `  uploadedfile maintenance reconcile
  uploadedfile maintenance reconcile --prefix core/_staging/ --output json
  uploadedfile maintenance reconcile --repair --grace 48h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Grace < 0 {
				return errors.New("reconcile: --grace must not be negative")
			}
			return withService(cmd.Context(), func(svc *service.Service, pool *db.Pool) error {
				return runReconcile(cmd.Context(), g, svc, db.Wrap(pool), opts, failOnFindings, resume)
			})
		},
	}
	cmd.Flags().BoolVar(&opts.Repair, "repair", false, "delete orphans and staging leftovers through durable claims")
	cmd.Flags().DurationVar(&opts.Grace, "grace", service.DefaultReconcileGrace, "leave objects younger than this alone")
	cmd.Flags().StringVar(&opts.Prefix, "prefix", "", "only keys starting with this")
	cmd.Flags().BoolVar(&failOnFindings, "fail-on-findings", false, "exit 3 when a finding remains (for a scheduled check)")
	cmd.Flags().BoolVar(&resume, "resume", false, "go on from where an interrupted reconcile with the same flags stopped")
	return cmd
}

// findingLine is a finding as one line of text.
func findingLine(f service.Finding) string {
	line := fmt.Sprintf("%s %s size=%d", f.Kind, f.Key, f.Size)
	if f.Kind == service.FindingMismatch || f.Kind == service.FindingMissing {
		line += fmt.Sprintf(" expected=%d", f.ExpectedSize)
	}
	if f.FileID != nil {
		line += " file=" + f.FileID.String()
	}
	if f.LastModified != nil {
		line += " modified=" + f.LastModified.UTC().Format(time.RFC3339)
	}
	if f.Repaired {
		line += " repaired"
	}
	return line + " (" + f.Detail + ")"
}

// parseCutoff reads an RFC 3339 time or an age before now.
func parseCutoff(v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, errors.New("purge-unused: --before is required")
	}
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return time.Time{}, fmt.Errorf("purge-unused: --before %q is neither an RFC 3339 time nor a positive age", v)
	}
	return now.Add(-d), nil
}

package main

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/golang-migrate/migrate/v4"
	"github.com/spf13/cobra"

	"github.com/uploadedfile/uploadedfile/db/migrations"
)

func newMigrateCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "migrate",
		Short:   "Apply or revert the embedded database migrations",
		Example: "  DATABASE_URL=postgres://postgres@127.0.0.1:5432/uploadedfile uploadedfile migrate up",
	}
	cmd.AddCommand(newMigrateUpCommand(g), newMigrateDownCommand(g), newMigrateVersionCommand(g), newMigrateForceCommand(g))
	return cmd
}

// newMigrateUpCommand is migrate up.
func newMigrateUpCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "up",
		Short:   "Apply every migration not yet applied",
		Example: "  uploadedfile migrate up",
		Long: `Apply every migration not yet applied, one replica at a time (others
wait for the first). Index builds run CONCURRENTLY and constraints are
validated apart, so writers go on; a migration that times out waiting for
its table lock is tried again; one that died half way is run again when
that is safe (see docs/operations.md, "Upgrading"). A running index build
is shown on a terminal, and with --output json as progress objects
(pg_stat_progress_create_index).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := g.config(); err != nil {
				return err
			}
			logf := func(format string, args ...any) { fmt.Fprintf(cmd.ErrOrStderr(), format+"\n", args...) }
			stop := g.watchIndexBuilds(cmd.Context())
			err := migrations.Apply(cmd.Context(), g.databaseURL, logf)
			stop()
			if err != nil {
				return g.databaseError(err)
			}
			return withMigrator(g, func(m *migrate.Migrate) error { return printVersion(g, m) })
		},
	}
}

// newMigrateDownCommand is migrate down.
func newMigrateDownCommand(g *globals) *cobra.Command {
	var steps int
	var all bool
	down := &cobra.Command{
		Use:     "down",
		Short:   "Revert migrations: --steps N, or --all (drops every table and its data)",
		Example: "  uploadedfile migrate down --steps 1",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (steps > 0) == all {
				return errors.New("migrate down: give exactly one of --steps N (N > 0) or --all")
			}
			return withMigrator(g, func(m *migrate.Migrate) error {
				var err error
				if all {
					err = m.Down()
				} else {
					err = m.Steps(-steps)
				}
				if err != nil && !errors.Is(err, migrate.ErrNoChange) {
					return err
				}
				return printVersion(g, m)
			})
		},
	}
	down.Flags().IntVar(&steps, "steps", 0, "number of migrations to revert")
	down.Flags().BoolVar(&all, "all", false, "revert every migration")
	return down
}

// newMigrateVersionCommand is migrate version.
func newMigrateVersionCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the applied migration version",
		Example: "  uploadedfile migrate version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withMigrator(g, func(m *migrate.Migrate) error { return printVersion(g, m) })
		},
	}
}

// newMigrateForceCommand is migrate force.
func newMigrateForceCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "force VERSION",
		Short: "Record VERSION (or none) as applied and clean, after repairing a dirty migration by hand",
		Long: `Record VERSION as the applied, clean version without running anything:
for a migration that died half way and cannot simply run again, once what
it applied has been completed or undone by hand. "none" records that no
migration is applied.`,
		Example: "  uploadedfile migrate force 20261125000000",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			v := -1
			if args[0] != "none" {
				n, err := strconv.ParseUint(args[0], 10, 64)
				if err != nil || !migrations.Known(uint(n)) {
					return fmt.Errorf("migrate force: %q is not one of this binary's versions (uploadedfile migrate version lists the applied one; db/migrations holds them all)", args[0])
				}
				v = int(n)
			}
			return withMigrator(g, func(m *migrate.Migrate) error {
				if err := m.Force(v); err != nil {
					return err
				}
				return printVersion(g, m)
			})
		},
	}
}

func withMigrator(g *globals, fn func(*migrate.Migrate) error) error {
	if _, err := g.config(); err != nil {
		return err
	}
	m, err := migrations.Open(g.databaseURL)
	if err != nil {
		return g.databaseError(err)
	}
	defer func() { _, _ = m.Close() }()
	return fn(m)
}

// schemaVersion is what migrate up, down and version print with --output
// json: the schema's version (0: none applied) and the binary's.
type schemaVersion struct {
	Version uint `json:"version"`
	Binary  uint `json:"binaryVersion"`
}

func printVersion(g *globals, m *migrate.Migrate) error {
	v, dirty, err := m.Version()
	switch {
	case errors.Is(err, migrate.ErrNilVersion):
		return g.emit("version: none (no migration applied)\n", schemaVersion{Binary: migrations.Latest()})
	case err != nil:
		return err
	case dirty:
		return &migrations.SchemaError{Have: v, Want: migrations.Latest(), Dirty: true}
	default:
		return g.emit(fmt.Sprintf("version: %d\n", v), schemaVersion{Version: v, Binary: migrations.Latest()})
	}
}

package main

import (
	"errors"
	"fmt"

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
	up := &cobra.Command{
		Use:     "up",
		Short:   "Apply every migration not yet applied",
		Example: "  uploadedfile migrate up",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withMigrator(g, func(m *migrate.Migrate) error {
				if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
					return err
				}
				return printVersion(g, m)
			})
		},
	}
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
	version := &cobra.Command{
		Use:     "version",
		Short:   "Print the applied migration version",
		Example: "  uploadedfile migrate version",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withMigrator(g, func(m *migrate.Migrate) error { return printVersion(g, m) })
		},
	}
	cmd.AddCommand(up, down, version)
	return cmd
}

func withMigrator(g *globals, fn func(*migrate.Migrate) error) error {
	if _, err := g.config(); err != nil {
		return err
	}
	m, err := migrations.Open(g.databaseURL)
	if err != nil {
		return g.databaseError(err)
	}
	defer m.Close()
	return fn(m)
}

func printVersion(g *globals, m *migrate.Migrate) error {
	v, dirty, err := m.Version()
	switch {
	case errors.Is(err, migrate.ErrNilVersion):
		fmt.Fprintln(g.stdout, "version: none (no migration applied)")
		return nil
	case err != nil:
		return err
	case dirty:
		return fmt.Errorf("version %d is dirty: a migration failed half way; fix the schema by hand, then force the version", v)
	default:
		fmt.Fprintf(g.stdout, "version: %d\n", v)
		return nil
	}
}

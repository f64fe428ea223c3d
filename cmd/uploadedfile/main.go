// Command uploadedfile is the one binary of the service: it serves the HTTP
// API, migrates the database and runs the maintenance jobs.
//
//	uploadedfile serve [--dev]
//	uploadedfile migrate up|down|version
//	uploadedfile maintenance retry-deletions|cleanup-pending|cleanup-temporary|
//	                         cleanup-staging|purge-unused|retire-tombstone|run-track
//
// The database is DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/uploadedfile?sslmode=disable).
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// defaultDatabaseURL is the local development database.
const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/uploadedfile?sslmode=disable"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand(os.Stdout, os.Stderr).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "uploadedfile:", err)
		os.Exit(1)
	}
}

// globals are the settings every subcommand shares.
type globals struct {
	databaseURL string
	stdout      io.Writer
	logger      *slog.Logger
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout}
	root := &cobra.Command{
		Use:           "uploadedfile",
		Short:         "Stores uploaded files: metadata in PostgreSQL, bytes on disk or in S3",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			g.logger = slog.New(slog.NewJSONHandler(stderr, nil))
		},
	}
	root.PersistentFlags().StringVar(&g.databaseURL, "database-url", envOr("DATABASE_URL", defaultDatabaseURL),
		"PostgreSQL URL (env DATABASE_URL)")
	root.AddCommand(newMigrateCommand(g), newServeCommand(g), newMaintenanceCommand(g))
	return root
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

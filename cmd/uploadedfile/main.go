// Command uploadedfile is the one binary of the service: it serves the HTTP
// API, migrates the database and runs the maintenance jobs.
//
//	uploadedfile serve [--dev]
//	uploadedfile migrate up|down|version
//	uploadedfile maintenance retry-deletions|cleanup-pending|cleanup-temporary|
//	                         cleanup-staging|purge-unused|retire-tombstone|run-track|reconcile|
//	                         recount-usage
//	uploadedfile events relay|status|list --parked|replay
//	uploadedfile quota set|get|list
//	uploadedfile version
//	uploadedfile completion bash|zsh|fish|powershell
//
// The database is DATABASE_URL (default
// postgres://postgres@127.0.0.1:5432/uploadedfile?sslmode=disable).
package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"

	"github.com/uploadedfile/uploadedfile/internal/pgurl"
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
		Use:   "uploadedfile",
		Short: "Stores uploaded files: metadata in PostgreSQL, bytes on disk or in S3",
		Example: `  uploadedfile serve --dev
  uploadedfile migrate up
  uploadedfile maintenance reconcile
  source <(uploadedfile completion bash)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(*cobra.Command, []string) {
			g.logger = slog.New(slog.NewJSONHandler(stderr, nil))
		},
	}
	root.PersistentFlags().StringVar(&g.databaseURL, "database-url", envOr("DATABASE_URL", defaultDatabaseURL),
		"PostgreSQL URL (env DATABASE_URL)")
	root.AddCommand(newMigrateCommand(g), newServeCommand(g), newMaintenanceCommand(g), newEventsCommand(g), newQuotaCommand(g), newVersionCommand(g))
	root.SetOut(stdout) // help and the completion scripts
	root.SetErr(stderr)
	return root
}

// reachDatabase connects to databaseURL once, so that a database that is not
// there is reported before anything else, as databaseError explains it.
func reachDatabase(ctx context.Context, databaseURL string) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, pgurl.SingleConn(databaseURL))
	if err != nil {
		return databaseError(databaseURL, err)
	}
	return conn.Close(ctx)
}

// databaseError explains a database that cannot be reached: the URL that
// was tried (its password redacted), where it comes from, and the fix.
func databaseError(databaseURL string, err error) error {
	shown := "(an invalid URL)"
	if u, perr := url.Parse(databaseURL); perr == nil {
		shown = u.Redacted()
	}
	return fmt.Errorf("cannot reach the database at %s (from --database-url, else DATABASE_URL, else the default %s): %v\n"+
		"  start PostgreSQL there (Debian: pg_ctlcluster $(ls /etc/postgresql) main start), or point DATABASE_URL at a running server", shown, defaultDatabaseURL, err)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

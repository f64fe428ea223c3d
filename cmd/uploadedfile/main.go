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
// The database is --database-url, else UPLOADEDFILE_DATABASE_URL, else the
// configuration file's databaseUrl, else DATABASE_URL, else
// postgres://postgres@127.0.0.1:5432/uploadedfile?sslmode=disable
// (databasePrecedence).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/uploadedfile/uploadedfile/db"
)

// defaultDatabaseURL is the local development database.
const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/uploadedfile?sslmode=disable"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand(os.Stdout, os.Stderr).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, binaryName()+":", err)
		os.Exit(exitCode(err))
	}
}

// exitError is a command's failure with an exit code of its own (1 is
// every other failure's).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// Exit codes.
const (
	// exitFindings: reconcile --fail-on-findings found something.
	exitFindings = 3
)

// exitCode is err's exit code: an exitError's, else 1.
func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

// binaryName is the name the binary was run as (completion scripts
// register for it), or uploadedfile for a test binary.
func binaryName() string {
	name := filepath.Base(os.Args[0])
	if name == "" || name == "." || strings.HasSuffix(name, ".test") {
		return "uploadedfile"
	}
	return name
}

// emit writes a command's result: text, or with --output json the value
// as one JSON object on a line of its own.
func (g *globals) emit(text string, v any) error {
	g.emitMu.Lock()
	defer g.emitMu.Unlock()
	if g.output == "json" {
		return json.NewEncoder(g.stdout).Encode(v)
	}
	_, err := fmt.Fprint(g.stdout, text)
	return err
}

// globals are the settings every subcommand shares.
type globals struct {
	// configFile is --config (default UPLOADEDFILE_CONFIG); dbFlag is
	// --database-url as given ("": not given).
	configFile, dbFlag string
	// databaseURL and databaseSource are the database every command uses
	// and where that came from, resolved by config.
	databaseURL, databaseSource string
	output                      string          // --output: text or json
	cfg                         *fileConfig     // loaded once, by config
	environ                     func() []string // nil: os.Environ
	stdout, stderr              io.Writer
	logger                      *slog.Logger
	// accessLines takes serve's access lines (useLogSink; nil: logger).
	accessLines io.Writer
	// progressEvery is how often a long command prints a progress object
	// with --output json (--progress-every).
	progressEvery time.Duration
	// emitMu keeps the lines of concurrent emits (a progress ticker, a
	// command's findings) whole.
	emitMu sync.Mutex
}

// config is the configuration every command reads the same way: the file
// (--config, else UPLOADEDFILE_CONFIG) and UPLOADEDFILE_* variables over it
// (loadConfig), loaded once; it also resolves the database: --database-url,
// else UPLOADEDFILE_DATABASE_URL, else the file's databaseUrl, else
// DATABASE_URL (a fallback), else the local default.
func (g *globals) config() (fileConfig, error) {
	if g.cfg != nil {
		return *g.cfg, nil
	}
	environ := g.environ
	if environ == nil {
		environ = os.Environ
	}
	cfg, err := loadConfig(g.configFile, environ)
	if err != nil {
		return fileConfig{}, err
	}
	switch fallback := lookup(environ, "DATABASE_URL"); {
	case g.dbFlag != "":
		g.databaseURL, g.databaseSource = g.dbFlag, "--database-url"
	case cfg.DatabaseURL != "":
		g.databaseURL, g.databaseSource = cfg.DatabaseURL, cfg.sourceOf("databaseUrl")
	case fallback != "":
		g.databaseURL, g.databaseSource = fallback, "DATABASE_URL"
	default:
		g.databaseURL, g.databaseSource = defaultDatabaseURL, "the default"
	}
	g.cfg = &cfg
	return cfg, nil
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	g := &globals{stdout: stdout, stderr: stderr}
	root := &cobra.Command{
		Use:   binaryName(),
		Short: "Stores uploaded files: metadata in PostgreSQL, bytes on disk or in S3",
		Example: `  uploadedfile serve --dev
  uploadedfile migrate up
  uploadedfile maintenance reconcile
  source <(uploadedfile completion bash)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			g.logger = slog.New(slog.NewJSONHandler(stderr, nil))
			slog.SetDefault(g.logger) // what libraries log goes out as JSON lines too
			if g.output != "text" && g.output != "json" {
				return fmt.Errorf("--output %q: want text or json", g.output)
			}
			return nil
		},
	}
	root.PersistentFlags().StringVarP(&g.output, "output", "o", "text", "text, or json: one JSON object per line, for scripts")
	root.PersistentFlags().DurationVar(&g.progressEvery, "progress-every", 5*time.Second, "with --output json, how often a long command prints a progress object")
	root.PersistentFlags().StringVar(&g.configFile, "config", os.Getenv("UPLOADEDFILE_CONFIG"), "YAML configuration file (env UPLOADEDFILE_CONFIG); UPLOADEDFILE_* variables override its keys, flags override both")
	root.PersistentFlags().StringVar(&g.dbFlag, "database-url", "",
		"PostgreSQL URL; the database is "+databasePrecedence)
	root.AddCommand(newMigrateCommand(g), newServeCommand(g), newMaintenanceCommand(g), newEventsCommand(g), newQuotaCommand(g), newVersionCommand(g))
	root.SetOut(stdout) // help and the completion scripts
	root.SetErr(stderr)
	return root
}

// databasePrecedence is where the database URL comes from, first found
// first, as --help and docs/configuration.md say it.
const databasePrecedence = "--database-url, else UPLOADEDFILE_DATABASE_URL, else databaseUrl in --config, else DATABASE_URL, else " + defaultDatabaseURL

// reachDatabase connects to the database once, so that a database that is
// not there is reported before anything else, as databaseError explains it.
func (g *globals) reachDatabase(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.Reach(cctx, g.databaseURL); err != nil {
		return g.databaseError(err)
	}
	return nil
}

// databaseError explains a database that cannot be reached: the URL that
// was tried (its password redacted), where it came from, and the fix.
func (g *globals) databaseError(err error) error {
	shown := "(an invalid URL)"
	if u, perr := url.Parse(g.databaseURL); perr == nil {
		shown = u.Redacted()
	}
	return fmt.Errorf("cannot reach the database at %s (from %s): %v\n"+
		"  start PostgreSQL there (Debian: pg_ctlcluster $(ls /etc/postgresql) main start), or give the right URL: --database-url, UPLOADEDFILE_DATABASE_URL or databaseUrl (DATABASE_URL is the last fallback)", shown, g.databaseSource, err)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

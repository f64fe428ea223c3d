package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/uploadedfile/uploadedfile/db/migrations"
	"github.com/uploadedfile/uploadedfile/internal/httpapi"
)

// serveOptions are the flags of `serve`.
type serveOptions struct {
	listen    string
	dev       bool
	noMigrate bool
	drain     time.Duration
}

func newServeCommand(g *globals) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP server",
		Long: `Run the HTTP server. Migrations are applied at start unless --no-migrate.

--dev is for a first local run: the database named in DATABASE_URL is created
when it does not exist yet.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return serve(cmd.Context(), g, o) },
	}
	cmd.Flags().StringVar(&o.listen, "listen", envOr("UPLOADEDFILE_LISTEN", "127.0.0.1:8080"), "address to listen on (env UPLOADEDFILE_LISTEN)")
	cmd.Flags().BoolVar(&o.dev, "dev", false, "development mode: create the database if it is missing")
	cmd.Flags().BoolVar(&o.noMigrate, "no-migrate", false, "do not apply migrations at start")
	cmd.Flags().DurationVar(&o.drain, "shutdown-timeout", 30*time.Second, "how long in-flight requests may take to finish on shutdown")
	return cmd
}

func serve(ctx context.Context, g *globals, o serveOptions) error {
	if o.dev {
		if err := ensureDatabase(ctx, g.databaseURL); err != nil {
			return err
		}
	}
	if !o.noMigrate {
		if err := migrations.Up(g.databaseURL); err != nil {
			return err
		}
	}
	pool, err := pgxpool.New(ctx, g.databaseURL)
	if err != nil {
		return errors.New("serve: the database URL is invalid")
	}
	defer pool.Close()

	mux := http.NewServeMux()
	httpapi.Health{Dependencies: map[string]httpapi.Pinger{"database": pool}}.Register(mux)

	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("serve: listen: %w", err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	g.logger.Info("listening", "addr", ln.Addr().String())
	fmt.Fprintf(g.stdout, "uploadedfile listening on http://%s\n", ln.Addr())

	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	g.logger.Info("shutting down", "drain", o.drain.String())
	shutdownCtx, cancel := context.WithTimeout(context.Background(), o.drain)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

// ensureDatabase creates the database named in databaseURL when it does not
// exist, connecting to the server's postgres database to do so.
func ensureDatabase(ctx context.Context, databaseURL string) error {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return errors.New("serve: the database URL is invalid")
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		return nil
	}
	conn, err := pgx.Connect(ctx, databaseURL)
	if err == nil {
		return conn.Close(ctx)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "3D000" { // invalid_catalog_name
		return fmt.Errorf("serve: connect to the database: %w", err)
	}
	u.Path = "/postgres"
	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return fmt.Errorf("serve: connect to create the database: %w", err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("serve: create database %s: %w", name, err)
	}
	return nil
}

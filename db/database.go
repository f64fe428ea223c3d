package db

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/uploadedfile/uploadedfile/internal/pgurl"
)

// Reach connects once to databaseURL, on a single connection of its own,
// and closes it: a database that is not there is reported before anything
// else runs. The error is the driver's, for the caller to explain.
func Reach(ctx context.Context, databaseURL string) error {
	conn, err := pgx.Connect(ctx, pgurl.SingleConn(databaseURL))
	if err != nil {
		return err
	}
	return conn.Close(ctx)
}

// CreateIfMissing creates the database databaseURL names when the server
// answers that it does not exist (SQLSTATE 3D000), connecting to the
// server's postgres database to do it; a URL that names no database, or a
// database that exists, is left as it is. For development servers: a
// production database is made by its operator.
func CreateIfMissing(ctx context.Context, databaseURL string) error {
	u, err := url.Parse(databaseURL)
	if err != nil {
		return ErrInvalidURL
	}
	name := strings.TrimPrefix(u.Path, "/")
	if name == "" {
		return nil
	}
	err = Reach(ctx, databaseURL)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case !errors.As(err, &pgErr) || pgErr.Code != "3D000": // invalid_catalog_name
		return fmt.Errorf("connect to the database: %w", err)
	}
	u.Path = "/postgres"
	admin, err := pgx.Connect(ctx, pgurl.SingleConn(u.String()))
	if err != nil {
		return fmt.Errorf("connect to create the database: %w", err)
	}
	defer func() { _ = admin.Close(ctx) }()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

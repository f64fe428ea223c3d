package service

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"
)

// ConfigurePool prepares a pool's configuration for the service: every
// connection encodes and decodes github.com/google/uuid values as binary
// UUIDs rather than through their driver.Valuer and sql.Scanner (text,
// parsed again -- about 7 % of a lookup's CPU). Go hosts that pass their
// own pool to New call it before pgxpool.NewWithConfig; an AfterConnect
// already set still runs, after it.
func ConfigurePool(cfg *pgxpool.Config) {
	next := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		pgxuuid.Register(conn.TypeMap())
		if next != nil {
			return next(ctx, conn)
		}
		return nil
	}
}

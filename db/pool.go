package db

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	pgxuuid "github.com/vgarvardt/pgx-google-uuid/v5"
)

// ErrInvalidURL means OpenPool could not parse the database URL. The URL itself
// is not repeated (it may carry a password).
var ErrInvalidURL = errors.New("the database URL is invalid")

// OpenPool opens the pool the service runs on, for every command that runs
// it (serve, maintenance, the tracks): ConfigurePool's codecs, tracer on
// every connection (nil: none) and RequestLimits -- unless the URL sets
// pool_max_conns, 32 connections (pgxpool's default of max(4, CPUs)
// queues an HTTP server's concurrent requests).
func OpenPool(ctx context.Context, databaseURL string, tracer pgx.QueryTracer) (*pgxpool.Pool, error) {
	return OpenPoolFor(ctx, databaseURL, tracer, RequestLimits)
}

// OpenPoolFor is OpenPool with the limits of one kind of work (zero
// fields: RequestLimits'). Parameters the URL sets (statement_timeout,
// lock_timeout, connect_timeout, pool_max_conns) win.
func OpenPoolFor(ctx context.Context, databaseURL string, tracer pgx.QueryTracer, limits Limits) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, ErrInvalidURL
	}
	if tracer != nil {
		cfg.ConnConfig.Tracer = tracer
	}
	ConfigurePool(cfg)
	limits.WithDefaults(RequestLimits).apply(cfg, strings.Contains(databaseURL, "pool_max_conns"))
	return pgxpool.NewWithConfig(ctx, cfg)
}

// ConfigurePool prepares a pool's configuration for the service: every
// connection encodes and decodes github.com/google/uuid values as binary
// UUIDs rather than through their driver.Valuer and sql.Scanner (text,
// parsed again -- about 7 % of a lookup's CPU), and copies a jsonb column
// into a json.RawMessage as PostgreSQL sent it instead of validating it
// again with encoding/json. Go hosts that pass their own pool to
// service.New call it before pgxpool.NewWithConfig; an AfterConnect
// already set still runs, after it.
func ConfigurePool(cfg *pgxpool.Config) {
	next := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		registerTypes(conn.TypeMap())
		if next != nil {
			return next(ctx, conn)
		}
		return nil
	}
}

// registerTypes installs the codecs ConfigurePool promises on m.
//
// pgx-google-uuid's Register alone encodes binary UUIDs but does not decode
// them: pgx plans a scan into a destination that implements sql.Scanner
// (uuid.UUID does) before it tries the registered wrappers, so each UUID
// was still rendered as text and parsed back (three allocations per
// column). uuidCodec plans those scans itself.
func registerTypes(m *pgtype.Map) {
	pgxuuid.Register(m)
	m.RegisterType(&pgtype.Type{Name: "uuid", OID: pgtype.UUIDOID, Codec: uuidCodec{}})
	jsonb, ok := m.TypeForOID(pgtype.JSONBOID)
	if ok {
		m.RegisterType(&pgtype.Type{Name: jsonb.Name, OID: jsonb.OID, Codec: rawJSONCodec{Codec: jsonb.Codec}})
	}
}

// uuidCodec is pgx-google-uuid's codec, with scans into *uuid.UUID and
// *uuid.NullUUID planned through its binary wrappers (no text round trip).
type uuidCodec struct{ pgxuuid.UUIDCodec }

// PlanScan implements pgtype.Codec.
func (c uuidCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	wrapper, next, ok := pgxuuid.TryWrapUUIDScanPlan(target)
	if !ok {
		return c.UUIDCodec.PlanScan(m, oid, format, target)
	}
	inner := c.UUIDCodec.PlanScan(m, oid, format, next)
	if inner == nil {
		return c.UUIDCodec.PlanScan(m, oid, format, target)
	}
	wrapper.SetNext(inner)
	if _, ok := target.(*uuid.UUID); ok {
		return nullKeepsScan{wrapper}
	}
	return wrapper
}

// nullKeepsScan is a scan that leaves its destination as it was for NULL,
// without an error, as uuid.UUID's sql.Scanner (which pgx used before)
// answers; the wrapper's own scan would fail on it.
type nullKeepsScan struct{ pgtype.ScanPlan }

// Scan implements pgtype.ScanPlan.
func (s nullKeepsScan) Scan(src []byte, dst any) error {
	if src == nil {
		return nil
	}
	return s.ScanPlan.Scan(src, dst)
}

// rawJSONCodec is pgx's jsonb codec, with a scan into *json.RawMessage
// that copies the document: PostgreSQL only sends valid JSON for jsonb,
// and encoding/json would scan it once more to prove it.
type rawJSONCodec struct{ pgtype.Codec }

// PlanScan implements pgtype.Codec.
func (c rawJSONCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	if _, ok := target.(*json.RawMessage); ok {
		if inner := c.Codec.PlanScan(m, oid, format, (*[]byte)(nil)); inner != nil {
			return rawJSONScan{bytes: inner}
		}
	}
	return c.Codec.PlanScan(m, oid, format, target)
}

// rawJSONScan scans jsonb into a *json.RawMessage through the codec's plan
// for *[]byte, which copies the document (after the binary format's
// version byte) and leaves NULL a nil RawMessage, as pgx's own scan does.
type rawJSONScan struct{ bytes pgtype.ScanPlan }

// Scan implements pgtype.ScanPlan.
func (s rawJSONScan) Scan(src []byte, dst any) error {
	return s.bytes.Scan(src, (*[]byte)(dst.(*json.RawMessage)))
}

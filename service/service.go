// Package service is the Go API of uploadedfile: the file
// service of docs/behaviour.md and its configuration and types, for Go hosts that
// embed the service instead of calling it over HTTP.
//
// Every normal operation resolves a trusted scope from the RequestContext
// in its context.Context (WithRequestContext), asks the authorization
// policy, and then acts with the tenant (and department, and for the owner
// decision the owner) in every query. Missing, malformed, denied,
// cross-scope, in-flight and deleted resources all fail with the same
// ErrNotFound. Methods named UnsafeSystem* bypass that scope for trusted
// background maintenance only.
//
// Bytes are stored by a local-disk or S3 driver; metadata in PostgreSQL
// through the typed queries of db/queries. Deletion is durable: a claim is
// written before any storage I/O, and the sweeps finish what a crash or a
// storage failure left.
//
// Runnable examples (example_test.go, run by `make test` against a real
// PostgreSQL, and shown with each name on package documentation sites):
//
//	Example                           New with a pgx pool and the local driver, a first upload
//	ExampleService_Upload             a buffer upload, and a refused one with its rule
//	ExampleService_InitiateUpload     the direct lifecycle: initiate, write, complete
//	ExampleService_MarkUsed           attach inside the caller's own transaction
//	ExampleService_DownloadAttached   read through an attachment, with a policy
//	ExampleService_DeleteByID         durable deletion
package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/imagevariant"
	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
	s3store "github.com/uploadedfile/uploadedfile/internal/storage/s3"
	"github.com/uploadedfile/uploadedfile/internal/storage/storeopen"
)

// DB is what the service needs of PostgreSQL: queries, pipelined batches
// (the buffer upload's statements, committed in groups under load) and
// transactions for batch operations. *pgxpool.Pool satisfies it; a pool's
// single-row reads then reuse their scan plans per connection, a DB of
// another type is used as it is (db.Wrap).
type DB = db.Conn

// Service is the file service: uploads, reads, attachment, deletion and
// the sweeps' operations (docs/behaviour.md).
type Service struct {
	cfg resolved
	db  DB
	// keysDB runs the idempotency keys' statements: db.AsyncCommit over db,
	// or db itself when the service was given a transaction.
	keysDB  db.DBTX
	q       *db.Queries
	store   storage.Store
	faults  *storeFaults // shared by every copy of the service
	log     *slog.Logger
	now     func() *time.Time // nil result: the database clock
	fetcher Fetcher
	metrics prometheus.Registerer
	keys    signingKeys
	scanner Scanner
	tracer  trace.TracerProvider
	imager  *imagevariant.Generator
	// uploads commits the buffer upload's statements in groups.
	uploads *db.UploadStatements
	// probe is the store's last probe (storeUp).
	probe storeProbe
	// uploadSizes observes the size of every upload that became ready
	// (WithMetrics; nil: none).
	uploadSizes prometheus.Observer
	// completionBeat is how often a running completion extends its lease
	// (0: completionLease/3; tests shorten it).
	completionBeat time.Duration
	// activationBeat is how often a buffer upload being scanned and stored
	// extends its activation lease (0: ActivationLease/3; tests shorten it).
	activationBeat time.Duration
}

// storeProbe is the outcome of the store's last probe, and when.
type storeProbe struct {
	mu  sync.Mutex
	at  time.Time
	err error
}

// probeEvery is how long a probe of the store is trusted.
const probeEvery = 2 * time.Second

// storeUp reports whether the object store answers, from a probe at most
// probeEvery old: an initiate on S3 makes no storage round trip of its own,
// so without it a stopped endpoint, a missing bucket or refused credentials
// would still get targets that cannot work. The local driver's disk is
// always there.
func (s *Service) storeUp(ctx context.Context) error {
	if s.store.Kind() != storage.KindS3 {
		return nil
	}
	s.probe.mu.Lock()
	defer s.probe.mu.Unlock()
	if !s.probe.at.IsZero() && time.Since(s.probe.at) < probeEvery {
		return s.probe.err
	}
	pctx, cancel := context.WithTimeout(ctx, probeEvery)
	defer cancel()
	s.probe.err, s.probe.at = s.Ping(pctx), time.Now()
	return s.probe.err
}

// Option adjusts a Service beyond its Config.
type Option func(*Service)

// WithLogger sets the logger (default slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Service) { s.log = l } }

// WithTracerProvider traces the group commit's flushes and every storage
// call of a store the service opens itself (SQL spans come from the pool's
// tracer, internal/tracing.PGX). Without it nothing is traced.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(s *Service) { s.tracer = tp } }

// WithStore replaces the storage driver the Config describes: the service
// uses st as it is given (cmd opens and instruments it with storeopen;
// tests inject fault-injecting stores) and closes it on Close.
func WithStore(st storage.Store) Option { return func(s *Service) { s.store = st } }

// WithMetrics registers the service's metrics in reg (upload sizes) and,
// for the store the service opens itself, counts storage requests and the
// object bytes that pass through the process.
func WithMetrics(reg prometheus.Registerer) Option { return func(s *Service) { s.metrics = reg } }

// WithClock pins the time every query uses (tests); by default the
// database clock is used.
func WithClock(now func() time.Time) Option {
	return func(s *Service) {
		s.now = func() *time.Time { t := now(); return &t }
	}
}

// New validates cfg, opens the storage driver and returns the service. The
// caller owns database and closes the service.
func New(ctx context.Context, cfg Config, database DB, opts ...Option) (*Service, error) {
	r, err := resolve(cfg)
	if err != nil {
		return nil, err
	}
	if database == nil {
		return nil, errors.New("uploadedfile: a database is required")
	}
	s := &Service{cfg: r, db: db.Wrap(database), q: db.New(), log: slog.Default(), now: func() *time.Time { return nil }, faults: &storeFaults{}}
	s.keysDB = db.AsyncCommit(s.db)
	if _, inTx := database.(db.Tx); inTx {
		s.keysDB = s.db // a host's transaction commits as the host says
	}
	s.imager = imagevariant.New(imagevariant.Limits{MaxPixels: r.Variants.MaxPixels, Concurrency: r.Variants.Concurrency, Engine: r.variantEngine})
	for _, o := range opts {
		o(s)
	}
	if s.store == nil {
		if err := s.openStore(ctx, r); err != nil {
			return nil, err
		}
	}
	if s.metrics != nil {
		sizes := prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "uploadedfile_upload_size_bytes", Help: "Size of the uploads that became ready (buffer uploads, clones and completed direct uploads).",
			Buckets: prometheus.ExponentialBuckets(1<<10, 4, 9), // 1 KiB .. 64 MiB
		})
		s.metrics.MustRegister(sizes)
		s.uploadSizes = sizes
	}
	if s.fetcher == nil {
		s.fetcher = s.defaultFetcher()
	}
	s.uploads = s.newUploadStatements()
	if s.cfg.ScanMode == ScanGate && s.scanner == nil {
		return nil, configError("scan.mode", "gate needs a scanner (WithScanner; the server builds one from scan.clamd)")
	}
	return s, nil
}

// openStore opens and instruments the store r describes: a service given
// no store (an embedding host's) assembles its own, as cmd does.
func (s *Service) openStore(ctx context.Context, r resolved) error {
	st, err := storeopen.Open(ctx, r.storeSettings())
	if err != nil {
		return fmt.Errorf("uploadedfile config: %w", err)
	}
	s.store = storeopen.Instrument(st, s.metrics, s.tracer)
	return nil
}

// StoreSettings is the store c describes, its defaults applied: what
// storeopen.Open opens. An invalid c is its configuration error.
func StoreSettings(c Config) (storeopen.Settings, error) {
	r, err := resolve(c)
	if err != nil {
		return storeopen.Settings{}, err
	}
	return r.storeSettings(), nil
}

func (r resolved) storeSettings() storeopen.Settings {
	return storeopen.Settings{
		Kind:  storage.Kind(r.Driver),
		Local: local.Config{Root: r.LocalRoot},
		S3: s3store.Config{
			Bucket: r.Bucket, Region: r.Region, Endpoint: r.Endpoint, ForcePathStyle: r.ForcePathStyle,
			AccessID: r.AccessID, AccessKey: r.AccessKey, PublicAccessMode: r.PublicAccessMode, Timeout: r.StorageTimeout,
		},
	}
}

// Close releases the storage driver.
func (s *Service) Close() error {
	return s.store.Close()
}

// Driver returns the storage driver in use: "local" or "s3".
func (s *Service) Driver() string { return string(s.store.Kind()) }

// Ping checks that the storage is reachable (for readiness).
func (s *Service) Ping(ctx context.Context) error {
	if err := s.store.Ping(ctx); err != nil {
		return err
	}
	return s.faults.current()
}

// observeUpload counts a file that became ready by its size.
func (s *Service) observeUpload(size int64) {
	if s.uploadSizes != nil {
		s.uploadSizes.Observe(float64(size))
	}
}

// clock is the service's time outside a query: the pinned time (WithClock)
// or the host's clock, which a deployment keeps in step with the
// database's. A signed target's expiry, written from the database clock, is
// checked against it before any byte is read; the locked write checks it
// again in the database.
func (s *Service) clock() time.Time {
	if t := s.now(); t != nil {
		return *t
	}
	return time.Now()
}

// detached returns a context for cleanup that must finish even when the
// request's context was cancelled (a client disconnecting must not leave a
// claimed row unsettled), bounded in time.
func detached(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
}

// internalError logs err and returns the public form of an operation's
// failure (classifyFailure): a dependency's outage as an *UnavailableError
// carrying code, anything else as code. Details stay in the log.
func (s *Service) internalError(ctx context.Context, code *Error, msg string, err error, attrs ...any) error {
	public := classifyFailure(code, err)
	s.faults.failed(ctx, s.log, err)
	level := slog.LevelError
	if errors.Is(public, ErrUnavailable) || errors.Is(public, ErrConflict) {
		level = slog.LevelWarn
	}
	s.log.Log(ctx, level, msg, append(attrs, slog.String("error", err.Error()), slog.String("code", public.Error()))...)
	return public
}

func isNoRows(err error) bool { return db.IsNoRows(err) }

// EffectiveConfig returns the configuration in force after defaults and
// bounds were applied, with the access key redacted (for operators and
// start-up logs).
func (s *Service) EffectiveConfig() Config {
	c := s.cfg.Config
	if c.AccessKey != "" {
		c.AccessKey = "REDACTED"
	}
	return c
}

package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/db/migrations"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay/variantsink"
	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/adapter/tracks"
	"github.com/uploadedfile/uploadedfile/internal/logsink"
	"github.com/uploadedfile/uploadedfile/internal/tracing"
	"github.com/uploadedfile/uploadedfile/service"
)

// serveOptions are the flags of `serve`.
type serveOptions struct {
	listen    string
	dev       bool
	migrate   bool
	noMigrate bool
	noSweeps  bool
	debug     string
	metrics   string
	drain     time.Duration
	// drainDelay is how long a stopping replica keeps serving with its
	// readiness failed before it stops accepting.
	drainDelay time.Duration
}

func newServeCommand(g *globals) *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the HTTP server",
		Example: `  uploadedfile serve --dev
  uploadedfile serve --config /etc/uploadedfile.yaml --listen 0.0.0.0:8080 --metrics-listen 127.0.0.1:9090`,
		Long: `Run the HTTP server. Configuration: --config FILE (YAML, the option names
of docs/configuration.md) and UPLOADEDFILE_<OPTION> environment variables;
the database is ` + databasePrecedence + `. With --dev, migrations are
applied at start (unless --no-migrate); otherwise only with --migrate (or
migrate: true): deploy with uploadedfile migrate up, then roll the
replicas. serve refuses to start against a schema outside its window: older
than the binary's, or newer without declaring itself compatible with it.

--dev is for a first local run: the database is created when missing, files
go to ./upload, a random HMAC secret signs a ready-to-use token, and the
token and curl lines to try the API are printed.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := g.config()
			if err != nil {
				return err
			}
			o.applyFile(cfg, cmd.Flags().Changed)
			return serve(cmd.Context(), g, o, cfg)
		},
	}
	cmd.Flags().StringVar(&o.listen, "listen", envOr("UPLOADEDFILE_LISTEN", "127.0.0.1:8080"), "address to listen on (env UPLOADEDFILE_LISTEN)")
	cmd.Flags().BoolVar(&o.dev, "dev", false, "development mode: local files, a random signing secret, a printed token")
	cmd.Flags().BoolVar(&o.migrate, "migrate", false, "apply migrations at start (the default with --dev only; config migrate)")
	cmd.Flags().BoolVar(&o.noMigrate, "no-migrate", false, "do not apply migrations at start, even with --dev")
	cmd.Flags().BoolVar(&o.noSweeps, "no-maintenance", false, "do not run the maintenance cron tracks in this process")
	cmd.Flags().StringVar(&o.debug, "debug-listen", "", "serve net/http/pprof on this address (e.g. 127.0.0.1:6060; off by default)")
	cmd.Flags().StringVar(&o.metrics, "metrics-listen", "", "serve /metrics on this operator address (e.g. 127.0.0.1:9090; config metricsListen; off by default)")
	cmd.Flags().DurationVar(&o.drain, "shutdown-timeout", 30*time.Second, "how long in-flight requests may take to finish on shutdown")
	cmd.Flags().DurationVar(&o.drainDelay, "shutdown-delay", 0, "on SIGTERM, how long to keep serving with /readyz failing (every answer closing its connection) before no new connection is accepted: at least the balancer's health-check interval times its fall count")
	return cmd
}

func serve(ctx context.Context, g *globals, o serveOptions, cfg fileConfig) error {
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("serve: listen: %w", err)
	}
	defer func() { _ = ln.Close() }()
	base := "http://" + ln.Addr().String()
	var dev devSetup
	if o.dev && !loopback(ln.Addr()) {
		return fmt.Errorf("serve --dev: --listen %s is not a loopback address; --dev hands its token to every page it serves, so it listens on 127.0.0.1 or ::1 only (drop --dev to serve on other addresses)", o.listen)
	}
	if o.dev {
		if dev, err = devDefaults(ctx, g, &cfg, base); err != nil {
			return err
		}
	}
	if err := g.reachDatabase(ctx); err != nil {
		return err
	}
	if o.migrate {
		logf := func(format string, args ...any) { g.logger.Warn(fmt.Sprintf(format, args...)) }
		if err := migrations.Apply(ctx, g.databaseURL, logf); err != nil {
			return err
		}
	}
	tracer, shutdown, err := serveTracing(ctx, cfg)
	if err != nil {
		return err
	}
	defer shutdown() // flushes the last spans
	sink := g.useLogSink()
	defer func() { _ = sink.Close() }() // writes the access lines still waiting
	pools, err := openServePools(ctx, g.databaseURL, tracer, cfg.Database)
	if err != nil {
		return err
	}
	defer pools.Close()
	pool := pools.requests
	if err := checkSchema(ctx, g, pool, o.dev); err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	svc, err := newServeService(ctx, g, cfg, pools.conn(), reg, tracer)
	if err != nil {
		return err
	}
	defer func() { _ = svc.Close() }()
	draining := &atomic.Bool{}
	handler, guard, health, err := newServeHandler(ctx, g, cfg, pool, svc, reg, tracer, draining)
	if err != nil {
		return err
	}
	defer guard.Close()
	metricsURL, stopOperator, err := serveOperator(g, o, reg, health)
	if err != nil {
		return err
	}
	defer stopOperator()
	runner := tracks.New(svc, pools.sweeps, tracks.Options{Logger: g.logger, Registerer: reg, TracerProvider: tracer})
	relay, closeSinks, err := eventRelay(ctx, g, cfg.Events, pools.sweeps, reg, svc)
	if err != nil {
		return err
	}
	defer closeSinks()
	handler, devTok, err := withServePages(handler, base, o, cfg, dev)
	if err != nil {
		return err
	}
	srv, inflight := httpServer(handler, cfg, draining)
	g.logger.Info("listening", "addr", ln.Addr().String(), "driver", svc.Driver())
	fmt.Fprintf(g.stdout, "uploadedfile listening on %s\n", base)
	if o.dev {
		printDevHelp(g, dev, base, metricsURL, devTok)
	}
	return runServer(ctx, g.logger, background{
		sweeps: !o.noSweeps, runner: runner, relay: relay,
		srv: srv, ln: httpapi.LimitConnectionsPerClient(ln, cfg.maxConnectionsPerClient()), drain: o.drain, drainDelay: o.drainDelay, inflight: inflight,
		draining: draining, pool: pools.sweeps,
	})
}

// useLogSink sends serve's lines through a log sink on stderr: the access
// lines (appended by httpapi, Options.AccessLogWriter) wait in it and go
// out together, every other line at once, after them. Every line logged
// inside a request carries its request id (and, with tracing, its trace
// and span).
func (g *globals) useLogSink() *logsink.Sink {
	sink := logsink.New(g.stderr, 0, 0)
	g.logger = slog.New(tracing.LogHandler{Handler: slog.NewJSONHandler(sink.Immediate(), nil), RequestID: httpapi.RequestIDFrom})
	slog.SetDefault(g.logger)
	g.accessLines = sink.Deferred()
	return sink
}

// serveTracing starts the OpenTelemetry exporter when tracing.endpoint is
// set (a nil provider: off); shutdown flushes the last spans.
func serveTracing(ctx context.Context, cfg fileConfig) (trace.TracerProvider, func(), error) {
	tp, err := tracing.New(ctx, tracing.Config{Endpoint: cfg.Tracing.Endpoint, ServiceName: cfg.Tracing.ServiceName})
	if err != nil || tp == nil {
		return nil, func() {}, err
	}
	return tp, func() { _ = tp.Shutdown(context.Background()) }, nil
}

// newServeService builds the service serve runs: its configuration, the
// scanner, metrics and tracing; a configured value past its bound is
// logged with the bound used.
func newServeService(ctx context.Context, g *globals, cfg fileConfig, conn db.Conn, reg prometheus.Registerer, tracer trace.TracerProvider) (*service.Service, error) {
	scfg, err := cfg.serviceConfig()
	if err != nil {
		return nil, err
	}
	scan, err := cfg.scanner(ctx, service.EffectiveMaxFileSize(scfg), true)
	if err != nil {
		return nil, err
	}
	store, err := openStore(ctx, scfg, reg, tracer)
	if err != nil {
		return nil, err
	}
	opts := append([]service.Option{service.WithStore(store), service.WithLogger(g.logger), service.WithMetrics(reg)}, scan...)
	if tracer != nil {
		opts = append(opts, service.WithTracerProvider(tracer))
	}
	svc, err := service.New(ctx, scfg, conn, opts...)
	if err != nil {
		_ = store.Close()
		return nil, err
	}
	for _, c := range svc.Clamped() {
		g.logger.Warn("configured value past its bound: the bound is used", "key", c.Option, "given", c.Given, "used", c.Used, "source", cfg.sourceOf(c.Option))
	}
	return svc, nil
}

// newServeHandler builds the API's handler over svc: the token guard (the
// caller closes it), readiness (checked once now, logged when not ready)
// and the HTTP surface.
func newServeHandler(ctx context.Context, g *globals, cfg fileConfig, pool *db.Pool, svc *service.Service, reg prometheus.Registerer, tracer trace.TracerProvider, draining *atomic.Bool) (http.Handler, *httpapi.Guard, *httpapi.Health, error) {
	auth, err := cfg.authConfig(g.logger)
	if err != nil {
		return nil, nil, nil, err
	}
	guard, err := httpapi.NewGuard(ctx, auth)
	if err != nil {
		return nil, nil, nil, err
	}
	health := readiness(cfg, pool, svc, guard, draining)
	health.Logger, health.Registerer = g.logger, reg
	if causes := health.Check(ctx, 5*time.Second); len(causes) > 0 {
		g.logger.Error("starting, not ready", "causes", causes)
	}
	if lines := health.Unavailable(ctx, 5*time.Second); len(lines) > 0 {
		g.logger.Warn("starting with a shared dependency unavailable (requests that need it answer 503 until it is back)", "dependencies", lines)
	}
	handler := httpapi.New(httpapi.Options{
		Service: svc, Guard: guard, Logger: g.logger, DownloadPath: svc.EffectiveConfig().DownloadPath,
		Health: health, Registerer: reg, TracerProvider: tracer,
		BodyReadTimeout: cfg.BodyReadTimeout, BodyIdleTimeout: cfg.BodyIdleTimeout,
		CORSAllowedOrigins: cfg.CORS.AllowedOrigins,
		AccessLog:          cfg.AccessLog == nil || *cfg.AccessLog,
		AccessLogWriter:    g.accessLines,
	})
	return handler, guard, health, nil
}

// applyFile takes the file's listen and migrate options where no flag set
// them (changed reports whether a flag was given).
func (o *serveOptions) applyFile(cfg fileConfig, changed func(string) bool) {
	if cfg.Listen != "" && !changed("listen") {
		o.listen = cfg.Listen
	}
	if !changed("migrate") {
		o.migrate = o.dev
		if cfg.Migrate != nil {
			o.migrate = *cfg.Migrate
		}
	}
	if o.noMigrate {
		o.migrate = false
	}
	if cfg.MetricsListen != "" && !changed("metrics-listen") {
		o.metrics = cfg.MetricsListen
	}
}

// eventRelay builds the lifecycle event relay (nil unless events.relay is
// on) and the function that closes its sinks. With eager variant presets,
// a built-in sink generates them after each file.ready
// (internal/adapter/eventrelay/variantsink).
func eventRelay(ctx context.Context, g *globals, c eventsConfig, pool *db.Pool, reg prometheus.Registerer, svc *service.Service) (*eventrelay.Relay, func(), error) {
	if !c.relayEnabled() {
		return nil, func() {}, nil
	}
	var extra []eventrelay.SinkConfig
	if len(svc.EagerVariantPresets()) > 0 {
		extra = append(extra, variantsink.Config(svc))
	}
	return c.relay(ctx, pool, g, reg, extra...)
}

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/sync/errgroup"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/db/migrations"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay/variantsink"
	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/adapter/tracks"
	"github.com/uploadedfile/uploadedfile/internal/adapter/webui"
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
	runner := tracks.New(svc, pools.sweeps, g.logger, reg)
	if tracer != nil {
		runner.SetTracer(tracer)
	}
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

// withServePages puts the development page and the API reference in front
// of handler when they are on (--dev; docs.enabled), with the one
// development token the pages and the printed help share (two signed a
// second apart would differ).
func withServePages(handler http.Handler, base string, o serveOptions, cfg fileConfig, dev devSetup) (http.Handler, string, error) {
	devTok := ""
	if o.dev && dev.secret != nil {
		var err error
		if devTok, err = devToken(dev.secret); err != nil {
			return nil, "", err
		}
	}
	docs := o.dev
	if cfg.Docs.Enabled != nil {
		docs = *cfg.Docs.Enabled
	}
	handler, err := withPages(handler, base, o.dev, docs, devTok)
	return handler, devTok, err
}

// serveOperator starts the operator listeners: /metrics (--metrics-listen;
// a loopback one in development) and pprof (--debug-listen). It returns
// the metrics URL for the printed help and a function that stops both.
func serveOperator(g *globals, o serveOptions, reg *prometheus.Registry, health httpapi.Health) (string, func(), error) {
	var stops []func()
	stopAll := func() {
		for _, stop := range stops {
			stop()
		}
	}
	if o.metrics == "" && o.dev {
		o.metrics = "127.0.0.1:0"
	}
	metricsURL := "off (--metrics-listen)"
	if o.metrics != "" {
		addr, stop, err := serveMetrics(o.metrics, reg, health)
		if err != nil {
			return "", nil, err
		}
		stops = append(stops, stop)
		metricsURL = "http://" + addr + "/metrics"
		g.logger.Info("metrics listening", "addr", addr)
		fmt.Fprintf(g.stdout, "metrics on %s\n", metricsURL)
	}
	if o.debug != "" {
		addr, stop, err := serveDebug(o.debug)
		if err != nil {
			stopAll()
			return "", nil, err
		}
		stops = append(stops, stop)
		g.logger.Info("debug listening", "addr", addr)
	}
	return metricsURL, stopAll, nil
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
	opts := append([]service.Option{service.WithLogger(g.logger), service.WithMetrics(reg)}, scan...)
	if tracer != nil {
		opts = append(opts, service.WithTracerProvider(tracer))
	}
	svc, err := service.New(ctx, scfg, conn, opts...)
	if err != nil {
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
func newServeHandler(ctx context.Context, g *globals, cfg fileConfig, pool *db.Pool, svc *service.Service, reg prometheus.Registerer, tracer trace.TracerProvider, draining *atomic.Bool) (http.Handler, *httpapi.Guard, httpapi.Health, error) {
	auth, err := cfg.authConfig(g.logger)
	if err != nil {
		return nil, nil, httpapi.Health{}, err
	}
	guard, err := httpapi.NewGuard(ctx, auth)
	if err != nil {
		return nil, nil, httpapi.Health{}, err
	}
	health := readiness(cfg, pool, svc, guard, draining).WithLog(g.logger, reg)
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

// httpServer is the API's server over handler: bodies under their idle
// deadline, headers bounded in time and size, in-flight requests counted,
// and once draining is set every answer closes its connection.
func httpServer(handler http.Handler, cfg fileConfig, draining *atomic.Bool) (*http.Server, *inflightRequests) {
	inflight := &inflightRequests{draining: draining}
	handler = httpapi.BodyDeadline(handler, cfg.BodyIdleTimeout)
	return &http.Server{Handler: inflight.wrap(handler), ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: maxHeaderBytes}, inflight
}

// maxHeaderBytes bounds a request's headers (net/http's default is 1 MiB):
// room for a bearer token of httpapi.MaxTokenBytes and every header a
// browser sends, no more.
const maxHeaderBytes = 64 << 10

// background is what serve runs once everything that can fail at start
// has succeeded: the HTTP server, and the maintenance tracks and the event
// relay when enabled.
type background struct {
	sweeps bool
	runner *tracks.Runner
	relay  *eventrelay.Relay // nil: no relay in this process
	srv    *http.Server
	ln     net.Listener
	drain  time.Duration
	// drainDelay: serve on, not ready, this long before shutting down.
	drainDelay time.Duration
	inflight   *inflightRequests
	// draining turns /readyz 503 once shutdown starts.
	draining *atomic.Bool
	// pool records the replica's heartbeat (uploaded_file_replica).
	pool *db.Pool
}

// runServer runs b's parts under one context of their own: the first that
// fails stops the others and is serve's error (the process exits non-zero
// with it); a signal (ctx done) stops them all, draining in-flight
// requests, and is a clean exit.
func runServer(ctx context.Context, log *slog.Logger, b background) error {
	group, gctx := errgroup.WithContext(ctx)
	if b.sweeps {
		group.Go(func() error {
			if err := b.runner.Schedule(gctx); err != nil {
				return fmt.Errorf("maintenance schedule: %w", err)
			}
			return nil
		})
	}
	if b.relay != nil {
		group.Go(func() error {
			if err := b.relay.Run(gctx); err != nil {
				return fmt.Errorf("event relay: %w", err)
			}
			return nil
		})
	}
	group.Go(func() error { return heartbeat(gctx, log, b.pool) })
	group.Go(func() error { return serveHTTP(gctx, log, b) })
	return group.Wait()
}

// serveHTTP serves b.ln until ctx ends, then shuts the server down: new
// connections are refused and in-flight requests get b.drain to finish;
// those still running then are cut, and their number logged.
func serveHTTP(ctx context.Context, log *slog.Logger, b background) error {
	errc := make(chan error, 1)
	go func() { errc <- b.srv.Serve(b.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	// Not ready from now on, and every answer closes its connection
	// (Connection: close): the balancer stops sending new requests and
	// keeps no connection to this replica open, before the listener
	// closes. Idle keep-alive connections stay open through the delay: a
	// balancer that still counts this replica in may be sending a request
	// on one at the very moment it would be closed, and that request
	// would fail with no answer (HAProxy's 502).
	b.draining.Store(true)
	if b.drainDelay > 0 {
		log.Info("draining: not ready, still serving", "delay", b.drainDelay.String())
		time.Sleep(b.drainDelay)
	}
	b.srv.SetKeepAlivesEnabled(false)
	log.Info("shutting down", "drain", b.drain.String(), "in_flight", b.inflight.count())
	shutdownCtx, cancel := context.WithTimeout(context.Background(), b.drain)
	defer cancel()
	if err := b.srv.Shutdown(shutdownCtx); err != nil {
		cut := b.inflight.count()
		_ = b.srv.Close()
		log.Warn("shutdown: drain timeout reached; requests cut", "cut", cut, "drain", b.drain.String())
	}
	return nil
}

// inflightRequests counts the requests being served, for the shutdown's
// log line.
type inflightRequests struct {
	n atomic.Int64
	// draining: answer with Connection: close (nil: never).
	draining *atomic.Bool
}

func (i *inflightRequests) count() int64 { return i.n.Load() }

func (i *inflightRequests) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i.n.Add(1)
		defer i.n.Add(-1)
		if i.draining != nil && i.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// devSetup is what devDefaults settled: the secret the development token
// is signed with (nil: tokens come from the configured keys) and the words
// the start-up text uses for the store and the secret.
type devSetup struct {
	secret  []byte
	storage string
	signing string
}

// devDefaults fills in a first local run: the database created, local
// files under ./upload unless a store is configured, this server as host,
// and a random HMAC secret unless keys are configured.
func devDefaults(ctx context.Context, g *globals, cfg *fileConfig, base string) (devSetup, error) {
	var d devSetup
	if err := ensureDatabase(ctx, g.databaseURL); err != nil {
		return d, g.databaseError(err)
	}
	if cfg.Driver == "" && cfg.AccessID == "" {
		cfg.Driver = service.DriverLocal
	}
	if cfg.LocalRoot == "" {
		abs, err := filepath.Abs("upload")
		if err != nil {
			return d, err
		}
		cfg.LocalRoot = abs
	}
	if cfg.Driver == service.DriverS3 || (cfg.Driver == "" && cfg.AccessID != "") {
		d.storage = "files in the S3 bucket " + cfg.Bucket
		if cfg.Endpoint != "" {
			d.storage += " at " + cfg.Endpoint
		}
	} else {
		d.storage = "files under " + cfg.LocalRoot
	}
	if cfg.Host == "" {
		cfg.Host = base
	}
	// The development page is served from this origin.
	cfg.CORS.AllowedOrigins = append(cfg.CORS.AllowedOrigins, base)
	switch {
	case cfg.Auth.HMACSecret != "":
		d.secret, d.signing = []byte(cfg.Auth.HMACSecret), "tokens signed with the configured secret (auth.hmacSecret)"
	case cfg.Auth.JWKSFile != "" || cfg.Auth.JWKSURL != "":
		d.signing = "tokens verified with the configured keys (auth.jwksUrl or auth.jwksFile); no development token"
	default:
		secret := make([]byte, 32)
		_, _ = rand.Read(secret)
		cfg.Auth.HMACSecret = hex.EncodeToString(secret)
		d.secret, d.signing = []byte(cfg.Auth.HMACSecret), "a random signing secret for this run"
	}
	return d, nil
}

// devToken is the token of the development user: "dev-user" of tenant
// "dev", with the host scope, valid 12 hours.
func devToken(secret []byte) (string, error) {
	claims := jwt.MapClaims{"sub": "dev-user", "tenant": "dev", "scope": httpapi.HostScope, "exp": time.Now().Add(12 * time.Hour).Unix(), "iat": time.Now().Unix()}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

// withPages puts the pages in front of the API: the development upload
// page at "/" (dev only, signed in with the development token) and the API
// reference at /docs/ (when enabled; signed in only in dev).
func withPages(api http.Handler, base string, dev, docs bool, token string) (http.Handler, error) {
	if !dev && !docs {
		return api, nil
	}
	mux := http.NewServeMux()
	mux.Handle("/", api)
	// A page that carries the development token answers only for the
	// listener's own host names: a DNS-rebinding page (its own name,
	// pointed at 127.0.0.1) cannot read the token.
	signedIn := func(h http.Handler) http.Handler { return h }
	if token != "" {
		signedIn = func(h http.Handler) http.Handler { return ownHostOnly(base, h) }
	}
	if dev {
		page, err := webui.Handler(webui.Config{BaseURL: base, Token: token})
		if err != nil {
			return nil, err
		}
		mux.Handle("GET /{$}", signedIn(page))
		mux.Handle("GET /_dev/", signedIn(page))
	}
	if docs {
		ref, err := webui.DocsHandler(webui.DocsConfig{BaseURL: base, Token: token})
		if err != nil {
			return nil, err
		}
		mux.Handle("GET /docs", signedIn(ref))
		mux.Handle("GET /docs/", signedIn(ref))
	}
	return mux, nil
}

// loopback reports whether addr is a loopback address.
func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// ownHostOnly serves next only to requests whose Host is the listener's
// own (base's host and port, or localhost with that port); any other is
// 421 Misdirected Request and carries nothing.
func ownHostOnly(base string, next http.Handler) http.Handler {
	u, _ := url.Parse(base)
	own := map[string]bool{u.Host: true, net.JoinHostPort("localhost", u.Port()): true}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !own[strings.ToLower(r.Host)] {
			http.Error(w, "misdirected request: this page answers only at "+base, http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// printDevHelp prints what the development server runs on, the pages'
// addresses, a token for the dev user and curl lines to try the API.
func printDevHelp(g *globals, dev devSetup, base, metricsURL, token string) {
	fmt.Fprintf(g.stdout, `
Development mode: %s, %s.

  upload page:    %s/
  API reference:  %s/docs/
  metrics:        %s
`, dev.storage, dev.signing, base, base, metricsURL)
	if token == "" {
		fmt.Fprint(g.stdout, "\nSign in with a token your key set verifies.\n\n")
		return
	}
	fmt.Fprintf(g.stdout, `
A token for user "dev-user" of tenant "dev", valid 12 hours:

  export TOKEN=%s

Try it:

  printf 'hello, uploadedfile\n' > hello.txt
  curl -s -H "Authorization: Bearer $TOKEN" -F file=@hello.txt %s/uploaded-file
  curl -s -H "Authorization: Bearer $TOKEN" %s/uploaded-file/<id>
  curl -s -H "Authorization: Bearer $TOKEN" %s/uploaded-file/<id>/download
  curl -s -X DELETE -H "Authorization: Bearer $TOKEN" %s/uploaded-file/<id>

`, token, base, base, base, base)
}

// ensureDatabase creates the database named in databaseURL when it does not
// exist, connecting to the server's postgres database to do so.
func ensureDatabase(ctx context.Context, databaseURL string) error {
	if err := db.CreateIfMissing(ctx, databaseURL); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
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

// serveMetrics serves /metrics and /dependencies (the state of every
// readiness gate and shared dependency, as JSON) on their own listener, for the operator's
// scraper: the public listener never serves it. It returns the bound
// address and a function that stops it.
func serveMetrics(addr string, reg *prometheus.Registry, health httpapi.Health) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("serve: metrics listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /dependencies", health.ServeDependencies)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
}

// serveDebug serves the pprof handlers on their own listener, apart from
// the API (no token: bind it to loopback).
// It returns the bound address and a function that stops it.
func serveDebug(addr string) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("serve: debug listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return ln.Addr().String(), func() { _ = srv.Close() }, nil
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

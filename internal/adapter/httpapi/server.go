package httpapi

import (
	"cmp"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	api "github.com/uploadedfile/uploadedfile/gen/api"
	"github.com/uploadedfile/uploadedfile/internal/filecheck"
	"github.com/uploadedfile/uploadedfile/service"
)

// MultipartCeiling is the absolute size of a multipart upload body: the
// 25 MiB file ceiling plus room for the form's headers and fields.
const MultipartCeiling = filecheck.AbsoluteMaxFileSize + 64<<10

// jsonBodyLimit bounds every JSON request body.
const jsonBodyLimit = 64 << 10

// Server implements the generated strict server over a service.Service.
type Server struct {
	svc    *service.Service
	log    *slog.Logger
	health *Health
}

var _ api.StrictServerInterface = (*Server)(nil)

// Options configure the HTTP handler.
type Options struct {
	// DownloadPath is the configured downloadPath; when it is not the
	// default, the file routes answer under it too (and the service's URLs
	// point there).
	DownloadPath string
	Service      *service.Service
	Guard        *Guard
	Health       *Health
	Logger       *slog.Logger
	// Registerer, when set, receives the request metrics (by route pattern
	// and status, latency, bytes in and out). /metrics itself is never
	// served here: it belongs on an operator listener (serve
	// --metrics-listen).
	Registerer prometheus.Registerer
	// BodyReadTimeout bounds the time to read one request body (default
	// DefaultBodyReadTimeout); BodyIdleTimeout how long the client may send
	// nothing meanwhile (default DefaultBodyIdleTimeout). A client that
	// trickles or stalls is cut off.
	BodyReadTimeout time.Duration
	BodyIdleTimeout time.Duration
	// CORSAllowedOrigins are the browser origins allowed to call the API
	// (cors.allowedOrigins); none by default.
	CORSAllowedOrigins []string
	// TracerProvider, when set, traces every request (otelhttp) and the
	// guard's verification; nil traces nothing and wraps nothing.
	TracerProvider trace.TracerProvider
	// AccessLog writes one line per request (observe): to AccessLogWriter
	// when set, else to Logger at INFO.
	AccessLog bool
	// AccessLogWriter, when set, takes the access lines as JSON lines
	// appended directly (lineAccess): the keys and values Logger's JSON
	// handler would write, at a fraction of the cost. serve passes a door
	// of internal/logsink that gathers them into fewer writes.
	AccessLogWriter io.Writer
}

// Defaults of the body read bounds: a 25 MiB upload at 1 Mbit/s fits in the
// first; a live client never pauses for the second.
const (
	DefaultBodyReadTimeout = 5 * time.Minute
	DefaultBodyIdleTimeout = 30 * time.Second
)

// New returns the whole HTTP surface. A request passes through these, the
// outermost first (chain builds them in this order):
//
//  1. otelhttp, when TracerProvider is set: the request's span;
//  2. withRequestID: the request id, on every answer and log line;
//  3. withCORS: browser preflights answered, CORS headers on answers;
//  4. movedRoutes: a customized downloadPath's routes onto the API's;
//  5. observe: the request metrics and the access line;
//  6. limitBodies: the body's total and idle read bounds;
//  7. withFavicon: /favicon.ico, with no token;
//  8. withGrantedDownloads: a private file's signed URL, with no token;
//  9. Guard.Middleware: the bearer token verified into a RequestContext;
//  10. strictJSON: closed JSON bodies;
//  11. the router (resumable uploads go to tusd's handler, TusPath), then s.idempotent for the writes that take an
//     Idempotency-Key, then the strict handler (withRequest) and the
//     Server method, which calls the service.
//
// serve wraps the result in its own outer layers: the in-flight count the
// drain waits on, the body deadline (BodyDeadline) and the pages beside
// the API (the reference, the development page).
func New(o Options) http.Handler {
	log := o.Logger
	if log == nil {
		log = slog.Default()
	}
	if o.Health == nil {
		o.Health = &Health{Logger: log}
	}
	s := &Server{svc: o.Service, log: log, health: o.Health}
	ew := errorWriter{log: log}
	strict := api.NewStrictHandlerWithOptions(s, []api.StrictMiddlewareFunc{withRequest}, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc:  ew.request,
		ResponseErrorHandlerFunc: ew.response,
	})
	mux := http.NewServeMux()
	routes := api.StdHTTPServerOptions{BaseRouter: mux, ErrorHandlerFunc: ew.request, Middlewares: []api.MiddlewareFunc{s.idempotent}}
	if bound, err := newBoundRoutes(mux, strict, routes); err != nil {
		log.Error("list routes bind their query through the generated wrappers", "error", err.Error())
	} else {
		routes.BaseRouter = bound
	}
	api.HandlerWithOptions(strict, routes)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusNotFound, service.ErrNotFound.Code)
	})
	var router http.Handler = mux
	for _, base := range []string{HostTusPath, TusPath} {
		if tus, err := newTusHandler(o.Service, ew, cmp.Or(o.BodyIdleTimeout, DefaultBodyIdleTimeout), base); err != nil {
			log.Error("resumable uploads not served", "path", base, "error", err.Error())
		} else {
			router = withTus(base, s.tusIdempotent(base, tus), router)
		}
	}
	if o.TracerProvider != nil {
		o.Guard.tracer = o.TracerProvider.Tracer("github.com/uploadedfile/uploadedfile/internal/adapter/httpapi")
	}
	h := router
	layers := chain(o, log, ew, mux)
	for i := len(layers) - 1; i >= 0; i-- {
		h = layers[i](h)
	}
	return h
}

// chain is New's layers around the router, the outermost first.
func chain(o Options, log *slog.Logger, ew errorWriter, mux *http.ServeMux) []func(http.Handler) http.Handler {
	var metrics *requestMetrics
	if o.Registerer != nil {
		metrics = newRequestMetrics(o.Registerer)
	}
	var access accessLog
	switch {
	case !o.AccessLog:
	case o.AccessLogWriter != nil:
		access = lineAccess{w: o.AccessLogWriter}
	default:
		access = slogAccess{h: log.Handler()}
	}
	bodies := bodyTimeouts{total: cmp.Or(o.BodyReadTimeout, DefaultBodyReadTimeout), idle: cmp.Or(o.BodyIdleTimeout, DefaultBodyIdleTimeout)}
	return []func(http.Handler) http.Handler{
		func(h http.Handler) http.Handler {
			if o.TracerProvider == nil {
				return h
			}
			return otelhttp.NewHandler(h, "uploadedfile", otelhttp.WithTracerProvider(o.TracerProvider),
				otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "HTTP " + r.Method }))
		},
		withRequestID,
		func(h http.Handler) http.Handler { return withCORS(o.CORSAllowedOrigins, h) },
		func(h http.Handler) http.Handler { return movedRoutes(o.DownloadPath, h) },
		func(h http.Handler) http.Handler { return observe(h, mux, metrics, access) },
		func(h http.Handler) http.Handler { return limitBodies(h, bodies) },
		withFavicon,
		func(h http.Handler) http.Handler { return withGrantedDownloads(o.Service, ew, h) },
		o.Guard.Middleware,
		strictJSON,
	}
}

// movedRoutes serves /<downloadPath>/... as /uploaded-file/... when a
// custom downloadPath is configured.
func movedRoutes(downloadPath string, next http.Handler) http.Handler {
	prefix := "/" + strings.Trim(downloadPath, "/") + "/"
	if prefix == "//" || prefix == "/uploaded-file/" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rest, ok := strings.CutPrefix(r.URL.Path, prefix); ok {
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/uploaded-file/" + rest
			r2.URL.RawPath = ""
			next.ServeHTTP(w, r2)
			return
		}
		next.ServeHTTP(w, r)
	})
}

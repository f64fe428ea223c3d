package httpapi

import (
	"bufio"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	api "github.com/uploadedfile/uploadedfile/gen/api"
	"github.com/uploadedfile/uploadedfile/internal/filecheck"
	"github.com/uploadedfile/uploadedfile/internal/servecontent"
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
	health Health
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
	Health       Health
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
	s := &Server{svc: o.Service, log: log, health: o.Health}
	ew := errorWriter{log: log}
	strict := api.NewStrictHandlerWithOptions(s, []api.StrictMiddlewareFunc{withRequest}, api.StrictHTTPServerOptions{
		RequestErrorHandlerFunc:  ew.request,
		ResponseErrorHandlerFunc: ew.response,
	})
	mux := http.NewServeMux()
	api.HandlerWithOptions(strict, api.StdHTTPServerOptions{BaseRouter: mux, ErrorHandlerFunc: ew.request, Middlewares: []api.MiddlewareFunc{s.idempotent}})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusNotFound, service.ErrNotFound.Code)
	})
	var router http.Handler = mux
	if tus, err := newTusHandler(o.Service, ew, cmp.Or(o.BodyIdleTimeout, DefaultBodyIdleTimeout)); err != nil {
		log.Error("resumable uploads not served", "error", err.Error())
	} else {
		router = withTus(s.tusIdempotent(tus), mux)
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

// RequestIDFrom is the request id of a request's context ("" outside one):
// for log lines written deeper down.
func RequestIDFrom(ctx context.Context) string {
	if info := infoOf(ctx); info != nil {
		return info.id
	}
	return ""
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

type requestKey struct{}
type requestInfoKey struct{}

// requestInfo is what the layers learn of a request on its way down, kept
// in its context by withRequestID: its id, and the route it was matched
// to (set by withRequest for the router's routes and by
// withGrantedDownloads for its own; "" until then), which observe reads
// once the handler has returned.
type requestInfo struct {
	id, route string
}

// infoOf is the requestInfo of a request's context (nil outside one).
func infoOf(ctx context.Context) *requestInfo {
	info, _ := ctx.Value(requestInfoKey{}).(*requestInfo)
	return info
}

// withRequest keeps the request in the handler's context, for the
// responses that need it (http.ServeContent), and records the route the
// router matched (r.Pattern) for observe, which would otherwise look it up
// again. Every generated route runs it.
func withRequest(f api.StrictHandlerFunc, _ string) api.StrictHandlerFunc {
	return func(ctx context.Context, w http.ResponseWriter, r *http.Request, req any) (any, error) {
		setRoute(r, r.Pattern)
		return f(context.WithValue(ctx, requestKey{}, r), w, r, req)
	}
}

// withRequestID tags the request with an id for logs (the client's
// X-Request-Id when sane, else a random one). It is echoed only when the
// client sent one, so two responses never differ by a header the client
// did not choose.
func withRequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if id != "" && len(id) <= 128 {
			w.Header().Set("X-Request-Id", id)
		} else {
			var b [8]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, &requestInfo{id: id})))
	})
}

func requestID(r *http.Request) string { return RequestIDFrom(r.Context()) }

// setRoute records route as the request's route, for observe.
func setRoute(r *http.Request, route string) {
	if info := infoOf(r.Context()); info != nil {
		info.route = route
	}
}

// limitBodies bounds request bodies before anything reads them: in size --
// multipart uploads at MultipartCeiling (and reads them in large chunks,
// bufferedBody), raw content and resumable chunks at the 25 MiB ceiling,
// JSON at 64 KiB -- and
// in time (bodyTimeouts).
func limitBodies(next http.Handler, t bodyTimeouts) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch ct := r.Header.Get("Content-Type"); {
		case r.Body == nil || r.Body == http.NoBody || r.Method == http.MethodGet || r.Method == http.MethodDelete:
		case len(ct) >= 19 && ct[:19] == "multipart/form-data":
			body, release := bufferedBody(t.bound(w, http.MaxBytesReader(w, r.Body, MultipartCeiling)))
			defer release()
			r.Body = body
		case r.Method == http.MethodPut, ct == tusChunkType:
			r.Body = t.bound(w, http.MaxBytesReader(w, r.Body, filecheck.AbsoluteMaxFileSize))
		default:
			r.Body = t.bound(w, http.MaxBytesReader(w, r.Body, jsonBodyLimit))
		}
		next.ServeHTTP(w, r)
	})
}

// bodyTimeouts bound the time a request body takes to arrive: in all
// (total, from the first read) and between two reads that return data
// (idle). The connection's read deadline enforces both, so a client that
// trickles a body or stops sending is cut off by the kernel's clock, not
// by a goroutine.
type bodyTimeouts struct{ total, idle time.Duration }

// bound returns body read under the deadlines.
func (t bodyTimeouts) bound(w http.ResponseWriter, body io.ReadCloser) io.ReadCloser {
	return &deadlineBody{ReadCloser: body, rc: http.NewResponseController(w), t: t}
}

type deadlineBody struct {
	io.ReadCloser
	rc  *http.ResponseController
	t   bodyTimeouts
	end time.Time // the total deadline, set at the first read
	set time.Time // the deadline the connection has now
}

func (d *deadlineBody) Read(p []byte) (int, error) {
	now := time.Now()
	if d.end.IsZero() {
		d.end = now.Add(d.t.total)
	}
	deadline := now.Add(d.t.idle)
	if deadline.After(d.end) {
		deadline = d.end
	}
	// Moving the deadline resets the connection's timer: a fast body does
	// it once per eighth of the idle time, not on every read. Where the
	// connection cannot take a deadline (tests' recorders), the body is
	// read as it is.
	if !deadline.Equal(d.set) && (d.set.IsZero() || deadline.Sub(d.set) >= d.t.idle/8 || deadline.Equal(d.end)) {
		_ = d.rc.SetReadDeadline(deadline)
		d.set = deadline
	}
	n, err := d.ReadCloser.Read(p)
	switch {
	case errors.Is(err, io.EOF):
		// The body is done: lift the deadline, or the server's own
		// background read of the idle connection would hit it and cancel
		// the request while the handler still works.
		_ = d.rc.SetReadDeadline(time.Time{})
	case err != nil:
		// Refused, stalled or cut: what is left of the body is never
		// waited for. net/http drains up to 256 KiB of an unread body
		// before it answers; with no deadline that drain waited forever
		// for a body that had stopped.
		_ = d.rc.SetReadDeadline(time.Now())
	}
	return n, err
}

// multipartReadBuffer is how much of a multipart body is read from the
// connection at once.
const multipartReadBuffer = 64 << 10

// bodyReaders are bufferedBody's buffers, reused across requests (a fresh
// 64 KiB per upload was a sixth of a small upload's allocations).
var bodyReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, multipartReadBuffer) }}

// bufferedBody reads body through a large buffer. The multipart reader asks
// for 4 KiB at a time, and the connection's own buffer is 4 KiB too, so
// without it a 1 MiB upload costs 256 read system calls; with it, about 16.
// release gives the buffer back once the handler has returned: every
// handler reads its body before it returns, none hands it to a goroutine.
func bufferedBody(body io.ReadCloser) (buffered io.ReadCloser, release func()) {
	br := bodyReaders.Get().(*bufio.Reader)
	br.Reset(body)
	release = func() {
		br.Reset(nil)
		bodyReaders.Put(br)
	}
	return struct {
		io.Reader
		io.Closer
	}{br, body}, release
}

// Healthz implements api.StrictServerInterface: the process answers.
func (s *Server) Healthz(context.Context, api.HealthzRequestObject) (api.HealthzResponseObject, error) {
	return api.Healthz200TextResponse("ok\n"), nil
}

// Readyz implements api.StrictServerInterface: every dependency answers.
func (s *Server) Readyz(ctx context.Context, _ api.ReadyzRequestObject) (api.ReadyzResponseObject, error) {
	msg, ok := s.health.check(ctx)
	if !ok {
		return api.Readyz503TextResponse(msg), nil
	}
	return api.Readyz200TextResponse(msg), nil
}

// InitiateUpload implements api.StrictServerInterface: an end user's direct
// upload is always private (a public one is HostInitiateUpload's).
func (s *Server) InitiateUpload(ctx context.Context, req api.InitiateUploadRequestObject) (api.InitiateUploadResponseObject, error) {
	b := req.Body
	r, err := s.initiate(ctx, service.InitiateInput{OriginalName: b.OriginalName, ContentType: b.ContentType, SizeBytes: b.SizeBytes, Checksum: b.Checksum},
		ptr(api.Private), b.Disposition)
	if err != nil {
		return nil, err
	}
	return api.InitiateUpload201JSONResponse{Body: r, Headers: api.InitiateUpload201ResponseHeaders{Location: fileLocation(r.Id)}}, nil
}

// HostInitiateUpload implements api.StrictServerInterface: a host backend
// starts a direct upload for the acting user and chooses its visibility.
func (s *Server) HostInitiateUpload(ctx context.Context, req api.HostInitiateUploadRequestObject) (api.HostInitiateUploadResponseObject, error) {
	b := req.Body
	r, err := s.initiate(ctx, service.InitiateInput{OriginalName: b.OriginalName, ContentType: b.ContentType, SizeBytes: b.SizeBytes, Checksum: b.Checksum},
		b.Visibility, b.Disposition)
	if err != nil {
		return nil, err
	}
	return api.HostInitiateUpload201JSONResponse{Body: r, Headers: api.HostInitiateUpload201ResponseHeaders{Location: hostFileLocation(r.Id)}}, nil
}

// initiate starts a direct upload with the optional visibility and
// disposition (nil: the configured defaults).
func (s *Server) initiate(ctx context.Context, in service.InitiateInput, vis *api.Visibility, disp *api.Disposition) (api.InitiateUploadResult, error) {
	opts := &service.UploadOptions{}
	if vis != nil {
		opts.Visibility = service.Visibility(*vis)
	}
	if disp != nil {
		opts.Disposition = service.Disposition(*disp)
	}
	r, err := s.svc.InitiateUpload(ctx, in, opts)
	if err != nil {
		return api.InitiateUploadResult{}, err
	}
	return initiateResult(r), nil
}

func ptr[T any](v T) *T { return &v }

// InitiateTemporaryUpload implements api.StrictServerInterface.
func (s *Server) InitiateTemporaryUpload(ctx context.Context, req api.InitiateTemporaryUploadRequestObject) (api.InitiateTemporaryUploadResponseObject, error) {
	b := req.Body
	opts := &service.TemporaryUploadOptions{}
	if b.Disposition != nil {
		opts.Disposition = service.Disposition(*b.Disposition)
	}
	r, err := s.svc.InitiateTemporaryUpload(ctx, service.InitiateInput{OriginalName: b.OriginalName, ContentType: b.ContentType, SizeBytes: b.SizeBytes, Checksum: b.Checksum}, opts)
	if err != nil {
		return nil, err
	}
	res := initiateResult(r)
	return api.InitiateTemporaryUpload201JSONResponse{Body: res, Headers: api.InitiateTemporaryUpload201ResponseHeaders{Location: fileLocation(res.Id)}}, nil
}

// CompleteUpload implements api.StrictServerInterface.
func (s *Server) CompleteUpload(ctx context.Context, req api.CompleteUploadRequestObject) (api.CompleteUploadResponseObject, error) {
	r, err := s.svc.CompleteUpload(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	return fileJSON{status: http.StatusOK, file: httpResult(r)}, nil
}

// PutUploadContent implements api.StrictServerInterface: a signed local
// upload target (no token: the guard let it through) or the caller's own
// authenticated write; either answers with the object's ETag.
func (s *Server) PutUploadContent(ctx context.Context, req api.PutUploadContentRequestObject) (api.PutUploadContentResponseObject, error) {
	var rc *service.ContentReceipt
	var err error
	r, _ := ctx.Value(requestKey{}).(*http.Request)
	if q := queryOf(r); service.IsSigned(q) {
		rc, err = s.svc.WriteSignedContent(ctx, req.Id, service.SignedContent{
			Query: q, ContentType: r.Header.Get("Content-Type"), ContentLength: r.ContentLength,
			Checksum: r.Header.Get(service.ChecksumHeader),
		}, req.Body)
	} else {
		rc, err = s.svc.WriteUploadContent(ctx, req.Id, req.Body)
	}
	if err != nil {
		return nil, err
	}
	return api.PutUploadContent200JSONResponse{Body: httpResult(rc.File), Headers: api.PutUploadContent200ResponseHeaders{ETag: &rc.ETag}}, nil
}

// GetFile implements api.StrictServerInterface.
func (s *Server) GetFile(ctx context.Context, req api.GetFileRequestObject) (api.GetFileResponseObject, error) {
	r, err := s.svc.Find(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	return fileJSON{status: http.StatusOK, file: httpResult(r)}, nil
}

// ListFiles implements api.StrictServerInterface: one page of the files the
// caller may see, each without its URL unless withUrls.
func (s *Server) ListFiles(ctx context.Context, req api.ListFilesRequestObject) (api.ListFilesResponseObject, error) {
	p, err := s.svc.List(ctx, listOptions(req.Params))
	if err != nil {
		return nil, err
	}
	out := api.FileList{Items: make([]api.UploadedFile, len(p.Files)), NextCursor: optionalString(p.NextCursor)}
	for i, f := range p.Files {
		out.Items[i] = httpResult(f)
	}
	return fileListJSON{list: out}, nil
}

// listOptions maps the list's query parameters (the host route has the
// same ones) onto service.ListOptions.
func listOptions(q api.ListFilesParams) service.ListOptions {
	o := service.ListOptions{
		Module: deref(q.Module), Entity: deref(q.Entity), EntityID: deref(q.EntityId), ContentType: deref(q.ContentType),
		Temporary: q.Temporary, CreatedFrom: q.CreatedFrom, CreatedBefore: q.CreatedBefore, NamePrefix: deref(q.NamePrefix),
		Cursor: deref(q.Cursor), WithURLs: q.WithUrls != nil && *q.WithUrls,
	}
	if q.Limit != nil {
		o.Limit = *q.Limit
		if o.Limit == 0 {
			o.Limit = -1 // limit=0 is asked for, not absent: refused
		}
	}
	if q.Sort != nil {
		o.Sort = service.ListSort(*q.Sort)
	}
	if q.Visibility != nil {
		o.Visibility = service.Visibility(*q.Visibility)
	}
	return o
}

// GetUsage implements api.StrictServerInterface.
func (s *Server) GetUsage(ctx context.Context, _ api.GetUsageRequestObject) (api.GetUsageResponseObject, error) {
	u, err := s.svc.Usage(ctx)
	if err != nil {
		return nil, err
	}
	return api.GetUsage200JSONResponse(usageOf(u)), nil
}

// HostGetUsage implements api.StrictServerInterface.
func (s *Server) HostGetUsage(ctx context.Context, _ api.HostGetUsageRequestObject) (api.HostGetUsageResponseObject, error) {
	u, err := s.svc.Usage(ctx)
	if err != nil {
		return nil, err
	}
	return api.HostGetUsage200JSONResponse(usageOf(u)), nil
}

func usageOf(u *service.Usage) api.Usage {
	of := func(x service.UsageOf) api.UsageOf {
		return api.UsageOf{Bytes: x.Bytes, Files: x.Files, BytesLimit: x.BytesLimit, FilesLimit: x.FilesLimit}
	}
	return api.Usage{Owner: of(u.Owner), Tenant: of(u.Tenant)}
}

// DeleteFile implements api.StrictServerInterface.
func (s *Server) DeleteFile(ctx context.Context, req api.DeleteFileRequestObject) (api.DeleteFileResponseObject, error) {
	if err := s.svc.DeleteByID(ctx, req.Id); err != nil {
		return nil, err
	}
	return api.DeleteFile204Response{}, nil
}

// UploadFile implements api.StrictServerInterface: the deprecated
// multipart route, one file, streamed.
func (s *Server) UploadFile(ctx context.Context, req api.UploadFileRequestObject) (api.UploadFileResponseObject, error) {
	form, err := readForm(req.Body, nil)
	if err != nil {
		return nil, err
	}
	r, err := s.svc.Upload(ctx, form.file, form.fileName, &service.UploadOptions{ContentType: form.fileType})
	if err := form.check(err); err != nil {
		return nil, err
	}
	file := httpResult(r)
	return fileJSON{status: http.StatusCreated, file: file, location: fileLocation(file.Id)}, nil
}

// GetFileVariant implements api.StrictServerInterface: an image variant for
// a configured preset, generated on first request.
func (s *Server) GetFileVariant(ctx context.Context, req api.GetFileVariantRequestObject) (api.GetFileVariantResponseObject, error) {
	v, err := s.svc.FindVariant(ctx, req.Id, req.Preset)
	if err != nil {
		return nil, err
	}
	return api.GetFileVariant200JSONResponse(httpVariant(v)), nil
}

// HostGetFileVariant implements api.StrictServerInterface.
func (s *Server) HostGetFileVariant(ctx context.Context, req api.HostGetFileVariantRequestObject) (api.HostGetFileVariantResponseObject, error) {
	v, err := s.svc.FindVariant(ctx, req.Id, req.Preset)
	if err != nil {
		return nil, err
	}
	return api.HostGetFileVariant200JSONResponse(httpVariant(v)), nil
}

// DownloadFileVariant implements api.StrictServerInterface.
func (s *Server) DownloadFileVariant(ctx context.Context, req api.DownloadFileVariantRequestObject) (api.DownloadFileVariantResponseObject, error) {
	d, err := s.svc.DownloadVariant(ctx, req.Id, req.Preset)
	if err != nil {
		return nil, err
	}
	return bytesResponse{ctx: ctx, d: d}, nil
}

func httpVariant(v *service.Variant) api.FileVariant {
	return api.FileVariant{
		FileId: v.FileID, Preset: v.Preset, ContentType: api.FileVariantContentType(v.ContentType), SizeBytes: v.SizeBytes,
		Width: v.Width, Height: v.Height, CreatedAt: v.CreatedAt, Url: v.URL, UrlExpiredAt: v.URLExpiredAt,
	}
}

// DownloadFile implements api.StrictServerInterface.
func (s *Server) DownloadFile(ctx context.Context, req api.DownloadFileRequestObject) (api.DownloadFileResponseObject, error) {
	d, err := s.svc.Download(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	return bytesResponse{ctx: ctx, d: d}, nil
}

// bytesResponse serves a download: the allowlisted type, the sandbox
// headers (servecontent), the file's disposition (attachment unless it was
// stored inline) with an RFC 6266 filename*, the ETag, and -- when
// the body can seek -- Range and conditional requests (http.ServeContent).
type bytesResponse struct {
	ctx context.Context
	d   *service.Download
	// granted: a signed URL's answer, which other origins may embed
	// (Cross-Origin-Resource-Policy cross-origin, as a presigned GET).
	granted bool
}

func (b bytesResponse) visit(w http.ResponseWriter) error {
	defer b.d.Body.Close()
	h := w.Header()
	ct := filecheck.ContentTypeOf(b.d.FileName)
	if ct == "" {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	// As an S3 presigned URL answers: the file's own disposition (inline
	// or attachment). The sandbox keeps what a browser renders out of this
	// origin.
	disp := filecheck.Disposition(b.d.FileName, b.d.Disposition == service.DispositionInline)
	servecontent.DownloadHeaders(h, disp, b.d.ETag, b.granted)
	r, _ := b.ctx.Value(requestKey{}).(*http.Request)
	if r != nil && servecontent.CheckRanges(r.Header.Get("Range"), b.d.Size) != nil {
		servecontent.RefuseRanges(w, b.d.Size)
		return nil
	}
	rs, ok := b.d.Body.(io.ReadSeeker)
	if f, isFile := b.d.Body.(*os.File); isFile {
		// A stored file's size is known (the store read it from the same
		// descriptor): sizedFile spares ServeContent's two seeks to learn it.
		rs = newSizedFile(f, b.d.Size)
	}
	if ok && r != nil {
		http.ServeContent(w, r, "", b.d.LastModified, rs)
		return nil
	}
	h.Set("Content-Length", strconv.FormatInt(b.d.Size, 10))
	w.WriteHeader(http.StatusOK)
	_, err := io.Copy(w, b.d.Body)
	return err
}

// VisitDownloadFileVariantResponse implements api.DownloadFileVariantResponseObject.
func (b bytesResponse) VisitDownloadFileVariantResponse(w http.ResponseWriter) error {
	return b.visit(w)
}

// VisitDownloadFileResponse implements api.DownloadFileResponseObject.
func (b bytesResponse) VisitDownloadFileResponse(w http.ResponseWriter) error { return b.visit(w) }

// VisitHostDownloadAttachedResponse implements api.HostDownloadAttachedResponseObject.
func (b bytesResponse) VisitHostDownloadAttachedResponse(w http.ResponseWriter) error {
	return b.visit(w)
}

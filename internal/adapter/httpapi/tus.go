package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tus/tusd/v2/pkg/handler"
	expslog "golang.org/x/exp/slog"

	"github.com/uploadedfile/uploadedfile/service"
)

// TusPath is where resumable uploads are served: the tus protocol 1.0.0
// (core, creation, creation-with-upload, termination, expiration and
// checksum with sha256) on tusd's handler, with the service's resumable
// uploads as its data store. Every answer that refuses is problem JSON
// with a stable code, like the rest of the API.
const TusPath = "/uploaded-file/tus/"

// HostTusPath is TusPath for host backends (the host scope, as every
// route under /internal/): the same protocol, and an upload may be made
// public (metadata visibility "public", with allowPublicUploads), as the
// host's initiate may.
const HostTusPath = "/internal/uploaded-file/tus/"

// tusChunkType is the media type of a chunk's body (PATCH, and a creation
// request that carries the first chunk).
const tusChunkType = "application/offset+octet-stream"

// tusExtensions are the protocol extensions served; tusd's handler
// implements the first four on the data store, the service the checksum
// (per chunk) and the expiration (Upload-Expires).
const tusExtensions = "creation,creation-with-upload,termination,expiration,checksum"

// Codes of the tus endpoints that only the protocol has.
const (
	// codeTusVersion: Tus-Resumable is missing or not 1.0.0 (412).
	codeTusVersion = "core.tus.unsupported-version"
	// codeTusRequest: a header of the protocol is missing or malformed
	// (Upload-Length, Upload-Offset, the chunk's Content-Type, a
	// checksum algorithm other than sha256) (400).
	codeTusRequest = "core.tus.invalid-request"
	// codeTusLength: the length is deferred (Upload-Defer-Length) or the
	// chunk's is not given (a chunked body): both are refused (400 / 411).
	codeTusLength = "core.tus.length-required"
)

// tusExchange is what the data store and the answer share about one
// request: the request itself (the data store sees only a context) and
// the upload's expiry, once known, for Upload-Expires.
type tusExchange struct {
	r       *http.Request
	w       http.ResponseWriter
	ew      errorWriter
	idle    time.Duration
	maxSize int64
	expires time.Time
}

type tusExchangeKey struct{}

func exchangeOf(ctx context.Context) *tusExchange {
	x, _ := ctx.Value(tusExchangeKey{}).(*tusExchange)
	return x
}

// newTusHandler serves base, TusPath or HostTusPath (below the guard:
// every request carries the caller's token), with tusd's unrouted handler
// and the service's resumable uploads as its store; idle is how long a
// chunk's body may send nothing. The size limit is the service's
// (announced as Tus-Max-Size): an upload over it is refused like any
// other, with its rule.
func newTusHandler(svc *service.Service, ew errorWriter, idle time.Duration, base string) (http.Handler, error) {
	store := tusStore{svc: svc, host: base == HostTusPath}
	composer := handler.NewStoreComposer()
	composer.UseCore(store)
	composer.UseTerminater(store)
	h, err := handler.NewUnroutedHandler(handler.Config{
		StoreComposer:           composer,
		BasePath:                base,
		DisableDownload:         true,
		DisableConcatenation:    true,
		RespectForwardedHeaders: true,
		Cors:                    &handler.CorsConfig{Disable: true}, // withCORS answers CORS for every route
		Logger:                  expslog.New(expslog.NewTextHandler(io.Discard, nil)),
		NetworkTimeout:          idle,
	})
	if err != nil {
		return nil, err
	}
	routes := http.NewServeMux()
	routes.HandleFunc("POST "+strings.TrimSuffix(base, "/"), h.PostFile)
	routes.HandleFunc("POST "+base+"{$}", h.PostFile)
	// The handler reads the upload's id as the whole path: the base path
	// is stripped first, as tusd's own router does.
	routes.Handle("HEAD "+base+"{id}", http.StripPrefix(base, http.HandlerFunc(h.HeadFile)))
	routes.Handle("PATCH "+base+"{id}", http.StripPrefix(base, http.HandlerFunc(h.PatchFile)))
	routes.Handle("DELETE "+base+"{id}", http.StripPrefix(base, http.HandlerFunc(h.DelFile)))
	routes.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, http.StatusNotFound, service.ErrNotFound.Code)
	})
	inner := h.Middleware(routes)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		x := &tusExchange{r: r, w: w, ew: ew, idle: idle, maxSize: svc.EffectiveConfig().MaxFileSizeBytes}
		tw := &tusWriter{ResponseWriter: w, x: x}
		inner.ServeHTTP(tw, r.WithContext(context.WithValue(r.Context(), tusExchangeKey{}, x)))
		tw.finish()
	}), nil
}

// withTus sends the requests below base (TusPath or HostTusPath) to tus
// and the rest to the API's router. (They cannot share one: a pattern
// below TusPath and the API's /uploaded-file/{id}/... would both match
// paths such as /uploaded-file/tus/download.) The route a tus request is
// counted under is its method and base's pattern.
func withTus(base string, tus http.Handler, api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, below := strings.CutPrefix(r.URL.Path, base)
		if !below && r.URL.Path != strings.TrimSuffix(base, "/") {
			api.ServeHTTP(w, r)
			return
		}
		if info := infoOf(r.Context()); info != nil {
			info.route = r.Method + " " + base
			if rest != "" {
				info.route += "{id}"
			}
		}
		tus.ServeHTTP(w, r)
	})
}

// fail is err as the handler's error: the problem JSON errorWriter gives
// every route, with its status and headers.
func (x *tusExchange) fail(err error) error {
	c := &capturedAnswer{h: http.Header{}}
	x.ew.response(c, x.r, err)
	return c.asError()
}

// refuse is a protocol refusal of the HTTP layer as the handler's error.
func (x *tusExchange) refuse(status int, code string) error {
	c := &capturedAnswer{h: http.Header{}}
	writeProblem(c, x.r, status, code)
	return c.asError()
}

// capturedAnswer records an answer so the handler can send it.
type capturedAnswer struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (c *capturedAnswer) Header() http.Header         { return c.h }
func (c *capturedAnswer) WriteHeader(status int)      { c.status = status }
func (c *capturedAnswer) Write(b []byte) (int, error) { return c.body.Write(b) }

func (c *capturedAnswer) asError() error {
	h := handler.HTTPHeader{}
	for k, v := range c.h {
		h[k] = strings.Join(v, ", ")
	}
	return handler.Error{ErrorCode: "ERR_UPLOADEDFILE", Message: http.StatusText(c.status),
		HTTPResponse: handler.HTTPResponse{StatusCode: c.status, Body: c.body.String(), Header: h}}
}

// tusStore is the handler's data store: the service's resumable uploads;
// host when it serves HostTusPath.
type tusStore struct {
	svc  *service.Service
	host bool
}

// NewUpload creates a resumable upload from the creation request: its
// metadata names the file (filename or name), its type (filetype or type)
// and, optionally, its disposition, temporary ("true") and visibility.
// Like every end user's upload, one on TusPath is private: a visibility
// other than private is refused, as a public file is a host backend's to
// make. On HostTusPath the visibility is the host initiate's: the
// configured default when absent, public only with allowPublicUploads. A
// temporary file is private on both.
func (t tusStore) NewUpload(ctx context.Context, info handler.FileInfo) (handler.Upload, error) {
	x := exchangeOf(ctx)
	m := info.MetaData
	in := service.ResumableInput{OriginalName: firstOf(m, "filename", "name"), ContentType: firstOf(m, "filetype", "type"), SizeBytes: info.Size}
	disposition := service.Disposition(m["disposition"])
	visibility := service.Visibility(m["visibility"])
	switch {
	case visibility == "" && !t.host:
		visibility = service.Private
	case visibility == service.Private:
	case visibility == service.Public && t.host && m["temporary"] != "true":
	case visibility != "":
		return nil, x.fail(service.ErrInvalidMeta)
	}
	var up *service.ResumableUpload
	var err error
	switch m["temporary"] {
	case "true":
		up, err = t.svc.CreateTemporaryResumableUpload(ctx, in, &service.TemporaryUploadOptions{Disposition: disposition})
	case "", "false":
		up, err = t.svc.CreateResumableUpload(ctx, in, &service.UploadOptions{Visibility: visibility, Disposition: disposition})
	default:
		return nil, x.fail(service.ErrInvalidMeta)
	}
	if err != nil {
		return nil, x.fail(err)
	}
	x.expires = up.ExpiresAt
	return &tusUpload{svc: t.svc, state: up}, nil
}

// GetUpload is the caller's resumable upload id; another caller's answers
// exactly like a missing one.
func (t tusStore) GetUpload(ctx context.Context, id string) (handler.Upload, error) {
	x := exchangeOf(ctx)
	up, err := t.svc.ResumableState(ctx, id)
	if err != nil {
		return nil, x.fail(err)
	}
	x.expires = up.ExpiresAt
	return &tusUpload{svc: t.svc, state: up}, nil
}

// AsTerminatableUpload: termination aborts the pending upload.
func (t tusStore) AsTerminatableUpload(u handler.Upload) handler.TerminatableUpload {
	return u.(*tusUpload)
}

func firstOf(m map[string]string, keys ...string) string {
	for _, k := range keys {
		if v := m[k]; v != "" {
			return v
		}
	}
	return ""
}

// tusUpload is one resumable upload as the handler sees it.
type tusUpload struct {
	svc   *service.Service
	state *service.ResumableUpload
}

func (u *tusUpload) GetInfo(context.Context) (handler.FileInfo, error) {
	return handler.FileInfo{ID: u.state.ID.String(), Size: u.state.SizeBytes, Offset: u.state.Offset}, nil
}

// WriteChunk writes the request's body (its exact Content-Length, and
// the digest of Upload-Checksum when sent) at offset; the chunk that ends
// the file completes it.
func (u *tusUpload) WriteChunk(ctx context.Context, offset int64, src io.Reader) (int64, error) {
	x := exchangeOf(ctx)
	length := x.r.ContentLength
	switch {
	case length == 0:
		return 0, nil
	case length < 0:
		return 0, x.refuse(http.StatusLengthRequired, codeTusLength)
	}
	sum, ok := uploadChecksum(x.r.Header.Get("Upload-Checksum"))
	if !ok {
		return 0, x.refuse(http.StatusBadRequest, codeTusRequest)
	}
	// The handler gives the answer twice the idle bound; a chunk may first
	// wait for the write lease of a writer that died.
	_ = http.NewResponseController(x.w).SetWriteDeadline(time.Now().Add(service.ResumableClaimWait + 2*x.idle))
	up, err := u.svc.WriteChunkTo(ctx, u.state, service.Chunk{Offset: offset, Length: length, SHA256: sum, Body: src})
	if err != nil {
		return 0, x.fail(err)
	}
	x.expires = up.ExpiresAt
	u.state = up
	return up.Offset - offset, nil
}

// GetReader is never called: downloads go through the API's routes.
func (u *tusUpload) GetReader(context.Context) (io.ReadCloser, error) {
	return nil, handler.ErrNotImplemented
}

// FinishUpload has nothing left to do: the chunk that ended the file
// completed it.
func (u *tusUpload) FinishUpload(context.Context) error { return nil }

// Terminate aborts the pending upload (its chunks and quota with it).
func (u *tusUpload) Terminate(ctx context.Context) error {
	if err := u.svc.AbortUpload(ctx, u.state.ID.String()); err != nil {
		return exchangeOf(ctx).fail(err)
	}
	return nil
}

// uploadChecksum reads Upload-Checksum ("sha256 <base64 digest>"); ok is
// false for another algorithm or a malformed value, sum nil when absent.
func uploadChecksum(v string) (sum []byte, ok bool) {
	if v == "" {
		return nil, true
	}
	algo, value, found := strings.Cut(strings.TrimSpace(v), " ")
	if !found || algo != "sha256" {
		return nil, false
	}
	sum, err := base64.StdEncoding.DecodeString(value)
	if err != nil || len(sum) != 32 {
		return nil, false
	}
	return sum, true
}

// tusWriter completes the handler's answers: the extensions served on
// OPTIONS, Upload-Expires once the upload is known, and problem JSON in
// place of the handler's own plain-text refusals.
type tusWriter struct {
	http.ResponseWriter
	x          *tusExchange
	wrote      bool
	converting bool
	status     int
	body       bytes.Buffer
}

func (w *tusWriter) WriteHeader(status int) {
	if w.wrote {
		return
	}
	w.wrote = true
	h := w.Header()
	if w.x.r.Method == http.MethodOptions {
		h.Set("Tus-Extension", tusExtensions)
		h.Set("Tus-Checksum-Algorithm", "sha256")
		h.Set("Tus-Max-Size", strconv.FormatInt(w.x.maxSize, 10))
	}
	if status >= 400 && !strings.HasPrefix(h.Get("Content-Type"), ProblemContentType) {
		w.converting, w.status = true, status
		return
	}
	if status < 400 && !w.x.expires.IsZero() {
		h.Set("Upload-Expires", w.x.expires.UTC().Format(http.TimeFormat))
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *tusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.converting {
		return w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap is the ResponseWriter underneath (http.ResponseController: the
// handler moves the read deadline on as a chunk arrives).
func (w *tusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// finish sends a refusal of the handler's own as problem JSON.
func (w *tusWriter) finish() {
	if !w.converting {
		return
	}
	code, _, _ := strings.Cut(w.body.String(), ":")
	status, ours := tusProblem(w.status, code)
	h := w.Header()
	h.Del("Content-Length")
	writeProblem(w.ResponseWriter, w.x.r, status, ours)
}

// tusProblem maps one of the handler's refusals (its status and error
// code; no code on HEAD, whose body it drops) to the API's status and code.
func tusProblem(status int, code string) (int, string) {
	switch code {
	case "ERR_UPLOAD_NOT_FOUND":
		return http.StatusNotFound, service.ErrNotFound.Code
	case "ERR_MISMATCHED_OFFSET":
		return http.StatusConflict, service.ErrUploadOffsetMismatch.Code
	case "ERR_UPLOAD_SIZE_EXCEEDED":
		return http.StatusRequestEntityTooLarge, service.ErrInvalidUpload.Code
	case "ERR_UNSUPPORTED_VERSION":
		return http.StatusPreconditionFailed, codeTusVersion
	case "ERR_NOT_IMPLEMENTED", "ERR_AMBIGUOUS_UPLOAD_LENGTH", "ERR_INVALID_UPLOAD_LENGTH_DEFER":
		return http.StatusBadRequest, codeTusLength
	case "ERR_UNEXPECTED_EOF", "ERR_READ_TIMEOUT", "ERR_CONNECTION_RESET", "ERR_UPLOAD_INTERRUPTED":
		return http.StatusBadRequest, service.ErrChunkIncomplete.Code
	case "ERR_SERVER_SHUTDOWN":
		return http.StatusServiceUnavailable, service.ErrUploadFailed.Code
	}
	switch {
	case status == http.StatusNotFound:
		return status, service.ErrNotFound.Code
	case status >= 500:
		return http.StatusInternalServerError, codeInternal
	}
	return http.StatusBadRequest, codeTusRequest
}

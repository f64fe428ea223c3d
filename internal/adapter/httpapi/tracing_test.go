//lint:file-ignore SA1019 the traced upload is the deprecated multipart route, still served
package httpapi_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/uploadedfile/uploadedfile/gen/client"
	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/syncbuf"
	"github.com/uploadedfile/uploadedfile/internal/tracing"
	"github.com/uploadedfile/uploadedfile/service"
)

// otlpSpan is what the receiver keeps of an exported span.
type otlpSpan struct{ name, trace, id, parent string }

// otlpReceiver is an OTLP/HTTP traces endpoint on loopback: it decodes
// every export request (protobuf, as the SDK's exporter sends it).
type otlpReceiver struct {
	mu    sync.Mutex
	spans []otlpSpan
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/traces" {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(body, &req); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				o.spans = append(o.spans, otlpSpan{name: s.Name, trace: hex.EncodeToString(s.TraceId), id: hex.EncodeToString(s.SpanId), parent: hex.EncodeToString(s.ParentSpanId)})
			}
		}
	}
	o.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	_, _ = w.Write(out)
}

// traceWith returns the spans of the trace that holds a span named name.
func (o *otlpReceiver) traceWith(name string) []otlpSpan {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.spans {
		if s.name == name {
			var out []otlpSpan
			for _, x := range o.spans {
				if x.trace == s.trace {
					out = append(out, x)
				}
			}
			return out
		}
	}
	return nil
}

func names(spans []otlpSpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.name)
	}
	return out
}

// requireUnderRoot: every span of the trace descends from its one root,
// the HTTP server span.
func requireUnderRoot(t *testing.T, spans []otlpSpan) {
	t.Helper()
	byID := map[string]otlpSpan{}
	var roots []otlpSpan
	for _, s := range spans {
		byID[s.id] = s
		if s.parent == "" {
			roots = append(roots, s)
		}
	}
	require.Len(t, roots, 1, "one root: %v", names(spans))
	require.True(t, strings.HasPrefix(roots[0].name, "HTTP "), "the root is the request: %s", roots[0].name)
	for _, s := range spans {
		for cur := s; cur.parent != ""; cur = byID[cur.parent] {
			_, ok := byID[cur.parent]
			require.True(t, ok, "span %s: its parent is in the trace", s.name)
		}
	}
}

// TestTracesCoverGuardSQLAndStorage: with tracing on, an upload and a
// complete each export one trace, rooted at the request, that covers the
// guard, each SQL statement (named after its sqlc query) and each storage
// call -- to an OTLP receiver on loopback; log lines inside a request carry
// its trace and request ids.
func TestTracesCoverGuardSQLAndStorage(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	recv := &otlpReceiver{}
	collector := httptest.NewServer(recv)
	t.Cleanup(collector.Close)
	tp, err := tracing.New(ctx, tracing.Config{Endpoint: collector.URL + "/v1/traces"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tp.Shutdown(ctx) })

	pcfg, err := pgxpool.ParseConfig(pgtest.NewDatabase(t))
	require.NoError(t, err)
	pcfg.ConnConfig.Tracer = tracing.NewPGX(tp)
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	var logs syncbuf.Buffer
	logger := slog.New(tracing.LogHandler{Handler: slog.NewJSONHandler(&logs, nil), RequestID: httpapi.RequestIDFrom})
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	guard, err := httpapi.NewGuard(ctx, httpapi.AuthConfig{HMACSecret: secret})
	require.NoError(t, err)
	ts := httptest.NewUnstartedServer(nil)
	t.Cleanup(ts.Close)
	url := "http://" + ts.Listener.Addr().String()
	svc, err := service.New(ctx, service.Config{LocalRoot: t.TempDir(), Host: url}, pool, service.WithLogger(logger), service.WithTracerProvider(tp))
	require.NoError(t, err)
	ts.Config.Handler = httpapi.New(httpapi.Options{Service: svc, Guard: guard, Logger: logger, DownloadPath: svc.EffectiveConfig().DownloadPath, TracerProvider: tp, AccessLog: true})
	ts.Start()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "tenant": "acme", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
	require.NoError(t, err)
	s := &server{t: t, url: url}
	c := s.client(tok)

	ct, body := multipartBody(t, map[string][]byte{"report.pdf": []byte(pdf)})
	up, err := c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, up.StatusCode(), "%s", up.Body)

	doc := docx(t)
	init, err := c.InitiateUploadWithResponse(ctx, nil, client.InitiateUploadJSONRequestBody{OriginalName: "plan.docx", ContentType: docxType, SizeBytes: int64(len(doc)), Checksum: checksum(doc)})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, init.StatusCode(), "%s", init.Body)
	put, _ := http.NewRequest(init.JSON201.Upload.Method, init.JSON201.Upload.Url, bytes.NewReader(doc))
	for k, v := range init.JSON201.Upload.Headers {
		put.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(put)
	require.NoError(t, err)
	resp.Body.Close()
	done, err := c.CompleteUploadWithResponse(ctx, init.JSON201.Id, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, done.StatusCode(), "%s", done.Body)

	// A refused upload logs inside its request.
	ct, body = multipartBody(t, map[string][]byte{"photo.jpg": []byte("\x89PNG\r\n\x1a\n" + strings.Repeat("\x00", 64))})
	bad, err := c.UploadFileWithBodyWithResponse(ctx, nil, ct, body)
	require.NoError(t, err)
	require.Equal(t, http.StatusUnprocessableEntity, bad.StatusCode())

	require.NoError(t, tp.ForceFlush(ctx))

	upload := recv.traceWith("FileActivateUpload")
	require.NotEmpty(t, upload, "the upload's trace was exported")
	requireUnderRoot(t, upload)
	for _, want := range []string{"guard", "FileInsertHidden", "FileActivateUpload", "storage.commit"} {
		require.Contains(t, names(upload), want, "the upload's trace: %v", names(upload))
	}
	complete := recv.traceWith("FileFinalizeCompletion")
	require.NotEmpty(t, complete, "the complete's trace was exported")
	requireUnderRoot(t, complete)
	for _, want := range []string{"guard", "FileGetDirect", "FileClaimCompletion", "storage.stat", "storage.promote", "FileFinalizeCompletion"} {
		require.Contains(t, names(complete), want, "the complete's trace: %v", names(complete))
	}
	require.False(t, slices.Contains(names(complete), "FileInsertHidden"), "one request, one trace")

	var refused, refusedAccess map[string]any
	var refusedAccessLine string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		if m["msg"] == "upload refused" {
			refused = m
		}
		if m["msg"] == "request" && m["status"] == float64(http.StatusUnprocessableEntity) {
			refusedAccess, refusedAccessLine = m, line
		}
	}
	require.NotNil(t, refused, "the refusal was logged: %s", logs.String())
	require.Len(t, refused["trace_id"], 32, "with its trace id")
	require.NotEmpty(t, refused["request_id"], "and its request id")
	require.NotNil(t, refusedAccess, "the refused request's access line: %s", logs.String())
	require.Equal(t, refused["trace_id"], refusedAccess["trace_id"], "the access line names the request's trace")
	require.Equal(t, refused["request_id"], refusedAccess["request_id"])
	for _, key := range []string{`"trace_id"`, `"request_id"`} {
		require.Equal(t, 1, strings.Count(refusedAccessLine, key), "the access line names %s once: %s", key, refusedAccessLine)
	}
}

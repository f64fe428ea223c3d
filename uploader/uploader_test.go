package uploader_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/service"
	"github.com/uploadedfile/uploadedfile/uploader"
)

// server is a real uploadedfile HTTP server (local driver) with a token
// source for one user.
type server struct {
	url   string
	token func(context.Context) (string, error)
	pool  *pgxpool.Pool
}

func startServer(t *testing.T) *server {
	t.Helper()
	s, stop, err := newServer(pgtest.NewDatabase(t), t.TempDir())
	require.NoError(t, err)
	t.Cleanup(stop)
	return s
}

// newServer serves the API over the database at databaseURL (migrated) and
// files under dir; stop ends it.
func newServer(databaseURL, dir string) (*server, func(), error) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, nil, err
	}
	db.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	ts := httptest.NewUnstartedServer(nil)
	url := "http://" + ts.Listener.Addr().String()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := service.New(ctx, service.Config{Driver: service.DriverLocal, LocalRoot: dir, Host: url}, pool, service.WithLogger(quiet))
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	guard, err := httpapi.NewGuard(ctx, httpapi.AuthConfig{HMACSecret: secret})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	ts.Config.Handler = httpapi.New(httpapi.Options{Service: svc, Guard: guard, Logger: quiet, DownloadPath: svc.EffectiveConfig().DownloadPath})
	ts.Start()
	token := func(context.Context) (string, error) {
		return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "tenant": "acme", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
	}
	return &server{url: url, pool: pool, token: token}, func() { ts.Close(); pool.Close() }, nil
}

const pdf = "%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n"

// TestUploadAndBufferUpload: both styles make a ready file with the bytes
// sent; a refused file is an *Error with the problem's code and rule.
func TestUploadAndBufferUpload(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, err := uploader.New(s.url, s.token)
	require.NoError(t, err)
	ctx := context.Background()

	f, err := c.Upload(ctx, uploader.File{Name: "report.pdf", ContentType: "application/pdf", Body: strings.NewReader(pdf), Size: int64(len(pdf))})
	require.NoError(t, err)
	require.EqualValues(t, "ready", f.Status)
	require.EqualValues(t, len(pdf), f.SizeBytes)
	b, err := c.BufferUpload(ctx, "notes.txt", strings.NewReader("hello\n"))
	require.NoError(t, err)
	require.EqualValues(t, "ready", b.Status)

	_, err = c.Upload(ctx, uploader.File{Name: "photo.png", ContentType: "image/png", Body: strings.NewReader(pdf), Size: int64(len(pdf))})
	var ue *uploader.Error
	require.ErrorAs(t, err, &ue)
	require.Equal(t, http.StatusUnprocessableEntity, ue.Status)
	require.Equal(t, "core.file.upload-verification-failed", ue.Code)
	require.NotEmpty(t, ue.Rule)
	require.False(t, uploader.IsRetryable(err))
}

// TestGetAndDownload: the id an upload returns is the id Get and Download
// take; the bytes come back; a file that is not there is a 404 *Error,
// not retried.
func TestGetAndDownload(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, err := uploader.New(s.url, s.token)
	require.NoError(t, err)
	ctx := context.Background()
	f, err := c.Upload(ctx, uploader.File{Name: "report.pdf", ContentType: "application/pdf", Body: strings.NewReader(pdf), Size: int64(len(pdf))})
	require.NoError(t, err)
	got, err := c.Get(ctx, f.Id)
	require.NoError(t, err)
	require.Equal(t, f.Id, got.Id)
	body, err := c.Download(ctx, f.Id)
	require.NoError(t, err)
	b, err := io.ReadAll(body)
	require.NoError(t, err)
	require.NoError(t, body.Close())
	require.Equal(t, pdf, string(b))

	start := time.Now()
	_, err = c.Get(ctx, uuid.New())
	var ue *uploader.Error
	require.ErrorAs(t, err, &ue)
	require.Equal(t, http.StatusNotFound, ue.Status)
	require.Equal(t, "core.file.not-found", ue.Code)
	require.Less(t, time.Since(start), time.Second, "a 404 is final, not retried")
	_, err = c.Download(ctx, uuid.New())
	require.ErrorAs(t, err, &ue)
	require.Equal(t, http.StatusNotFound, ue.Status)
}

// TestUploadRetriesThroughAnOutage: the database refuses connections when
// the upload starts and comes back a moment later; the upload retries its
// 503s under the same keys and makes exactly one file.
func TestUploadRetriesThroughAnOutage(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	c, err := uploader.New(s.url, s.token, uploader.WithRetries(12, 50*time.Millisecond))
	require.NoError(t, err)
	restore := pgtest.CutConnections(t, s.pool)
	go func() { time.Sleep(700 * time.Millisecond); restore() }()
	f, err := c.Upload(context.Background(), uploader.File{Name: "report.pdf", ContentType: "application/pdf", Body: bytes.NewReader([]byte(pdf)), Size: int64(len(pdf))})
	require.NoError(t, err)
	require.EqualValues(t, "ready", f.Status)
	var n int
	require.NoError(t, s.pool.QueryRow(context.Background(), "SELECT count(*) FROM uploaded_file").Scan(&n))
	require.Equal(t, 1, n, "one file, whatever the retries")

	// Out of retries, the outage is the error, marked retryable.
	c, err = uploader.New(s.url, s.token, uploader.WithRetries(1, time.Millisecond))
	require.NoError(t, err)
	pgtest.CutConnections(t, s.pool)
	_, err = c.BufferUpload(context.Background(), "notes.txt", strings.NewReader("hello\n"))
	var ue *uploader.Error
	require.True(t, errors.As(err, &ue), "%v", err)
	require.Equal(t, "core.database.unavailable", ue.Code)
	require.True(t, uploader.IsRetryable(err))
}

// TestDeleteThroughAProxyThatLosesTheAnswer: a load balancer forwards the
// delete, the server deletes the file, and the answer is lost on the way
// back (the balancer answers 502). The uploader retries under the same
// Idempotency-Key and is answered as the first try was -- 204, not 404;
// deleting it again is a 404 *Error.
func TestDeleteThroughAProxyThatLosesTheAnswer(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	target, err := url.Parse(s.url)
	require.NoError(t, err)
	var lost atomic.Int32
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.ModifyResponse = func(r *http.Response) error {
		if r.Request.Method == http.MethodDelete && lost.Add(1) == 1 {
			return errors.New("the connection to the client broke")
		}
		return nil
	}
	lb := httptest.NewServer(proxy) // an error in ModifyResponse is a 502
	defer lb.Close()
	c, err := uploader.New(lb.URL, s.token, uploader.WithRetries(3, time.Millisecond))
	require.NoError(t, err)
	ctx := context.Background()
	f, err := c.BufferUpload(ctx, "notes.txt", strings.NewReader("hello\n"))
	require.NoError(t, err)

	require.NoError(t, c.Delete(ctx, f.Id))
	require.EqualValues(t, 2, lost.Load(), "the first answer was lost, the retry answered")
	var visible int
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT count(*) FROM uploaded_file WHERE deleted_at IS NULL AND deletion_pending_at IS NULL").Scan(&visible))
	require.Zero(t, visible)

	err = c.Delete(ctx, f.Id)
	var ue *uploader.Error
	require.ErrorAs(t, err, &ue)
	require.Equal(t, http.StatusNotFound, ue.Status)
}

// TestUploadRetriesATargetThatAnswersEarly: the upload target answers 503
// before it has read the body (a balancer whose upstream is gone, S3's
// SlowDown), the first three times. net/http may still be writing the
// body of such a request after Do returned, so a retry that rewinds the
// caller's body under it would race with that write and could send a
// mix of both (go test -race reports it). The retry sends the bytes whole
// once the target takes them: complete verifies their checksum.
func TestUploadRetriesATargetThatAnswersEarly(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	var early atomic.Int32
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		early.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable) // the body unread
	}))
	t.Cleanup(refuse.Close)
	refuseURL, err := url.Parse(refuse.URL)
	require.NoError(t, err)
	rt := &earlyFirst{next: http.DefaultTransport.(*http.Transport).Clone(), to: refuseURL, n: 3}
	c, err := uploader.New(s.url, s.token, uploader.WithHTTPClient(&http.Client{Transport: rt}), uploader.WithRetries(6, time.Millisecond))
	require.NoError(t, err)

	body := bytes.Repeat([]byte("id,name,amount\n1,alpha,10\n"), (8<<20)/26)
	f, err := c.Upload(context.Background(), uploader.File{Name: "big.csv", ContentType: "text/csv", Body: bytes.NewReader(body), Size: int64(len(body))})
	require.NoError(t, err)
	require.EqualValues(t, "ready", f.Status)
	require.EqualValues(t, len(body), f.SizeBytes)
	require.EqualValues(t, 3, early.Load(), "the first three sends were answered early")
}

// earlyFirst sends the first n PUTs (the upload target's) to another
// server, and everything else where it was going.
type earlyFirst struct {
	next http.RoundTripper
	to   *url.URL
	n    int32
	sent atomic.Int32
}

func (e *earlyFirst) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && e.sent.Add(1) <= e.n {
		r = r.Clone(r.Context())
		r.URL.Scheme, r.URL.Host, r.Host = e.to.Scheme, e.to.Host, e.to.Host
	}
	return e.next.RoundTrip(r)
}

// TestUploadWaitsOutItsKeysHeldClaim: the server of an upload's earlier
// attempt died while it held the key (a running claim whose lease has 3 s
// left). Sent again under the same key, the upload is answered 409
// core.idempotency.in-flight with Retry-After until the lease runs out;
// the uploader waits it out without spending its retries -- none here --
// and then makes the file once.
func TestUploadWaitsOutItsKeysHeldClaim(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	ctx := context.Background()
	_, err := s.pool.Exec(ctx, `INSERT INTO uploaded_file_idempotency (tenant_code, caller, key, route, state, lease_until, created_at, expires_at)
		VALUES ('acme', 'alice', 'held.initiate', 'POST /uploaded-file/initiate', 'running', now() + interval '3 seconds', now(), now() + interval '1 day')`)
	require.NoError(t, err)
	c, err := uploader.New(s.url, s.token, uploader.WithRetries(0, time.Millisecond))
	require.NoError(t, err)
	f, err := c.Upload(ctx, uploader.File{Name: "report.pdf", ContentType: "application/pdf", Body: bytes.NewReader([]byte(pdf)), Size: int64(len(pdf)), Key: "held"})
	require.NoError(t, err, "the held claim is waited out, not counted as a failure")
	require.EqualValues(t, "ready", f.Status)
	var n int
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT count(*) FROM uploaded_file").Scan(&n))
	require.Equal(t, 1, n)
}

package webui_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/adapter/webui"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/service"
)

func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }

// limit is the size limit of the service under test (maxFileSizeBytes).
const limit = 256 << 10

// repoRoot is the module's root directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// artifacts is where the screenshots go: UPLOADEDFILE_TEST_ARTIFACTS, or
// test-artifacts/ at the module root.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("UPLOADEDFILE_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "test-artifacts")
	}
	require.NoError(t, os.MkdirAll(dir, 0o750))
	return dir
}

// TestUploadPageInChromium: the upload page, served from its own origin,
// uploads through the API on another origin (allowed by cors.allowedOrigins)
// and, on S3, straight to the bucket (allowed by the bucket's CORS rule), in
// headless Chromium: a PDF and a file exactly at the size limit become ready
// with their bytes intact; PNG bytes named .jpg and a file over the limit
// are marked failed with their rule; a page on an origin the service does
// not allow cannot call it. On the local driver and on S3.
func TestUploadPageInChromium(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{service.DriverLocal, service.DriverS3} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			uploadPage(t, driver)
		})
	}
}

func uploadPage(t *testing.T, driver string) {
	ctx := context.Background()
	e := startPageEnv(t, driver, pageOptions{})
	// A file the user stored before opening the page: the page lists it.
	_, err := e.svc.Upload(service.WithRequestContext(ctx, service.RequestContext{Tenant: "dev", UserID: "dev-user"}), strings.NewReader("a,b\n1,2\n"), "earlier.csv", nil)
	require.NoError(t, err)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, "<!doctype html><title>another site</title><p>another origin</p>")
	}))
	t.Cleanup(other.Close)

	pdf := []byte("%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")
	atLimit := append([]byte("id,value\n"), bytes.Repeat([]byte("1,2\n"), (limit-9)/4)...)
	atLimit = append(atLimit, bytes.Repeat([]byte("\n"), limit-len(atLimit))...)
	require.Len(t, atLimit, limit)
	png := append([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), bytes.Repeat([]byte{0}, 64)...)
	over := bytes.Repeat([]byte("a,b\n"), limit/4+1)
	files := map[string][]byte{"report.pdf": pdf, "at-limit.csv": atLimit, "photo.jpg": png, "too-big.csv": over}

	var got struct {
		Results []struct {
			Name, Error, ID, Status *string
		}
		Rows           int
		ListedAtLoad   []string
		ProgressEvents int
		Blocked        bool
		Logs           []string
	}
	e.browse(t, "browser.mjs", &got, "UF_OTHER_PAGE="+other.URL+"/", "UF_FILES="+writeFiles(t, files), "UF_LABEL="+driver)
	require.Len(t, got.Results, 4, "%+v", got)
	byName := map[string]int{}
	for i, r := range got.Results {
		byName[*r.Name] = i
	}
	for _, name := range []string{"report.pdf", "at-limit.csv"} {
		r := got.Results[byName[name]]
		require.Nil(t, r.Error, "%s failed: %v; logs: %v", name, deref(r.Error), got.Logs)
		require.Equal(t, "ready", *r.Status, name)
		require.Equal(t, files[name], download(t, e.api, e.token, *r.ID), "%s: the bytes read back through the API are the bytes sent", name)
	}
	require.Contains(t, deref(got.Results[byName["photo.jpg"]].Error), "content.other-type", "PNG bytes named .jpg fail with their rule")
	require.Contains(t, deref(got.Results[byName["too-big.csv"]].Error), "size.too-large", "a file over the limit fails with its rule")
	require.Equal(t, []string{"earlier.csv"}, got.ListedAtLoad, "the page lists the caller's files when it opens")
	require.Equal(t, 3, got.Rows, "then the two ready files too")
	require.Positive(t, got.ProgressEvents, "the plugin reports progress to the Dashboard")
	require.True(t, got.Blocked, "a page on an origin the service does not allow cannot call it")

	// The upload cancelled while its bytes were on the way was aborted:
	// never ready, claimed for deletion (a tombstone until its window ends).
	var status string
	var aborted bool
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT status, (deletion_pending_at IS NOT NULL OR deleted_at IS NOT NULL)
		FROM uploaded_file WHERE original_name = 'cancelled.csv'`).Scan(&status, &aborted))
	require.Equal(t, "pending", status, "a cancelled upload never completes")
	require.True(t, aborted, "cancelling in Uppy aborts the pending file")
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// download reads a file's bytes through the API.
func download(t *testing.T, api, token, id string) []byte {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, api+"/uploaded-file/"+id+"/download", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return b
}

// TestAPIReferenceInChromium: the API reference renders the contract's
// operations in headless Chromium, and "Try it out" -- signed in with the
// page's token -- reads a file of that user (200).
func TestAPIReferenceInChromium(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := httptest.NewUnstartedServer(nil)
	t.Cleanup(srv.Close)
	base := "http://" + srv.Listener.Addr().String()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := service.New(ctx, service.Config{LocalRoot: t.TempDir(), Host: base}, pgtest.New(t), service.WithLogger(quiet))
	require.NoError(t, err)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	guard, err := httpapi.NewGuard(ctx, httpapi.AuthConfig{HMACSecret: secret})
	require.NoError(t, err)
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "dev-user", "tenant": "dev", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
	require.NoError(t, err)
	docs, err := webui.DocsHandler(webui.DocsConfig{BaseURL: base, Token: token})
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/", httpapi.New(httpapi.Options{Service: svc, Guard: guard, Logger: quiet, DownloadPath: svc.EffectiveConfig().DownloadPath}))
	mux.Handle("GET /docs/", docs)
	srv.Config.Handler = mux
	srv.Start()

	r, err := svc.Upload(service.WithRequestContext(ctx, service.RequestContext{Tenant: "dev", UserID: "dev-user"}), strings.NewReader("a,b\n1,2\n"), "rows.csv", nil)
	require.NoError(t, err)

	cmd := exec.Command("node", "e2e/docs.mjs")
	cmd.Dir = filepath.Join(repoRoot(t), "web")
	cmd.Env = append(os.Environ(), "UF_DOCS="+base+"/docs/", "UF_SHOTS="+artifacts(t), "UF_FILE_ID="+r.ID.String())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "browser: %s", stderr.String())
	var got struct {
		Operations int
		Status     string
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	require.GreaterOrEqual(t, got.Operations, 20, "the reference renders the contract's operations")
	require.Equal(t, "200", got.Status, "a call from the reference succeeds with the page's token")
}

// TestDownloadsAreSandboxedInChromium: an uploaded text file that looks
// like HTML, stored with an inline disposition, opened in Chromium from
// the download route: it is shown as text in an opaque origin (the
// sandbox), its script never runs, and it cannot reach the API origin's
// cookies.
func TestDownloadsAreSandboxedInChromium(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	apiSrv := httptest.NewUnstartedServer(nil)
	t.Cleanup(apiSrv.Close)
	apiURL := "http://" + apiSrv.Listener.Addr().String()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc, err := service.New(ctx, service.Config{Driver: service.DriverLocal, LocalRoot: t.TempDir(), Host: apiURL}, pgtest.New(t), service.WithLogger(quiet))
	require.NoError(t, err)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	guard, err := httpapi.NewGuard(ctx, httpapi.AuthConfig{HMACSecret: secret})
	require.NoError(t, err)
	apiSrv.Config.Handler = httpapi.New(httpapi.Options{Service: svc, Guard: guard, Logger: quiet, DownloadPath: svc.EffectiveConfig().DownloadPath})
	apiSrv.Start()
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "dev-user", "tenant": "dev", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
	require.NoError(t, err)

	html := "<!doctype html><title>owned</title><script>window.uploadedScriptRan = true; document.title = 'ran'</script><h1>hello</h1>\n"
	user := service.WithRequestContext(ctx, service.RequestContext{Tenant: "dev", UserID: "dev-user"})
	f, err := svc.Upload(user, strings.NewReader(html), "page.txt", &service.UploadOptions{Disposition: service.DispositionInline})
	require.NoError(t, err)

	cmd := exec.Command("node", "e2e/sandbox.mjs")
	cmd.Dir = filepath.Join(repoRoot(t), "web")
	cmd.Env = append(os.Environ(), "UF_DOWNLOAD="+apiURL+"/uploaded-file/"+f.ID.String()+"/download", "UF_TOKEN="+token, "UF_SHOTS="+artifacts(t))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "browser: %s", stderr.String())
	var got struct {
		Status             int
		CSP, Origin, Title string
		Text               string
		Ran, CookieAccess  bool
	}
	require.NoError(t, json.Unmarshal(out, &got), "%s", out)
	require.Equal(t, http.StatusOK, got.Status)
	require.Equal(t, "null", got.Origin, "an opaque origin: not the API's")
	require.Contains(t, got.CSP, "sandbox")
	require.False(t, got.Ran, "the file's script never runs")
	require.NotEqual(t, "ran", got.Title)
	require.Contains(t, got.Text, "<script>", "shown as the text it was declared to be")
	require.False(t, got.CookieAccess, "no access to the API origin's cookies")
}

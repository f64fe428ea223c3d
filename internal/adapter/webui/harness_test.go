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
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/adapter/webui"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/service"
)

// pageEnv is the upload page on an origin of its own, over the API on
// another (whose CORS allows the page), on the local driver or on a fresh
// S3 bucket of versitygw.
type pageEnv struct {
	page, api, token string
	pool             *pgxpool.Pool
	svc              *service.Service
}

// pageOptions adjust a pageEnv: the service's configuration, the origins
// the bucket's CORS rule allows (default: the page's), and what the page's
// origin serves (default: the development upload page).
type pageOptions struct {
	config        func(*service.Config)
	bucketOrigins func(page string) []string
	pageHandler   http.Handler
}

func startPageEnv(t *testing.T, driver string, o pageOptions) *pageEnv {
	t.Helper()
	ctx := context.Background()
	// The page's origin exists before anything is configured with it.
	pageSrv := httptest.NewUnstartedServer(nil)
	t.Cleanup(pageSrv.Close)
	pageOrigin := "http://" + pageSrv.Listener.Addr().String()
	apiSrv := httptest.NewUnstartedServer(nil)
	t.Cleanup(apiSrv.Close)
	apiURL := "http://" + apiSrv.Listener.Addr().String()

	cfg := service.Config{Driver: driver, Host: apiURL, MaxFileSizeBytes: limit}
	if o.config != nil {
		o.config(&cfg)
	}
	if driver == service.DriverS3 {
		srv := s3test.SharedOf(t, s3test.VersityGW) // bucket CORS per origin (MinIO's is server-wide)
		s3cfg := srv.NewBucket(t)
		origins := []string{pageOrigin}
		if o.bucketOrigins != nil {
			origins = o.bucketOrigins(pageOrigin)
		}
		_, err := srv.Client().PutBucketCors(ctx, &awss3.PutBucketCorsInput{Bucket: aws.String(s3cfg.Bucket),
			CORSConfiguration: &types.CORSConfiguration{CORSRules: []types.CORSRule{s3test.BucketCORSRule(origins...)}}})
		require.NoError(t, err)
		cfg.Bucket, cfg.Endpoint, cfg.Region, cfg.ForcePathStyle = s3cfg.Bucket, s3cfg.Endpoint, s3cfg.Region, true
		cfg.AccessID, cfg.AccessKey = s3cfg.AccessID, s3cfg.AccessKey
	} else {
		cfg.LocalRoot = t.TempDir()
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	pool := pgtest.New(t)
	svc, err := service.New(ctx, cfg, pool, service.WithLogger(quiet))
	require.NoError(t, err)
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	guard, err := httpapi.NewGuard(ctx, httpapi.AuthConfig{HMACSecret: secret})
	require.NoError(t, err)
	apiSrv.Config.Handler = httpapi.New(httpapi.Options{Service: svc, Guard: guard, Logger: quiet, DownloadPath: svc.EffectiveConfig().DownloadPath,
		CORSAllowedOrigins: []string{pageOrigin}})
	apiSrv.Start()
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "dev-user", "tenant": "dev", "exp": time.Now().Add(time.Hour).Unix()}).SignedString(secret)
	require.NoError(t, err)
	page := o.pageHandler
	if page == nil {
		page, err = webui.Handler(webui.Config{BaseURL: apiURL, Token: token})
		require.NoError(t, err)
	}
	pageSrv.Config.Handler = page
	pageSrv.Start()
	return &pageEnv{page: pageOrigin + "/", api: apiURL, token: token, pool: pool, svc: svc}
}

// browse runs the Node script web/e2e/<script> with env (and the page,
// the API, the token and the screenshot folder) and decodes the one JSON
// object it prints into out.
func (e *pageEnv) browse(t *testing.T, script string, out any, env ...string) {
	t.Helper()
	cmd := exec.Command("node", "e2e/"+script)
	cmd.Dir = filepath.Join(repoRoot(t), "web")
	cmd.Env = append(append(os.Environ(), "UF_PAGE="+e.page, "UF_API="+e.api, "UF_TOKEN="+e.token, "UF_SHOTS="+artifacts(t)), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	require.NoError(t, err, "browser: %s", stderr.String())
	require.NoError(t, json.Unmarshal(stdout, out), "%s", stdout)
}

// writeFiles writes each named body into a temporary folder and returns
// their paths, as a JSON list for a script.
func writeFiles(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	var paths []string
	for name, body := range files {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, body, 0o600))
		paths = append(paths, p)
	}
	list, _ := json.Marshal(paths)
	return string(list)
}

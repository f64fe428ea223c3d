package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay"
	"github.com/uploadedfile/uploadedfile/internal/adapter/eventrelay/variantsink"
	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/adapter/tracks"
	"github.com/uploadedfile/uploadedfile/internal/imagevariant"
	"github.com/uploadedfile/uploadedfile/internal/testkit/clamdtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/service"
)

// run executes the command line against databaseURL and returns stdout.
func run(t *testing.T, ctx context.Context, databaseURL string, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand(&out, &errOut)
	cmd.SetArgs(append([]string{"--database-url", databaseURL}, args...))
	err := cmd.ExecuteContext(ctx)
	return out.String(), err
}

func TestMigrateCommand(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	ctx := context.Background()

	out, err := run(t, ctx, url, "migrate", "version")
	require.NoError(t, err)
	require.Equal(t, "version: none (no migration applied)\n", out)

	out, err = run(t, ctx, url, "--output", "json", "migrate", "version")
	require.NoError(t, err)
	require.JSONEq(t, `{"version":0,"binaryVersion":20261129000006}`, out, "--output json is JSON")

	out, err = run(t, ctx, url, "migrate", "up")
	require.NoError(t, err)
	require.Equal(t, "version: 20261129000006\n", out)
	out, err = run(t, ctx, url, "--output", "json", "migrate", "up")
	require.NoError(t, err)
	require.JSONEq(t, `{"version":20261129000006,"binaryVersion":20261129000006}`, out)

	_, err = run(t, ctx, url, "migrate", "down")
	require.ErrorContains(t, err, "exactly one of --steps N")

	out, err = run(t, ctx, url, "migrate", "down", "--steps", "1")
	require.NoError(t, err)
	require.Equal(t, "version: 20261129000005\n", out)

	_, err = run(t, ctx, url, "migrate", "force", "123")
	require.ErrorContains(t, err, `"123" is not one of this binary's versions`)
	// Forced to the version it is at (what an operator does after
	// repairing a dirty migration by hand): down --all then starts there.
	out, err = run(t, ctx, url, "migrate", "force", "20261129000005")
	require.NoError(t, err)
	require.Equal(t, "version: 20261129000005\n", out)

	out, err = run(t, ctx, url, "migrate", "down", "--all")
	require.NoError(t, err)
	require.Equal(t, "version: none (no migration applied)\n", out)

	out, err = run(t, ctx, url, "migrate", "up")
	require.NoError(t, err)
	require.Equal(t, "version: 20261129000006\n", out)

	_, err = run(t, ctx, "mysql://x", "migrate", "up")
	require.ErrorContains(t, err, "unsupported database URL scheme")
}

// TestServeDev follows the README as a new user would: `serve --dev`
// creates the database, prints a token and curl lines; with them a file is
// uploaded, read, downloaded and deleted; the server stops on cancel.
func TestServeDev(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.ServerURL())
	require.NoError(t, err)
	name := fmt.Sprintf("uploadedfile_devtest_%d_%d", os.Getpid(), time.Now().UnixNano())
	u.Path = "/" + name
	missing := u.String()
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), pgtest.ServerURL())
		require.NoError(t, err)
		defer conn.Close(context.Background())
		_, err = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		require.NoError(t, err)
	})
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("localRoot: "+t.TempDir()+"\n"), 0o600))

	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		cmd := newRootCommand(pw, io.Discard)
		cmd.SetArgs([]string{"--database-url", missing, "serve", "--dev", "--listen", "127.0.0.1:0", "--config", cfgFile, "--metrics-listen", "127.0.0.1:0"})
		done <- cmd.ExecuteContext(ctx)
		pw.Close()
	}()

	var out strings.Builder
	buf := make([]byte, 4096)
	tokenRE := regexp.MustCompile(`export TOKEN=(\S+)`)
	for !strings.Contains(out.String(), "DELETE") {
		n, err := pr.Read(buf)
		require.NoError(t, err, "output so far: %s", out.String())
		out.Write(buf[:n])
	}
	go io.Copy(io.Discard, pr)
	base := regexp.MustCompile(`listening on (http://[0-9.:]+)`).FindStringSubmatch(out.String())[1]
	token := tokenRE.FindStringSubmatch(out.String())[1]
	require.Contains(t, out.String(), "curl -s -H \"Authorization: Bearer $TOKEN\" -F file=@hello.txt "+base+"/uploaded-file")

	engine := "image engine: " + imagevariant.Describe(imagevariant.Engines()[0]) + "\n"
	for path, want := range map[string]string{"/healthz": "ok\n", "/readyz": "ready\n" + engine} {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		require.Equal(t, want, string(body), path)
	}

	metricsURL := regexp.MustCompile(`metrics on (http://[0-9.:]+/metrics)`).FindStringSubmatch(out.String())[1]
	resp, err := http.Get(metricsURL)
	require.NoError(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "metrics on the operator listener need no token")
	require.Contains(t, string(metrics), "go_goroutines")
	resp, err = http.Get(base + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the public listener never serves metrics to anonymous clients")

	resp, err = http.Get(base + "/")
	require.NoError(t, err)
	home, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "--dev serves the upload page at /")
	require.Contains(t, string(home), `"token":"`+token+`"`, "signed in with the development token")
	require.Contains(t, out.String(), "upload page:    "+base+"/")
	require.Contains(t, out.String(), "API reference:  "+base+"/docs/")
	require.Regexp(t, `metrics: +http://127\.0\.0\.1:\d+/metrics`, out.String(), "--dev serves metrics on a loopback operator listener")
	resp, err = http.Get(base + "/docs/openapi.json")
	require.NoError(t, err)
	spec, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "--dev serves the API reference")
	require.Contains(t, string(spec), `"url":"`+base+`"`, "the contract names this server")
	resp, err = http.Get(base + "/_dev/app.js")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	resp, err = http.Get(base + "/debug/pprof/")
	require.NoError(t, err)
	resp.Body.Close()
	require.NotEqual(t, http.StatusOK, resp.StatusCode, "pprof is never on the API listener")

	// The printed curl lines, done with net/http.
	do := func(method, path string, body io.Reader, contentType string) (int, []byte) {
		req, err := http.NewRequest(method, base+path, body)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	part, err := mw.CreateFormFile("file", "hello.txt")
	require.NoError(t, err)
	_, _ = part.Write([]byte("hello, uploadedfile\n"))
	require.NoError(t, mw.Close())
	status, body := do(http.MethodPost, "/uploaded-file", &form, mw.FormDataContentType())
	require.Equal(t, http.StatusCreated, status, "%s", body)
	var created struct {
		ID string `json:"id"`
	}
	require.NoError(t, json.Unmarshal(body, &created))

	status, body = do(http.MethodGet, "/uploaded-file/"+created.ID, nil, "")
	require.Equal(t, http.StatusOK, status, "%s", body)
	require.Contains(t, string(body), `"originalName":"hello.txt"`)
	status, body = do(http.MethodGet, "/uploaded-file/"+created.ID+"/download", nil, "")
	require.Equal(t, http.StatusOK, status)
	require.Equal(t, "hello, uploadedfile\n", string(body))
	status, _ = do(http.MethodDelete, "/uploaded-file/"+created.ID, nil, "")
	require.Equal(t, http.StatusNoContent, status)
	status, _ = do(http.MethodGet, "/uploaded-file/"+created.ID, nil, "")
	require.Equal(t, http.StatusNotFound, status)

	resp, err = http.Get(metricsURL)
	require.NoError(t, err)
	metrics, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Contains(t, string(metrics), `uploadedfile_http_requests_total{code="201",route="POST /uploaded-file"} 1`)
	require.Contains(t, string(metrics), `uploadedfile_http_requests_total{code="404",route="GET /uploaded-file/{id}"} 1`)
	require.Contains(t, string(metrics), `uploadedfile_storage_requests_total{op="put",outcome="ok"} 1`)
	require.Contains(t, string(metrics), `uploadedfile_http_requests_total{code="401",route="unmatched"}`, "a 401 is counted")

	out2, err := run(t, context.Background(), missing, "migrate", "version")
	require.NoError(t, err)
	require.Equal(t, "version: 20261129000006\n", out2, "serve migrated the new database")

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "graceful shutdown")
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop after cancel")
	}
}

func TestServeRefusesBadConfig(t *testing.T) {
	t.Parallel()
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("driver: local\nlocalRoot: "+t.TempDir()+"\nuploadUrlTtlSecs: 5\n"), 0o600))
	_, err := run(t, context.Background(), pgtest.NewDatabase(t), "serve", "--config", cfgFile, "--listen", "127.0.0.1:0")
	require.ErrorContains(t, err, "uploadUrlTtlSecs", "an unknown option is named")

	require.NoError(t, os.WriteFile(cfgFile, []byte("localRoot: "+t.TempDir()+"\nauth:\n  hmacSecret: "+strings.Repeat("s", 40)+"\npendingCleanupInterval: sometimes\n"), 0o600))
	_, err = run(t, context.Background(), pgtest.NewDatabase(t), "serve", "--config", cfgFile, "--listen", "127.0.0.1:0")
	require.ErrorContains(t, err, "pendingCleanupInterval")

	require.NoError(t, os.WriteFile(cfgFile, []byte("localRoot: "+t.TempDir()+"\n"), 0o600))
	_, err = run(t, context.Background(), pgtest.NewDatabase(t), "serve", "--config", cfgFile, "--listen", "127.0.0.1:0")
	require.ErrorContains(t, err, "auth", "no key source outside --dev")

	require.NoError(t, os.WriteFile(cfgFile, []byte("localRoot: "+t.TempDir()+"\nauthorizationPolicy: 'context.roles.exists('\n"), 0o600))
	_, err = run(t, context.Background(), pgtest.NewDatabase(t), "serve", "--dev", "--config", cfgFile, "--listen", "127.0.0.1:0")
	require.ErrorContains(t, err, "authorizationPolicy", "a bad CEL expression stops start-up, named")
}

// TestUnknownKeysSayWhereAndSuggest: an unknown key names its source (the
// file and key, or the environment variable) and the nearest known key.
func TestUnknownKeysSayWhereAndSuggest(t *testing.T) {
	t.Parallel()
	_, err := loadConfig("", func() []string { return []string{"UPLOADEDFILE_ADDR=:8080"} })
	require.ErrorContains(t, err, `environment variable UPLOADEDFILE_ADDR: unknown key "addr"`)
	require.NotContains(t, err.Error(), "''", "no empty key name")

	_, err = loadConfig("", func() []string { return []string{"UPLOADEDFILE_LISEN=:8080"} })
	require.ErrorContains(t, err, `environment variable UPLOADEDFILE_LISEN: unknown key "lisen" (did you mean "listen"?)`)

	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("remoteClone:\n  alowedHosts: [a]\n"), 0o600))
	_, err = loadConfig(cfgFile, func() []string { return nil })
	require.ErrorContains(t, err, "config file "+cfgFile+`: unknown key "remoteClone.alowedHosts" (did you mean "remoteClone.allowedHosts"?)`)

	_, err = loadConfig("", func() []string {
		return []string{"UPLOADEDFILE_CONFIG=/etc/uf.yaml", "UPLOADEDFILE_METRICS_LISTEN=127.0.0.1:9090"}
	})
	require.NoError(t, err, "UPLOADEDFILE_CONFIG is the --config flag's, not a key")
}

func TestEnvKeys(t *testing.T) {
	t.Parallel()
	env := func() []string {
		return []string{"UPLOADEDFILE_LOCAL_ROOT=/srv/files", "UPLOADEDFILE_UPLOAD_URL_TTL_SECONDS=120", "UPLOADEDFILE_CDN_BASE_URL=https://cdn.example.com",
			"UPLOADEDFILE_ALLOWED_MIME_TYPES=image/png,application/pdf", "UPLOADEDFILE_REMOTE_CLONE__ALLOWED_HOSTS=a.example.com,b.example.com",
			"UPLOADEDFILE_AUTH__HMAC_SECRET=s3cr3t", "DATABASE_URL=postgres://db/x", "OTHER=1",
			"UPLOADEDFILE_SPOOL_DIR=/var/spool/uf", "UPLOADEDFILE_REMOTE_CLONE__ALLOWED_PORTS=8443,9000"}
	}
	c, err := loadConfig("", env)
	require.NoError(t, err)
	require.Equal(t, "/srv/files", c.LocalRoot)
	require.Equal(t, 120, c.UploadURLTTLSeconds)
	require.Equal(t, "https://cdn.example.com", c.CDNBaseURL)
	require.Equal(t, []string{"image/png", "application/pdf"}, c.AllowedMIMETypes)
	require.Equal(t, []string{"a.example.com", "b.example.com"}, c.RemoteClone.AllowedHosts)
	require.Equal(t, "s3cr3t", c.Auth.HMACSecret)
	require.Empty(t, c.DatabaseURL, "DATABASE_URL is the last fallback of the database, not the key (TestConfigurationPrecedence)")
	require.Equal(t, "/var/spool/uf", c.SpoolDir)
	require.Equal(t, []int{8443, 9000}, c.RemoteClone.AllowedPorts)

	sc, err := c.serviceConfig()
	require.NoError(t, err)
	require.Equal(t, "/var/spool/uf", sc.SpoolDir)
	require.Equal(t, []int{8443, 9000}, sc.RemoteClone.AllowedPorts)
}

// TestServeDebug checks the pprof listener serves profiles on its own
// address and stops when told to.
func TestServeDebug(t *testing.T) {
	t.Parallel()
	addr, stop, err := serveDebug("127.0.0.1:0")
	require.NoError(t, err)
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(body), "goroutine profile:")

	stop()
	_, err = http.Get("http://" + addr + "/debug/pprof/")
	require.Error(t, err, "stopped listener must refuse connections")

	_, _, err = serveDebug("not-an-address")
	require.ErrorContains(t, err, "serve: debug listen")
}

// TestServeOptionsFromFile checks the file's listen and migrate keys apply
// unless a flag was given.
func TestServeOptionsFromFile(t *testing.T) {
	t.Parallel()
	no, yes := false, true
	cfg := fileConfig{Listen: "127.0.0.1:9999", Migrate: &no}

	o := serveOptions{listen: "127.0.0.1:8080", dev: true}
	o.applyFile(cfg, func(string) bool { return false })
	require.Equal(t, "127.0.0.1:9999", o.listen)
	require.False(t, o.migrate, "migrate: false in the file skips migrations, even with --dev")

	o = serveOptions{listen: "127.0.0.1:7777", migrate: true}
	o.applyFile(cfg, func(name string) bool { return name == "listen" || name == "migrate" })
	require.Equal(t, "127.0.0.1:7777", o.listen, "a flag wins over the file")
	require.True(t, o.migrate, "--migrate wins over the file")

	o = serveOptions{listen: "127.0.0.1:8080"}
	o.applyFile(fileConfig{}, func(string) bool { return false })
	require.False(t, o.migrate, "outside --dev, no migration unless asked")
	o = serveOptions{listen: "127.0.0.1:8080"}
	o.applyFile(fileConfig{Migrate: &yes}, func(string) bool { return false })
	require.True(t, o.migrate, "migrate: true asks")
	o = serveOptions{listen: "127.0.0.1:8080", dev: true}
	o.applyFile(fileConfig{}, func(string) bool { return false })
	require.True(t, o.migrate, "--dev migrates by default")
	o = serveOptions{listen: "127.0.0.1:8080", dev: true, noMigrate: true}
	o.applyFile(fileConfig{}, func(name string) bool { return name == "no-migrate" })
	require.False(t, o.migrate, "--no-migrate wins")
}

// TestEventSinksConfig: sinks are named sections from the file or the
// environment; a typo inside one is named with a suggestion; a sink needs
// exactly one destination and a valid secret.
func TestEventSinksConfig(t *testing.T) {
	t.Parallel()
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(`
events:
  retention: 24h
  sinks:
    billing:
      types: [file.ready, file.purged]
      maxAttempts: 5
      webhook: {url: "https://billing.example.test/hooks", timeout: 3s}
`), 0o600))
	c, err := loadConfig(cfgFile, func() []string {
		return []string{"UPLOADEDFILE_EVENTS__SINKS__BILLING__WEBHOOK__SECRET=whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
			"UPLOADEDFILE_EVENTS__SINKS__BUS__NATS__URL=nats://127.0.0.1:4222"}
	})
	require.NoError(t, err)
	require.Equal(t, 24*time.Hour, c.Events.Retention)
	billing := c.Events.Sinks["billing"]
	require.Equal(t, []string{"file.ready", "file.purged"}, billing.Types)
	require.Equal(t, 5, billing.MaxAttempts)
	require.Equal(t, "https://billing.example.test/hooks", billing.Webhook.URL)
	require.Equal(t, 3*time.Second, billing.Webhook.Timeout)
	require.Equal(t, "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", billing.Webhook.Secret, "the secret from the environment")
	require.Equal(t, "nats://127.0.0.1:4222", c.Events.Sinks["bus"].NATS.URL)
	_, _, err = billing.build(context.Background(), "billing")
	require.NoError(t, err)

	require.NoError(t, os.WriteFile(cfgFile, []byte("events:\n  sinks:\n    billing:\n      webhok: {url: x}\n"), 0o600))
	_, err = loadConfig(cfgFile, func() []string { return nil })
	require.ErrorContains(t, err, `unknown key "events.sinks.billing.webhok.url" (did you mean "events.sinks.billing.webhook.url"?)`)

	bad := sinkConfig{}
	_, _, err = bad.build(context.Background(), "x")
	require.ErrorContains(t, err, "events.sinks.x: configure webhook.url or nats.url")
	bad.Webhook.URL, bad.NATS.URL = "https://a.example.test", "nats://127.0.0.1:4222"
	_, _, err = bad.build(context.Background(), "x")
	require.ErrorContains(t, err, "not both")
	bad.NATS.URL, bad.Webhook.Secret = "", "plain-secret"
	_, _, err = bad.build(context.Background(), "x")
	require.ErrorContains(t, err, "events.sinks.x.webhook: webhook: invalid configuration: the secret must start with whsec_")
	require.NotContains(t, err.Error(), "plain-secret", "a secret is never echoed")
}

// TestScanConfigChecksClamdAtStart: the gate needs scan.clamd, and refuses
// to start against a clamd whose StreamMaxLength is below the largest file
// the service accepts (it could not scan such a file whole).
func TestScanConfigChecksClamdAtStart(t *testing.T) {
	t.Parallel()
	d := clamdtest.Start(t, 1)
	ctx := context.Background()
	var c fileConfig
	c.Scan.Mode = "gate"
	_, err := c.scanner(ctx, 10<<20, true)
	require.ErrorContains(t, err, "scan.mode gate needs scan.clamd")

	c.Scan.Clamd = d.Addr
	_, err = c.scanner(ctx, 10<<20, true)
	require.ErrorContains(t, err, "StreamMaxLength is below maxFileSizeBytes (10485760)")
	opts, err := c.scanner(ctx, 512<<10, true)
	require.NoError(t, err)
	require.Len(t, opts, 1)

	c.Scan.Clamd = "tcp://127.0.0.1:1"
	_, err = c.scanner(ctx, 512<<10, true)
	require.ErrorContains(t, err, "clamd: unavailable", "a clamd that is not there stops the start")

	c.Scan.Mode = ""
	opts, err = c.scanner(ctx, 512<<10, true)
	require.NoError(t, err)
	require.Len(t, opts, 1, "gate off: the scanner is there for rescans, and nothing is checked at start")
	c.Scan.Clamd = ""
	opts, err = c.scanner(ctx, 512<<10, true)
	require.NoError(t, err)
	require.Empty(t, opts, "no clamd, no scanner")
}

// TestVariantPresetsConfig: presets are named sections from the file or
// the environment; a typo is named; a bad preset refuses the service.
func TestVariantPresetsConfig(t *testing.T) {
	t.Parallel()
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte(`
variants:
  maxPixels: 1000000
  presets:
    thumb: {width: 400, height: 300, fit: cover, format: webp, eager: true}
`), 0o600))
	c, err := loadConfig(cfgFile, func() []string {
		return []string{"UPLOADEDFILE_VARIANTS__PRESETS__AVATAR__WIDTH=64", "UPLOADEDFILE_VARIANTS__PRESETS__AVATAR__HEIGHT=64",
			"UPLOADEDFILE_VARIANTS__PRESETS__AVATAR__FIT=inside", "UPLOADEDFILE_VARIANTS__PRESETS__AVATAR__FORMAT=jpeg"}
	})
	require.NoError(t, err)
	sc, err := c.serviceConfig()
	require.NoError(t, err)
	require.Equal(t, service.VariantPreset{Width: 400, Height: 300, Fit: "cover", Format: "webp", Eager: true}, sc.Variants.Presets["thumb"])
	require.Equal(t, service.VariantPreset{Width: 64, Height: 64, Fit: "inside", Format: "jpeg"}, sc.Variants.Presets["avatar"])
	require.EqualValues(t, 1_000_000, sc.Variants.MaxPixels)

	require.NoError(t, os.WriteFile(cfgFile, []byte("variants:\n  presets:\n    thumb:\n      widht: 4\n"), 0o600))
	_, err = loadConfig(cfgFile, func() []string { return nil })
	require.ErrorContains(t, err, `unknown key "variants.presets.thumb.widht" (did you mean "variants.presets.thumb.width"?)`)

	sc.Variants.Presets["thumb"] = service.VariantPreset{Width: 400, Height: 300, Fit: "stretch", Format: "webp"}
	sc.LocalRoot = t.TempDir()
	_, err = service.New(context.Background(), sc, pgtest.New(t))
	require.ErrorContains(t, err, `variants.presets.thumb: fit "stretch"`)
}

// TestEagerPresetsAddTheBuiltinSink: `events relay` (like serve) runs the
// eager-variants sink when, and only when, a preset is eager.
func TestEagerPresetsAddTheBuiltinSink(t *testing.T) {
	t.Parallel()
	g := &globals{logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	pool := pgtest.New(t)
	cfg := fileConfig{Config: service.Config{LocalRoot: t.TempDir()}}
	cfg.Variants.Presets = map[string]service.VariantPreset{"thumb": {Width: 8, Height: 8, Fit: "cover", Format: "png"}}
	sinks, closeSinks, err := cfg.builtinSinks(context.Background(), g, pool)
	require.NoError(t, err)
	closeSinks()
	require.Empty(t, sinks)

	cfg.Variants.Presets["thumb"] = service.VariantPreset{Width: 8, Height: 8, Fit: "cover", Format: "png", Eager: true}
	sinks, closeSinks, err = cfg.builtinSinks(context.Background(), g, pool)
	require.NoError(t, err)
	defer closeSinks()
	require.Len(t, sinks, 1)
	require.Equal(t, variantsink.Name, sinks[0].Name)
	require.Equal(t, []string{"file.ready"}, sinks[0].Types)
}

// TestPoolParametersInTheDatabaseURL: pool_max_conns (documented) and the
// other pgxpool parameters are the pool's; the single connections serve
// opens first (reach, create) must not send them to PostgreSQL, which
// refuses them as settings ("unrecognized configuration parameter").
func TestPoolParametersInTheDatabaseURL(t *testing.T) {
	t.Parallel()
	withPool := pgtest.WithQuery(pgtest.NewEmptyDatabase(t), "pool_max_conns=4&pool_max_conn_idle_time=10s")
	g := &globals{databaseURL: withPool}
	require.NoError(t, g.reachDatabase(context.Background()))
	require.NoError(t, ensureDatabase(context.Background(), withPool))
	pool, err := openPool(context.Background(), withPool, nil, maintenanceLimits)
	require.NoError(t, err)
	defer pool.Close()
	require.EqualValues(t, 4, pool.Config().MaxConns)
}

// TestServeExitsOnFailure: serve, run as the real command line in a
// process of its own, exits promptly and non-zero with its error on every
// failure path at start -- a listener whose address is taken (API, metrics,
// debug), an event relay that cannot be built, a database that is not
// there -- instead of printing the error and hanging on background work.
func TestServeExitsOnFailure(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { taken.Close() })
	busy := taken.Addr().String()
	dbURL := pgtest.NewDatabase(t)
	base := "localRoot: " + t.TempDir() + "\nauth:\n  hmacSecret: " + strings.Repeat("s", 40) + "\n"
	for _, tc := range []struct {
		name, config, want string
		args               []string
	}{
		{name: "api listener", args: []string{"--listen", busy}, want: "listen"},
		{name: "metrics listener", args: []string{"--metrics-listen", busy}, want: "metrics listen"},
		{name: "debug listener", args: []string{"--debug-listen", busy}, want: "debug listen"},
		{name: "event relay", config: "events:\n  sinks:\n    hook:\n      webhook: {url: \"http://" + busy + "/hook\", secret: plain}\n", want: "events.sinks.hook"},
		{name: "database", args: []string{"--database-url", "postgres://postgres@127.0.0.1:1/none?sslmode=disable"}, want: "cannot reach the database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			cfgFile := filepath.Join(t.TempDir(), "config.yaml")
			require.NoError(t, os.WriteFile(cfgFile, []byte(base+tc.config), 0o600))
			args := append([]string{"-test.run=^$", "--", "--database-url", dbURL, "serve", "--config", cfgFile, "--listen", "127.0.0.1:0", "--no-maintenance=false"}, tc.args...)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], args...)
			cmd.Env = append(os.Environ(), "UF_RUN_MAIN=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			start := time.Now()
			err := cmd.Run()
			require.NoError(t, ctx.Err(), "serve did not exit within 30 s; stderr: %s", stderr.String())
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "a non-zero exit; stderr: %s", stderr.String())
			require.NotZero(t, exit.ExitCode())
			require.Contains(t, stderr.String(), tc.want)
			require.Less(t, time.Since(start), 20*time.Second, "a prompt exit")
		})
	}
}

// TestConfigurationPrecedence: every command resolves its settings one way
// -- a flag over UPLOADEDFILE_* over the --config file, DATABASE_URL the last
// fallback of the database -- and says where a value came from; a duration
// without a unit is refused, naming the key and its source; the test
// suite's own UPLOADEDFILE_TEST_* variables are not configuration.
func TestConfigurationPrecedence(t *testing.T) {
	t.Parallel()
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("databaseUrl: postgres://file/db\nbodyReadTimeout: 2m\n"), 0o600))
	resolve := func(flag string, env ...string) (string, string) {
		g := &globals{configFile: cfgFile, dbFlag: flag, environ: func() []string { return env }}
		_, err := g.config()
		require.NoError(t, err)
		return g.databaseURL, g.databaseSource
	}
	url, src := resolve("postgres://flag/db", "UPLOADEDFILE_DATABASE_URL=postgres://env/db", "DATABASE_URL=postgres://fallback/db")
	require.Equal(t, "postgres://flag/db", url)
	require.Equal(t, "--database-url", src)
	url, src = resolve("", "UPLOADEDFILE_DATABASE_URL=postgres://env/db", "DATABASE_URL=postgres://fallback/db")
	require.Equal(t, "postgres://env/db", url)
	require.Equal(t, "environment variable UPLOADEDFILE_DATABASE_URL", src)
	url, src = resolve("", "DATABASE_URL=postgres://fallback/db")
	require.Equal(t, "postgres://file/db", url, "the file's key before the DATABASE_URL fallback")
	require.Equal(t, "config file "+cfgFile, src)

	g := &globals{environ: func() []string { return []string{"DATABASE_URL=postgres://fallback/db", "UPLOADEDFILE_TEST_S3=minio"} }}
	_, err := g.config()
	require.NoError(t, err, "UPLOADEDFILE_TEST_* are the test suite's, not keys")
	require.Equal(t, "postgres://fallback/db", g.databaseURL)
	require.Equal(t, "DATABASE_URL", g.databaseSource)

	require.NoError(t, os.WriteFile(cfgFile, []byte("bodyReadTimeout: 5\n"), 0o600))
	_, err = loadConfig(cfgFile, func() []string { return nil })
	require.ErrorContains(t, err, "config file "+cfgFile+": bodyReadTimeout: 5 is not a duration with a unit")
	_, err = loadConfig("", func() []string { return []string{"UPLOADEDFILE_EVENTS__SINKS__HOOK__WEBHOOK__TIMEOUT=30"} })
	require.ErrorContains(t, err, `environment variable UPLOADEDFILE_EVENTS__SINKS__HOOK__WEBHOOK__TIMEOUT: events.sinks.hook.webhook.timeout: "30" is not a duration with a unit`)
	c, err := loadConfig("", func() []string { return []string{"UPLOADEDFILE_BODY_IDLE_TIMEOUT=45s"} })
	require.NoError(t, err)
	require.Equal(t, 45*time.Second, c.BodyIdleTimeout)
}

// TestMigrateHonoursTheConfiguration: migrate reads --config and
// UPLOADEDFILE_DATABASE_URL like every other command (it used to fall back
// to the default database, and could migrate the wrong one).
func TestMigrateHonoursTheConfiguration(t *testing.T) {
	t.Parallel()
	target := pgtest.NewEmptyDatabase(t)
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("databaseUrl: "+target+"\n"), 0o600))
	var out bytes.Buffer
	cmd := newRootCommand(&out, io.Discard)
	cmd.SetArgs([]string{"migrate", "up", "--config", cfgFile})
	require.NoError(t, cmd.ExecuteContext(context.Background()))
	require.Equal(t, "version: 20261129000006\n", out.String())
	conn, err := pgx.Connect(context.Background(), target)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	var tables int
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_tables WHERE tablename = 'uploaded_file'").Scan(&tables))
	require.Equal(t, 1, tables, "the configured database was migrated")
}

// TestServeChecksTheSchema: outside --dev, serve refuses to start against
// a database whose schema is not the binary's -- unmigrated, behind, ahead
// -- naming both versions and the fix; with --dev --no-migrate it starts and
// /readyz says why it is not ready.
func TestServeChecksTheSchema(t *testing.T) {
	t.Parallel()
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("localRoot: "+t.TempDir()+"\nauth:\n  hmacSecret: "+strings.Repeat("s", 40)+"\n"), 0o600))
	_, err := run(t, context.Background(), pgtest.NewEmptyDatabase(t), "serve", "--config", cfgFile, "--listen", "127.0.0.1:0")
	require.ErrorContains(t, err, "the database has no schema; this binary needs version 20261129000006: run uploadedfile migrate up")

	behind := pgtest.NewDatabase(t)
	conn, err := pgx.Connect(context.Background(), behind)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	_, err = conn.Exec(context.Background(), "UPDATE schema_migrations SET version = 20261125000000")
	require.NoError(t, err)
	_, err = run(t, context.Background(), behind, "serve", "--config", cfgFile, "--listen", "127.0.0.1:0")
	require.ErrorContains(t, err, "the database schema is at version 20261125000000, behind this binary's 20261129000006")
	_, err = conn.Exec(context.Background(), "UPDATE schema_migrations SET version = 20991231000000")
	require.NoError(t, err)
	_, err = run(t, context.Background(), behind, "serve", "--config", cfgFile, "--listen", "127.0.0.1:0")
	require.ErrorContains(t, err, "ahead of this binary's 20261129000006")

	// The next release's expand-only migration declares this binary
	// compatible: it starts, and is ready (a rolling upgrade keeps it).
	_, err = conn.Exec(context.Background(), "INSERT INTO uploaded_file_schema_compat (version, oldest_binary) VALUES (20991231000000, 20261129000006)")
	require.NoError(t, err)
	ahead := startDevOn(t, behind, "", "--no-migrate")
	resp, err := http.Get(ahead.base + "/readyz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.True(t, strings.HasPrefix(string(body), "ready\n"), string(body))

	d := startDevOn(t, pgtest.NewEmptyDatabase(t), "", "--no-migrate")
	resp, err = http.Get(d.base + "/readyz")
	require.NoError(t, err)
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	require.Contains(t, string(body), "schema not ready: the database has no schema")
}

// TestMigrateUpTwiceAtOnce: replicas that run migrate up at the same time
// never migrate at once (golang-migrate's advisory lock): each ends at the
// binary's version, none fails.
func TestMigrateUpTwiceAtOnce(t *testing.T) {
	t.Parallel()
	url := pgtest.NewEmptyDatabase(t)
	errs := make(chan error, 3)
	for range 3 {
		go func() {
			_, err := run(t, context.Background(), url, "migrate", "up")
			errs <- err
		}()
	}
	for range 3 {
		require.NoError(t, <-errs)
	}
	out, err := run(t, context.Background(), url, "migrate", "version")
	require.NoError(t, err)
	require.Equal(t, "version: 20261129000006\n", out)
}

// recordingRegisterer records the name of every metric registered through
// it, vectors included (they appear in /metrics only once they have a
// sample).
type recordingRegisterer struct {
	prometheus.Registerer
	mu    sync.Mutex
	names map[string]bool
}

func (r *recordingRegisterer) Register(c prometheus.Collector) error {
	ch := make(chan *prometheus.Desc, 16)
	go func() { c.Describe(ch); close(ch) }()
	for d := range ch {
		if m := regexp.MustCompile(`fqName: "([a-z_]+)"`).FindStringSubmatch(d.String()); m != nil {
			r.mu.Lock()
			r.names[m[1]] = true
			r.mu.Unlock()
		}
	}
	return r.Registerer.Register(c)
}

func (r *recordingRegisterer) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// TestMetricNamesAreDocumented: every uploadedfile_* metric that serve's
// components register is in the tables of docs/operations.md and
// docs/events.md, and every metric those tables name is registered.
func TestMetricNamesAreDocumented(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	rec := &recordingRegisterer{Registerer: prometheus.NewRegistry(), names: map[string]bool{}}
	pool := pgtest.New(t)
	svc, err := service.New(ctx, service.Config{Driver: service.DriverLocal, LocalRoot: t.TempDir()}, pool, service.WithMetrics(rec))
	require.NoError(t, err)
	guard, err := httpapi.NewGuard(ctx, httpapi.AuthConfig{HMACSecret: []byte(strings.Repeat("s", 32))})
	require.NoError(t, err)
	_ = httpapi.New(httpapi.Options{Service: svc, Guard: guard, Registerer: rec})
	_ = tracks.New(svc, pool, tracks.Options{Registerer: rec})
	_, err = eventrelay.New(pool, eventrelay.Config{Registerer: rec})
	require.NoError(t, err)
	var registered []string
	for n := range rec.names {
		registered = append(registered, n)
	}

	var documented []string
	row := regexp.MustCompile("(?m)^\\| `(uploadedfile_[a-z_]+)(?:\\{[a-z_]+\\})?`")
	for _, doc := range []string{"../../docs/operations.md", "../../docs/events.md"} {
		b, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, m := range row.FindAllStringSubmatch(string(b), -1) {
			documented = append(documented, m[1])
		}
	}
	require.ElementsMatch(t, registered, documented, "the metric tables of docs/operations.md and docs/events.md against what serve registers")
}

package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uploadedfile/uploadedfile/bench/floor"
	"github.com/uploadedfile/uploadedfile/db/migrations"
	"github.com/uploadedfile/uploadedfile/internal/imagevariant"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/procstat"
)

// proc is a server process the driver started.
type proc struct {
	name    string
	cmd     *exec.Cmd
	url     string
	metrics string // an uploadedfile's operator metrics listener (its /metrics)
	dsn     string // the database of an uploadedfile variant (startVariant)
}

func (p *proc) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
		}
	}
}

// peakRSS is the process's resident-set high-water mark in bytes.
func (p *proc) peakRSS() (int64, error) { return vmHWM(p.cmd.Process.Pid) }

// vmHWM is pid's own peak resident memory (procstat.VmHWM): a bench driver
// holding a gigabyte once reported a gigabyte for every child it ran, read
// through ru_maxrss.
func vmHWM(pid int) (int64, error) { return procstat.VmHWM(strconv.Itoa(pid)) }

// watchHWM samples pid's VmHWM every 10 ms until the returned function is
// called (after the process has exited: its /proc entry stops answering
// VmHWM as it exits, so the last sample stands for the peak -- VmHWM only
// grows, and a run ends within 10 ms of its last sample).
func watchHWM(pid int) func() int64 {
	var peak atomic.Int64
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			if v, err := vmHWM(pid); err == nil && v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() int64 {
		close(done)
		<-stopped
		return peak.Load()
	}
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// start runs name with args and waits until url answers. Its output is
// kept in serverLogs.
func start(name string, cmd *exec.Cmd, probe string) (*proc, error) {
	tail := serverLogs.add(name)
	cmd.Stdout, cmd.Stderr = tail, tail
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(probe); err == nil {
			resp.Body.Close()
			return &proc{name: name, cmd: cmd}, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = cmd.Process.Kill()
	return nil, fmt.Errorf("%s did not start", name)
}

// createDatabase makes a fresh, migrated database on the local server.
func createDatabase(ctx context.Context, server string) (string, func(), error) {
	name := "uploadedfile_bench_" + strings.ReplaceAll(uuid.NewString()[:8], "-", "")
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		return "", nil, err
	}
	defer func() { _ = admin.Close(ctx) }()
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	u, _ := url.Parse(server)
	u.Path = "/" + name
	dsn := u.String()
	drop := func() {
		c, err := pgx.Connect(context.Background(), server)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			_ = c.Close(context.Background())
		}
	}
	if err := migrations.Up(dsn); err != nil {
		drop()
		return "", nil, err
	}
	return dsn, drop, nil
}

// buildServer builds the uploadedfile binary, with the vips engine when the
// bench has it (go run -tags vips ./bench, as make bench runs it).
func buildServer(dir string) (string, error) {
	bin := filepath.Join(dir, "uploadedfile")
	args := []string{"build", "-o", bin}
	if _, ok := imagevariant.EngineNamed("vips"); ok {
		args = append(args, "-tags", "vips")
	}
	out, err := exec.Command("go", append(args, "./cmd/uploadedfile")...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build: %w: %s", err, out)
	}
	return bin, nil
}

// startUploadedfile runs `uploadedfile serve` with a config file.
func startUploadedfile(bin, dsn, config string) (*proc, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	metricsAddr, err := freePort()
	if err != nil {
		return nil, err
	}
	// Idle connections close after 10 s: the bench runs a dozen servers
	// against one PostgreSQL (max_connections 100), each section's idle
	// pools must not starve the next (it failed with SQLSTATE 53300).
	cmd := exec.Command(bin, "--database-url", pgtest.WithQuery(dsn, "pool_max_conn_idle_time=10s"), "serve", "--config", config, "--listen", addr, "--metrics-listen", metricsAddr, "--no-maintenance")
	p, err := start("uploadedfile", cmd, "http://"+addr+"/readyz")
	if err != nil {
		return nil, err
	}
	p.url, p.metrics = "http://"+addr, "http://"+metricsAddr+"/metrics"
	return p, nil
}

// startSelf runs this binary in one of its server modes.
func startSelf(mode string, args ...string) (*proc, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], append([]string{mode, "-listen", addr}, args...)...)
	p, err := start(mode, cmd, "http://"+addr+"/healthz")
	if err != nil {
		return nil, err
	}
	p.url = "http://" + addr
	return p, nil
}

// startTus runs the tus peer (Node, @tus/server with its file store).
func startTus(dir string) (*proc, error) {
	addr, err := freePort()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("node", "server.mjs", port, dir)
	cmd.Dir = filepath.Join("bench", "tus-peer")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = io.Discard
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("tus peer: %w", err)
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || !strings.Contains(line, "listening") {
		_ = cmd.Process.Kill()
		return nil, fmt.Errorf("tus peer did not start (run npm ci in bench/tus-peer): %q", line)
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	return &proc{name: "tus", cmd: cmd, url: "http://" + addr}, nil
}

// rawBaseline is the floor of a durable buffer upload: stream the
// multipart file part to a file, fsync it, one INSERT. No validation, no
// hashing, no hidden row -- what every upload must at least do. It also
// serves the floor of any HTTP lookup: one bare SELECT by key behind a
// minimal handler, no token; and the floor of a download that checks the
// database first: that SELECT, then the file from files (uploadedfile's
// localRoot) with http.ServeContent, as http.FileServer serves it; and the
// same-work floors of the detail lookup, of /download and of the list
// (bench/floor). Its
// pool has uploadedfile serve's size.
func rawBaseline(listen, dsn, dir, files string) error {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return err
	}
	cfg.MaxConns = 32
	cfg.MaxConnIdleTime = 10 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS raw_upload (id uuid PRIMARY KEY, name text, size bigint)"); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS spec_upload (id uuid PRIMARY KEY, name text NOT NULL, size bigint NOT NULL,
		checksum text, status text NOT NULL, created_at timestamptz NOT NULL DEFAULT now(), updated_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.HandleFunc("GET /lookup", floor.Lookup(pool))
	mux.HandleFunc("GET /detail/{id}", floor.SameWorkLookup(pool, []byte("the same-work floor's signing secret")))
	mux.HandleFunc("GET /download", floor.Download(pool, files))
	mux.HandleFunc("GET /detail/{id}/download", floor.SameWorkDownload(pool, files))
	mux.HandleFunc("GET /list", floor.SameWorkList(pool, []byte("the same-work floor's signing secret")))
	mux.HandleFunc("POST /upload", rawUploadHandler(pool, dir))
	mux.HandleFunc("POST /upload-lifecycle", lifecycleUploadHandler(pool, dir))
	return (&http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}).ListenAndServe()
}

// rawUploadHandler is the raw baseline: stream the part to a file, fsync,
// one INSERT.
func rawUploadHandler(pool *pgxpool.Pool, dir string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		part, ok := firstPart(w, r)
		if !ok {
			return
		}
		id := uuid.Must(uuid.NewV7())
		f, err := os.Create(filepath.Join(dir, id.String()))
		if err != nil {
			http.Error(w, "write", http.StatusInternalServerError)
			return
		}
		n, err := io.Copy(f, part)
		if err == nil {
			err = f.Sync()
		}
		_ = f.Close()
		if err == nil {
			_, err = pool.Exec(r.Context(), "INSERT INTO raw_upload (id, name, size) VALUES ($1, $2, $3)", id, part.FileName(), n)
		}
		if err != nil {
			http.Error(w, "store", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":%q}`, id)
	}
}

// lifecycleUploadHandler is the lifecycle floor: what the documented hidden-row
// lifecycle needs and no more -- commit a hidden row, stream the part to a
// file while hashing it (the row stores the SHA-256), fsync, commit the
// activation.
func lifecycleUploadHandler(pool *pgxpool.Pool, dir string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		part, ok := firstPart(w, r)
		if !ok {
			return
		}
		id := uuid.Must(uuid.NewV7())
		if _, err := pool.Exec(r.Context(), "INSERT INTO spec_upload (id, name, size, status) VALUES ($1, $2, 0, 'pending')", id, part.FileName()); err != nil {
			http.Error(w, "insert", http.StatusInternalServerError)
			return
		}
		f, err := os.Create(filepath.Join(dir, id.String()))
		if err != nil {
			http.Error(w, "write", http.StatusInternalServerError)
			return
		}
		h := sha256.New()
		n, err := io.Copy(io.MultiWriter(f, h), part)
		if err == nil {
			err = f.Sync()
		}
		_ = f.Close()
		if err == nil {
			_, err = pool.Exec(r.Context(), "UPDATE spec_upload SET status = 'ready', size = $2, checksum = $3, updated_at = now() WHERE id = $1 AND status = 'pending'",
				id, n, base64.StdEncoding.EncodeToString(h.Sum(nil)))
		}
		if err != nil {
			http.Error(w, "store", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"id":%q}`, id)
	}
}

// firstPart opens the first part of a multipart request; false: a 400 was
// sent.
func firstPart(w http.ResponseWriter, r *http.Request) (*multipart.Part, bool) {
	mr, err := r.MultipartReader()
	if err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return nil, false
	}
	part, err := mr.NextPart()
	if err != nil {
		http.Error(w, "no file", http.StatusBadRequest)
		return nil, false
	}
	return part, true
}

// withHeadersPrefix is where the file server process answers with a
// granted download's headers (floor.FileServerWithHeaders): the file of
// key k is at withHeadersPrefix + "/" + k.
const withHeadersPrefix = "/with-headers"

// fileServer serves dir with the standard library's file server, and
// under withHeadersPrefix with a granted download's headers.
func fileServer(listen, dir string) error {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.Handle("/", http.FileServer(http.Dir(dir)))
	mux.Handle(withHeadersPrefix+"/", http.StripPrefix(withHeadersPrefix, floor.FileServerWithHeaders(dir)))
	return (&http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}).ListenAndServe()
}

// multipartBody returns a multipart form with one file part.
func multipartBody(name string, content []byte) (string, []byte) {
	var buf strings.Builder
	w := multipart.NewWriter(&buf)
	part, _ := w.CreateFormFile("file", name)
	_, _ = part.Write(content)
	_ = w.Close()
	return w.FormDataContentType(), []byte(buf.String())
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// writeConfig writes a server's configuration to path: the bench's upload
// limit and token secret, then extra (YAML).
func writeConfig(path, secret, extra string) error {
	return os.WriteFile(path, []byte("maxFileSizeBytes: 26214400\nauth:\n  hmacSecret: "+secret+"\n"+extra), 0o600)
}

// startVariant runs another local `uploadedfile serve` on a database and a
// file root of its own, its configuration the bench's plus extra (YAML) and
// its database URL's the parameters in query (pool_max_conns=…); stop ends
// it, drops its database and removes its files.
func startVariant(ctx context.Context, bin, tmp, name, secret, extra string, query ...string) (p *proc, stop func(), err error) {
	dsn, drop, err := createDatabase(ctx, pgtest.ServerURL())
	if err != nil {
		return nil, nil, err
	}
	for _, q := range query {
		dsn = pgtest.WithQuery(dsn, q)
	}
	cfg := filepath.Join(tmp, name+".yaml")
	files := filepath.Join(tmp, "files-"+name)
	if err := writeConfig(cfg, secret, "localRoot: "+files+"\n"+extra); err != nil {
		drop()
		return nil, nil, err
	}
	if p, err = startUploadedfile(bin, dsn, cfg); err != nil {
		drop()
		return nil, nil, err
	}
	p.dsn = dsn
	// The variant's files go with it: a quick run's variants write about
	// 36 GB in all, more than such a machine's disk may have free.
	return p, func() { p.stop(); drop(); _ = os.RemoveAll(files) }, nil
}

// discardingServer answers every request on loopback after reading its
// body, with status and contentType (a webhook receiver, an OTLP sink).
func discardingServer(path string, status int, contentType string) (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		}
		w.WriteHeader(status)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + path, func() { _ = srv.Close() }, nil
}

// Command bench measures uploadedfile against peers run side by side on
// loopback, and prints every figure as a ratio with its target:
//
//	go run ./bench            the quick set (make bench)
//	go run ./bench -full      the whole matrix (make bench-full)
//	go run ./bench -write docs/performance.md
//
// Peers: a raw baseline (stream the multipart file to disk, fsync, one
// INSERT), the tus project's server (@tus/server + @tus/file-store), and the
// standard library's http.FileServer over the same files. Absolute times on
// a shared machine are noise; the ratios are the result.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "raw-baseline" || os.Args[1] == "file-server" || os.Args[1] == "tusd-peer") {
		fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
		listen := fs.String("listen", "127.0.0.1:0", "")
		dsn := fs.String("db", "", "")
		dir := fs.String("dir", "", "")
		files := fs.String("files", "", "")
		_ = fs.Parse(os.Args[2:])
		var err error
		switch os.Args[1] {
		case "raw-baseline":
			err = rawBaseline(*listen, *dsn, *dir, *files)
		case "tusd-peer":
			err = tusdPeer(*listen, *dir, *dsn)
		default:
			err = fileServer(*listen, *dir)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	full := flag.Bool("full", false, "run the whole matrix (sizes 64 KiB, 1 MiB, 10 MiB; 1, 8, 32 clients; 1M-row sweep)")
	write := flag.String("write", "", "also write the report to this Markdown file")
	flag.StringVar(&only, "only", "", "run only these sections (comma-separated): uploads (with the downloads), downloads, lookup, s3-complete, rss, sweeps, sweepday, reconcile, events, list, quota, idempotency, writepath, scan, rescan, tracing, variants or tus (no -write)")
	scale := flag.Int("scale", 0, "run only make bench-scale: the scale table at 100k rows and at this many, compared (no peers)")
	flag.Parse()
	if *scale > 0 {
		if err := benchScale(context.Background(), *scale, *write); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if only != "" && *write != "" {
		fmt.Fprintln(os.Stderr, "bench: -only measures part of the set; it does not -write the report")
		os.Exit(2)
	}
	if err := run(*full, *write); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// row is one line of the report.
type row struct {
	what, figure, target string
	pass                 bool
}

type report struct {
	mu   sync.Mutex
	rows []row
	// preamble replaces the set's own first paragraph (how its ratios
	// are judged) in the Markdown report.
	preamble string
}

func (r *report) add(what, figure, target string, pass bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rows = append(r.rows, row{what, figure, target, pass})
	status := "pass"
	if target == "" {
		status = ""
	} else if !pass {
		status = "SHORT"
	}
	fmt.Printf("%-70s %-60s %-10s %s\n", what, figure, target, status)
}

func (r *report) markdown(cmd string) string {
	var b strings.Builder
	commit, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	judged := fmt.Sprintf("Throughput ratios are the median of %d interleaved rounds' ratios (%d, each twice as long, for the no-difference pairs: quotas, events, the stored variant), the worst round beside it; a status is judged on the median.", rounds, pairRounds)
	if r.preamble != "" {
		judged = r.preamble
	}
	fmt.Fprintf(&b, "Produced by `%s` on %s at commit %s. %s\n\n| measurement | figure | target | status |\n|---|---|---|---|\n", cmd, time.Now().UTC().Format("2006-01-02 15:04 MST"), strings.TrimSpace(string(commit)), judged)
	for _, x := range r.rows {
		status := ""
		if x.target != "" {
			status = "pass"
			if !x.pass {
				status = "**short**"
			}
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", x.what, x.figure, x.target, status)
	}
	return b.String()
}

// env is everything the measurements run against.
type env struct {
	uf, ufS3, raw, tus, files *proc
	tusd                      *proc       // tusd v2 with its file store (the Go tus peer)
	tusdFloor                 *proc       // the same, each chunk synced and a row committed (the resumable upload's same-work floor)
	ufJWKS                    *proc       // the local server verifying tokens from a JWKS
	jwks                      *jwksSigner // its key set and tokens
	token                     string
	tenantTokens              []string // one tenant each, for the spread-tenant upload row
	dsn, dsnS3                string
	s3Config                  string // the S3 server's configuration file (for maintenance commands)
	localRoot                 string
	pool                      *pgxpool.Pool
}

// only names the sections to run (-only, comma-separated); empty runs
// them all.
var only string

func wants(section string) bool {
	return only == "" || slices.Contains(strings.Split(only, ","), section)
}

func run(full bool, write string) error {
	ctx := context.Background()
	tmp, err := os.MkdirTemp("", "uploadedfile-bench-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	bin, err := buildServer(tmp)
	if err != nil {
		return err
	}
	e, gw, secret, cleanup, err := startEnv(ctx, tmp, bin)
	defer cleanup()
	if err != nil {
		return err
	}
	rep := &report{}
	fmt.Printf("%-70s %-60s %-10s %s\n", "measurement", "figure", "target", "status")
	if err := benchRequestRows(e, rep, full); err != nil {
		return err
	}
	lookupClients := []int{1, 8}
	if full {
		lookupClients = []int{1, 8, 32}
	}
	sections := []struct {
		name string
		run  func() error
	}{
		{"lookup", func() error { return benchLookup(ctx, e, rep, lookupClients) }},
		{"s3-complete", func() error { return benchS3Complete(ctx, e, rep, bin, gw) }},
		{"rss", func() error { return benchRSS(e, rep) }},
		{"sweeps", func() error { return benchSweeps(ctx, rep, full) }},
		{"sweepday", func() error { return benchSweepDay(ctx, rep, gw, full) }},
		{"reconcile", func() error { return benchReconcile(ctx, rep, bin, gw, full) }},
		{"events", func() error { return benchEvents(ctx, e, rep, bin, tmp, secret) }},
		{"list", func() error { return benchList(ctx, e, rep, bin, tmp, secret) }},
		{"quota", func() error { return benchQuota(ctx, e, rep, bin, tmp, secret) }},
		{"tenantlock", func() error { return benchTenantLock(ctx, e, rep, bin, tmp, secret) }},
		{"idempotency", func() error { return benchIdempotency(ctx, e, rep, bin, tmp, secret) }},
		{"writepath", func() error { return benchWritePath(ctx, rep) }},
		{"scan", func() error { return benchScan(ctx, e, rep, bin, tmp, secret) }},
		{"rescan", func() error { return benchRescan(ctx, rep, bin, tmp, full) }},
		{"tracing", func() error { return benchTracing(ctx, e, rep, bin, tmp, secret) }},
		{"variants", func() error { return benchVariants(ctx, e, rep, bin, tmp, secret) }},
		{"tus", func() error { return benchTus(e, rep) }},
	}
	for _, sec := range sections {
		if !wants(sec.name) {
			continue
		}
		if err := sec.run(); err != nil {
			return fmt.Errorf("%s: %w%s", sec.name, err, serverLogs.report(5))
		}
	}
	if write != "" {
		cmd := "make bench"
		if full {
			cmd = "make bench-full"
		}
		return writeWithHistory(write, rep.markdown(cmd), rep.rows)
	}
	return nil
}

// startEnv starts what every section measures against: the two
// databases, uploadedfile on the local driver, on S3 (versitygw) and with
// JWKS tokens, the raw baseline, tus and http.FileServer. cleanup stops
// them all, in reverse order, whatever failed.
func startEnv(ctx context.Context, tmp, bin string) (e *env, gw *s3test.Server, secret string, cleanup func(), err error) {
	var cleanups []func()
	cleanup = func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	e = &env{localRoot: filepath.Join(tmp, "files")}
	var drop func()
	if e.dsn, drop, err = createDatabase(ctx, pgtest.ServerURL()); err != nil {
		return e, gw, secret, cleanup, err
	}
	cleanups = append(cleanups, drop)
	if e.dsnS3, drop, err = createDatabase(ctx, pgtest.ServerURL()); err != nil {
		return e, gw, secret, cleanup, err
	}
	cleanups = append(cleanups, drop)
	if e.pool, err = pgxpool.New(ctx, e.dsn); err != nil {
		return e, gw, secret, cleanup, err
	}
	cleanups = append(cleanups, e.pool.Close)

	secret = randomHex(32)
	if e.token, e.tenantTokens, err = benchTokens(secret); err != nil {
		return e, gw, secret, cleanup, err
	}
	config := func(name, extra string) (string, error) {
		p := filepath.Join(tmp, name)
		return p, writeConfig(p, secret, extra)
	}
	localCfg, err := config("local.yaml", "localRoot: "+e.localRoot+"\n")
	if err != nil {
		return e, gw, secret, cleanup, err
	}
	if e.uf, err = startUploadedfile(bin, e.dsn, localCfg); err != nil {
		return e, gw, secret, cleanup, err
	}
	cleanups = append(cleanups, e.uf.stop)

	gw, err = s3test.Start()
	if err != nil {
		return e, gw, secret, cleanup, err
	}
	cleanups = append(cleanups, gw.Stop)
	bucket := "bench"
	if _, err := gw.Client().CreateBucket(ctx, &s3CreateBucket{Bucket: &bucket}); err != nil {
		return e, gw, secret, cleanup, err
	}
	s3Cfg, err := config("s3.yaml", fmt.Sprintf("driver: s3\nbucket: %s\nendpoint: %s\nregion: us-east-1\nforcePathStyle: true\naccessId: %s\naccessKey: %s\n",
		bucket, gw.Endpoint, gw.AccessKey, gw.SecretKey))
	if err != nil {
		return e, gw, secret, cleanup, err
	}
	e.s3Config = s3Cfg
	if e.ufS3, err = startUploadedfile(bin, e.dsnS3, s3Cfg); err != nil {
		return e, gw, secret, cleanup, err
	}
	cleanups = append(cleanups, e.ufS3.stop)

	// The same local server, its tokens verified with a JWKS served on
	// loopback (RS256 and ES256), as production deployments do.
	if e.jwks, err = newJWKSSigner(); err != nil {
		return e, gw, secret, cleanup, err
	}
	cleanups = append(cleanups, e.jwks.stop)
	jwksCfgPath := filepath.Join(tmp, "jwks.yaml")
	if err := os.WriteFile(jwksCfgPath, []byte("maxFileSizeBytes: 26214400\nlocalRoot: "+e.localRoot+"\nauth:\n  jwksUrl: "+e.jwks.url()+"\n"), 0o600); err != nil {
		return e, gw, secret, cleanup, err
	}
	if e.ufJWKS, err = startUploadedfile(bin, e.dsn, jwksCfgPath); err != nil {
		return e, gw, secret, cleanup, err
	}
	cleanups = append(cleanups, e.ufJWKS.stop)

	if err = startPeers(e, tmp, &cleanups); err != nil {
		return e, gw, secret, cleanup, err
	}
	return e, gw, secret, cleanup, nil
}

// benchTokens signs the bench's tokens with secret: one for tenant
// "bench", and one for each of 32 tenants.
func benchTokens(secret string) (string, []string, error) {
	sign := func(tenant string) (string, error) {
		return jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "bench", "tenant": tenant, "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	}
	token, err := sign("bench")
	if err != nil {
		return "", nil, err
	}
	var tenants []string
	for i := range 32 {
		t, err := sign(fmt.Sprintf("bench-%d", i))
		if err != nil {
			return "", nil, err
		}
		tenants = append(tenants, t)
	}
	return token, tenants, nil
}

// startPeers starts the raw baseline, tus and http.FileServer, adding
// their stops to cleanups.
func startPeers(e *env, tmp string, cleanups *[]func()) error {
	var err error
	rawDir := filepath.Join(tmp, "raw")
	_ = os.MkdirAll(rawDir, 0o750)
	if e.raw, err = startSelf("raw-baseline", "-db", e.dsn, "-dir", rawDir, "-files", e.localRoot); err != nil {
		return err
	}
	*cleanups = append(*cleanups, e.raw.stop)
	tusDir := filepath.Join(tmp, "tus")
	_ = os.MkdirAll(tusDir, 0o750)
	if e.tus, err = startTus(tusDir); err != nil {
		return err
	}
	*cleanups = append(*cleanups, e.tus.stop)
	tusdDir := filepath.Join(tmp, "tusd")
	_ = os.MkdirAll(tusdDir, 0o750)
	if e.tusd, err = startSelf("tusd-peer", "-dir", tusdDir); err != nil {
		return err
	}
	*cleanups = append(*cleanups, e.tusd.stop)
	floorDir := filepath.Join(tmp, "tusd-floor")
	_ = os.MkdirAll(floorDir, 0o750)
	if e.tusdFloor, err = startSelf("tusd-peer", "-dir", floorDir, "-db", e.dsn); err != nil {
		return err
	}
	*cleanups = append(*cleanups, e.tusdFloor.stop)
	if e.files, err = startSelf("file-server", "-dir", e.localRoot); err != nil {
		return err
	}
	*cleanups = append(*cleanups, e.files.stop)

	return nil
}

// benchRequestRows runs the upload and download rows: the quick set's
// targets (32 clients; buffer uploads at 64 KiB and 1 MiB, downloads at
// 64 KiB, 1 MiB and 10 MiB, direct uploads at 8 clients), or every size
// and client count with full.
func benchRequestRows(e *env, rep *report, full bool) error {
	sizes, clients := []int{64 << 10, 1 << 20, 10 << 20}, []int{32}
	if full {
		clients = []int{1, 8, 32}
	}
	for _, size := range sizes {
		for _, c := range clients {
			if !wants("uploads") && !wants("downloads") {
				break
			}
			// The quick set has direct uploads at 8 clients only (below),
			// and no 10 MiB uploads.
			if wants("uploads") && (full || size < 10<<20) {
				if err := benchUploads(e, rep, size, c, true, full); err != nil {
					return err
				}
			}
			if err := benchDownload(e, rep, size, c); err != nil {
				return err
			}
		}
	}
	if !full && wants("uploads") {
		if err := benchUploads(e, rep, 1<<20, 8, false, true); err != nil {
			return err
		}
	}
	return nil
}

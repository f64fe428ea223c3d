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
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
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
	flag.StringVar(&only, "only", "", "run only these sections (comma-separated): uploads (with the downloads), downloads, lookup, s3-complete, rss, sweeps, sweepday, reconcile, events, list, quota, idempotency, writepath, scan, tracing, variants or tus (no -write)")
	flag.Parse()
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
	fmt.Fprintf(&b, "Produced by `%s` on %s at commit %s. Throughput ratios are the median of %d interleaved rounds' ratios (%d, each twice as long, for the no-difference pairs: quotas, events, the stored variant), the worst round beside it; a status is judged on the median.\n\n| measurement | figure | target | status |\n|---|---|---|---|\n", cmd, time.Now().UTC().Format("2006-01-02 15:04 MST"), strings.TrimSpace(string(commit)), rounds, pairRounds)
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
		{"list", func() error { return benchList(ctx, e, rep, secret) }},
		{"quota", func() error { return benchQuota(ctx, e, rep, bin, tmp, secret) }},
		{"tenantlock", func() error { return benchTenantLock(ctx, e, rep, bin, tmp, secret) }},
		{"idempotency", func() error { return benchIdempotency(ctx, e, rep, bin, tmp, secret) }},
		{"writepath", func() error { return benchWritePath(ctx, rep) }},
		{"scan", func() error { return benchScan(ctx, e, rep, bin, tmp, secret) }},
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
		return writeReport(write, rep.markdown(cmd))
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
		return p, os.WriteFile(p, []byte("maxFileSizeBytes: 26214400\nauth:\n  hmacSecret: "+secret+"\n"+extra), 0o600)
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

// stats is a load run's outcome.
type stats struct {
	n        int
	errors   int64
	firstErr error // the first failed call's error, for the report's message
	elapsed  time.Duration
	p50, p99 time.Duration
	dbCPU    time.Duration // PostgreSQL's CPU per call, where a load measures it
	// The server process's scheduler accounting per call, where a load
	// measures it (withSched).
	server perCall
}

func (s stats) rps() float64 { return float64(s.n) / s.elapsed.Seconds() }

// rounds is how many times each throughput figure is measured, the loads
// of one comparison interleaved; the median round is reported (this
// machine is shared and noisy) and, for the compared pairs, the worst
// round's ratio beside the median one.
const rounds = 5

// pairRounds is how many rounds a no-difference pair runs: two servers
// started alike, one with a feature on, judged against a line (0.9×,
// 0.95×) that sits within one short round's noise on a 2-core host. Those
// pairs run more rounds, each of twice the calls (pairCalls), so that the
// median moves with the feature's cost rather than with the machine.
const pairRounds = 9

// pairCalls is the call count of one round of a no-difference pair.
func pairCalls(size int) int { return 2 * count(size) }

// compareRounds runs the loads of one comparison in n interleaved rounds
// and returns every round: out[round][load]. Each round starts one load
// later than the one before, so no load always follows the same other one
// (a load after a disk-heavy or a CPU-heavy one inherits its aftermath).
func compareRounds(n int, loads ...func() stats) [][]stats {
	out := make([][]stats, n)
	for i := range n {
		out[i] = make([]stats, len(loads))
		for k := range loads {
			j := (i + k) % len(loads)
			out[i][j] = loads[j]()
		}
	}
	return out
}

// medians is, for each load, its median round by throughput.
func medians(rs [][]stats) []stats {
	out := make([]stats, len(rs[0]))
	for j := range out {
		col := make([]stats, len(rs))
		for i := range rs {
			col[i] = rs[i][j]
		}
		sort.Slice(col, func(a, b int) bool { return col[a].rps() < col[b].rps() })
		out[j] = col[len(col)/2]
	}
	return out
}

// ratioDist is a throughput ratio over rounds: each round's ours/peer.
type ratioDist struct {
	median, worst float64
	n             int
}

// ratioOf is load a's throughput over load b's, round by round.
func ratioOf(rs [][]stats, a, b int) ratioDist {
	rat := make([]float64, len(rs))
	for i, r := range rs {
		rat[i] = r[a].rps() / r[b].rps()
	}
	sort.Float64s(rat)
	return ratioDist{median: rat[len(rat)/2], worst: rat[0], n: len(rat)}
}

// p50RatioOf is load a's p50 latency over load b's, round by round; lower
// is better, so the worst round is the highest ratio.
func p50RatioOf(rs [][]stats, a, b int) ratioDist {
	rat := make([]float64, len(rs))
	for i, r := range rs {
		rat[i] = float64(r[a].p50) / float64(r[b].p50)
	}
	sort.Float64s(rat)
	return ratioDist{median: rat[len(rat)/2], worst: rat[len(rat)-1], n: len(rat)}
}

// String reads "0.97× (worst 0.91× of 5)".
func (d ratioDist) String() string {
	return fmt.Sprintf("%.2f× (worst %.2f× of %d)", d.median, d.worst, d.n)
}

// failed describes the failed calls of loads: how many and the first.
func failed(ss ...stats) error {
	var n int64
	var first error
	for _, s := range ss {
		n += s.errors
		if first == nil {
			first = s.firstErr
		}
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("%d failed calls, the first: %w", n, first)
}

// measure runs the loads of one comparison in interleaved rounds
// (compareRounds) and returns every round and each load's median round
// (medians); a failed call in any round of any load fails it, named what.
func measure(what string, loads ...func() stats) (rs [][]stats, m []stats, err error) {
	return measureRounds(what, rounds, loads...)
}

// measureRounds is measure in n rounds (pairRounds for the no-difference
// pairs).
func measureRounds(what string, n int, loads ...func() stats) (rs [][]stats, m []stats, err error) {
	rs = compareRounds(n, loads...)
	var all []stats
	for _, r := range rs {
		all = append(all, r...)
	}
	if err := failed(all...); err != nil {
		return nil, nil, fmt.Errorf("%s: %w", what, err)
	}
	return rs, medians(rs), nil
}

// load runs total calls of fn over clients workers and measures them, on
// connections of its own: the ones an earlier load left idle are closed
// first, so no load inherits a connection another shaped (see
// docs/performance-notes.md, "Each load on fresh connections").
func load(clients, total int, fn func(i int) error) stats {
	client.CloseIdleConnections()
	lat := make([]time.Duration, total)
	var next, errs atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= total {
					return
				}
				t := time.Now()
				if err := fn(i); err != nil {
					errs.Add(1)
					first.CompareAndSwap(nil, err)
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	wg.Wait()
	s := stats{n: total, errors: errs.Load(), elapsed: time.Since(start)}
	if err, ok := first.Load().(error); ok {
		s.firstErr = err
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	s.p50, s.p99 = lat[total/2], lat[min(total-1, total*99/100)]
	return s
}

// payload is size bytes of CSV-shaped text (valid for every check).
func payload(size int) []byte {
	line := []byte("id,name,amount,note\n")
	b := bytes.Repeat(line, size/len(line)+1)[:size]
	b[len(b)-1] = '\n'
	return b
}

func count(size int) int {
	switch {
	case size >= 10<<20:
		return 48
	case size >= 1<<20:
		return 320
	default:
		return 1000
	}
}

func human(size int) string {
	if size >= 1<<20 {
		return fmt.Sprintf("%d MiB", size>>20)
	}
	return fmt.Sprintf("%d KiB", size>>10)
}

// benchUploads measures the buffer upload (multipart route) and/or the
// direct upload (initiate + PUT + complete) against the raw baseline, the
// lifecycle floor and the tus server, all in the same interleaved rounds, so the
// peers are measured once per size and client count. Each ratio is the
// median of the rounds' ratios, with the worst round beside it.
func benchUploads(e *env, rep *report, size, clients int, buffer, direct bool) error {
	body := payload(size)
	ct, form := multipartBody("data.csv", body)
	in := initiateInput(body)
	type kind struct {
		label  string
		upload func(i int) error
		gated  bool // the targets: the buffer upload at 32 clients, 1 MiB and 64 KiB
		spread bool // the one-tenant buffer upload's load over 32 tenants (kinds[0] is that upload)
	}
	var kinds []kind
	gated := clients == 32 && (size == 1<<20 || size == 64<<10)
	if buffer {
		kinds = append(kinds, kind{label: "buffer upload", upload: func(int) error { return e.bufferUpload(ct, form) }, gated: gated})
	}
	if buffer && gated {
		// The same load spread over 32 tenants: every upload of a tenant
		// queues on the tenant's usage row (held until its commit), so
		// the difference to the row above is what that row costs.
		kinds = append(kinds, kind{label: "buffer upload, 32 tenants", upload: func(i int) error {
			return e.bufferUploadAs(e.tenantTokens[i%len(e.tenantTokens)], ct, form)
		}, spread: true})
	}
	if direct {
		kinds = append(kinds, kind{label: "direct upload (initiate+PUT+complete)", upload: func(int) error { return e.directUpload(in, body) }})
	}
	n := count(size)
	loads := []func() stats{
		func() stats { return load(clients, n, func(int) error { return e.rawUpload(ct, form, "/upload") }) },
		withSched(e.raw, func() stats {
			return load(clients, n, func(int) error { return e.rawUpload(ct, form, "/upload-lifecycle") })
		}),
		func() stats { return load(clients, n, func(int) error { return e.tusUpload(body) }) },
	}
	for _, k := range kinds {
		loads = append(loads, withSched(e.uf, func() stats { return load(clients, n, k.upload) }))
	}
	rs, m, err := measure("uploads", loads...)
	if err != nil {
		return err
	}
	raw, spec, tus := m[0], m[1], m[2]
	const rawAt, specAt, tusAt = 0, 1, 2
	for i, k := range kinds {
		uf, at := m[3+i], 3+i
		label := fmt.Sprintf("%s %s, %s", k.label, human(size), clientsLabel(clients))
		vsSpec, vsRaw, vsTus := ratioOf(rs, at, specAt), ratioOf(rs, at, rawAt), ratioOf(rs, at, tusAt)
		if k.spread {
			rep.add(label+": vs lifecycle floor, and vs one tenant", fmt.Sprintf("%s (%.0f vs %.0f uploads/s); %s of one tenant's", vsSpec, uf.rps(), spec.rps(), ratioOf(rs, at, 3)), "", true)
			continue
		}
		specTarget, rawTarget := 0.95, 0.9
		if size == 64<<10 {
			specTarget, rawTarget = 0.9, 0
		}
		rep.add(label+": vs lifecycle floor (2 commits + fsync + SHA-256)", fmt.Sprintf("%s (%.0f vs %.0f uploads/s; p99 %s vs %s)", vsSpec, uf.rps(), spec.rps(), uf.p99.Round(time.Millisecond), spec.p99.Round(time.Millisecond)),
			targetIf(k.gated, fmt.Sprintf("≥ %.2g×", specTarget)), !k.gated || vsSpec.median >= specTarget)
		rep.add(label+": vs raw baseline (1 commit + fsync)", fmt.Sprintf("%s (%.0f vs %.0f uploads/s; lifecycle floor %.2f× raw)", vsRaw, uf.rps(), raw.rps(), spec.rps()/raw.rps()),
			targetIf(k.gated && rawTarget > 0, fmt.Sprintf("≥ %.2g×", rawTarget)), !k.gated || rawTarget == 0 || vsRaw.median >= rawTarget)
		rep.add(label+": vs tus", fmt.Sprintf("%s (%.0f vs %.0f uploads/s; p50 %s vs %s)", vsTus, uf.rps(), tus.rps(), uf.p50.Round(time.Millisecond), tus.p50.Round(time.Millisecond)), "", true)
		if k.gated {
			// Where a short ratio's time goes: the server, PostgreSQL and
			// the load generator share the machine's cores.
			rep.add(label+": the server's, PostgreSQL's and the load generator's accounting per upload vs the lifecycle floor's",
				schedVs(medianSched(rs, at), medianSched(rs, specAt)), "", true)
		}
	}
	return nil
}

// schedVs prints two loads' accounting per request side by side: ours
// first, then the floor's.
func schedVs(ours, base perCall) string {
	us := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	out := fmt.Sprintf("server on a CPU %s vs %s; runnable, waiting for one %s vs %s; %.1f vs %.1f switches in; PostgreSQL on a CPU %s vs %s; load generator on a CPU %s vs %s",
		us(ours.run), us(base.run), us(ours.wait), us(base.wait), ours.switches, base.switches, us(ours.db), us(base.db), us(ours.client), us(base.client))
	if ours.grouped > 0 {
		out += fmt.Sprintf("; %.1f statements per group-commit transaction", ours.grouped)
	}
	return out
}

func latencies(s stats) string {
	return fmt.Sprintf("p50 %s, p99 %s (%.0f req/s)", s.p50.Round(time.Microsecond), s.p99.Round(time.Microsecond), s.rps())
}

// scrape reads the storage counters of a server's operator /metrics; a
// scrape that finds no storage counter fails (the row would read 0).
func scrape(p *proc) (reads, writes, requests float64, err error) {
	text, err := metricsText(p)
	if err != nil {
		return 0, 0, 0, err
	}
	if !strings.Contains(text, "uploadedfile_storage_requests_total{") {
		return 0, 0, 0, fmt.Errorf("scrape %s: no storage counters", p.metrics)
	}
	return sumOf(text, `uploadedfile_storage_bytes_total{direction="read"}`), sumOf(text, `uploadedfile_storage_bytes_total{direction="written"}`),
		sumOf(text, "uploadedfile_storage_requests_total{"), nil
}

// metricsText reads a server's operator /metrics (Prometheus text).
func metricsText(p *proc) (string, error) {
	resp, err := http.Get(p.metrics)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("scrape %s: %d", p.metrics, resp.StatusCode)
	}
	return string(b), err
}

// sumOf adds the values of the samples in text whose line starts with
// prefix (a metric name and the start of its labels).
func sumOf(text, prefix string) float64 {
	sum := 0.0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			var v float64
			_, _ = fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%g", &v)
			sum += v
		}
	}
	return sum
}

func benchS3Complete(ctx context.Context, e *env, rep *report, bin string, gw *s3test.Server) error {
	const n, size = 10, 4 << 20
	body := payload(size)
	in := initiateInput(body)
	ids := make([]string, n)
	held0, err := bucketBytes(ctx, gw, "bench")
	if err != nil {
		return err
	}
	for i := range ids {
		r, err := e.initiate(e.ufS3.url, in)
		if err != nil {
			return err
		}
		if err := sendTarget(r, body); err != nil {
			return err
		}
		ids[i] = r.ID
	}
	r0, w0, q0, err := scrape(e.ufS3)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := do(e.authed(http.MethodPost, e.ufS3.url+"/uploaded-file/"+id+"/complete", nil), http.StatusOK); err != nil {
			return err
		}
	}
	r1, w1, q1, err := scrape(e.ufS3)
	if err != nil {
		return err
	}
	readPer, writePer, reqPer := (r1-r0)/n, (w1-w0)/n, (q1-q0)/n
	rep.add(fmt.Sprintf("complete on S3 (%s CSV): content bytes streamed through the service", human(size)),
		fmt.Sprintf("%.0f B written; %.0f B read (bounded verification reads)", writePer, readPer), "0 B streamed", writePer == 0 && readPer <= 64<<10)
	rep.add("complete on S3: storage round trips per complete", fmt.Sprintf("%.1f", reqPer), "", true)
	return benchStagingHeld(ctx, e, rep, bin, gw, ids, held0, n*size)
}

func benchRSS(e *env, rep *report) error {
	body := payload(25 << 20)
	load(32, 32, func(int) error {
		_, err := e.upload(e.uf.url, body)
		return err
	})
	peak, err := e.uf.peakRSS()
	if err != nil {
		return err
	}
	rep.add("peak RSS of the server, 32 concurrent 25 MiB uploads", fmt.Sprintf("%.0f MiB", float64(peak)/(1<<20)), "≤ 128 MiB", peak <= 128<<20)
	return nil
}

// clientsLabel spells a client count: "1 client", "8 clients".
func clientsLabel(n int) string {
	if n == 1 {
		return "1 client"
	}
	return fmt.Sprintf("%d clients", n)
}

package tracks_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/adapter/tracks"
	"github.com/uploadedfile/uploadedfile/internal/clamd"
	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
	s3store "github.com/uploadedfile/uploadedfile/internal/storage/s3"
	"github.com/uploadedfile/uploadedfile/internal/testkit/clamdtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/invariant"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/internal/testkit/storagefault"
	"github.com/uploadedfile/uploadedfile/service"
)

// chaosDuration is how long the chaos test runs its workers; `make chaos`
// sets it (`-chaos.duration=2m`), `make test` keeps it brief.
var chaosDuration = flag.Duration("chaos.duration", 4*time.Second, "how long TestChaos runs its workers (per driver)")

// virtualSpeed: one real second is this much time for the services, so
// leases, expiries and backoffs all happen within a short run.
const virtualSpeed = 60

// virtualClock is the run's one clock: start at the real instant real0,
// then virtualSpeed times faster. Every process of a run is given the same
// real0, so a worker started late shares the parent's time instead of
// starting again at start.
func virtualClock(start, real0 time.Time) func() time.Time {
	return func() time.Time { return start.Add(time.Since(real0) * virtualSpeed) }
}

// virtualPresign makes the object store's clock run at virtual speed too: a
// presigned PUT's lifetime is divided by virtualSpeed, so it ends when the
// upload window the database recorded (in virtual time) ends, as it would
// on one clock in production. Without it a presigned URL would outlive its
// row's window sixty times over, which no deployment does.
type virtualPresign struct{ storage.Store }

func (v virtualPresign) PresignPut(ctx context.Context, key string, opts storage.PresignPutOptions) (storage.Presigned, error) {
	opts.Expires = max(time.Second, opts.Expires/virtualSpeed)
	return v.Store.PresignPut(ctx, key, opts)
}

// chaosStore opens the store a chaos process works on: the local root or
// the S3 bucket its parent named.
func chaosStore(ctx context.Context) (storage.Store, error) {
	if os.Getenv("UF_DRIVER") != service.DriverS3 {
		return local.New(local.Config{Root: os.Getenv("UF_ROOT")})
	}
	st, err := s3store.New(ctx, s3store.Config{
		Bucket: os.Getenv("UF_S3_BUCKET"), Region: os.Getenv("UF_S3_REGION"), Endpoint: os.Getenv("UF_S3_ENDPOINT"), ForcePathStyle: true,
		AccessID: os.Getenv("UF_S3_ACCESS_ID"), AccessKey: os.Getenv("UF_S3_ACCESS_KEY"),
	})
	if err != nil {
		return nil, err
	}
	return virtualPresign{st}, nil
}

func chaosConfig() service.Config {
	c := service.Config{LocalRoot: os.Getenv("UF_ROOT")}
	if os.Getenv("UF_DRIVER") == service.DriverS3 {
		c = service.Config{Driver: service.DriverS3, Bucket: os.Getenv("UF_S3_BUCKET")}
	}
	c.Variants = chaosVariants
	return c
}

// chaosVariants are the presets the workers ask for.
var chaosVariants = service.VariantsConfig{Presets: map[string]service.VariantPreset{
	"thumb": {Width: 24, Height: 24, Fit: "cover", Format: "webp"},
	"icon":  {Width: 8, Height: 8, Fit: "inside", Format: "jpeg"},
}}

// chaosImage is a small random PNG.
func chaosImage(rnd *rand.Rand) []byte {
	m := image.NewNRGBA(image.Rect(0, 0, 16+rnd.IntN(64), 16+rnd.IntN(64)))
	for i := range m.Pix {
		m.Pix[i] = uint8(rnd.IntN(256))
	}
	var b bytes.Buffer
	_ = png.Encode(&b, m)
	return b.Bytes()
}

// chaosWorker is one worker process: random buffer uploads, direct uploads
// (content written by several concurrent PUTs, written again after the
// complete and long after, through the local target or the presigned S3
// URL), completes, deletes and aborts, over a store that fails at random,
// until it is killed.
func chaosWorker() int {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, os.Getenv("UF_DB"))
	if err != nil {
		return 2
	}
	inner, err := chaosStore(ctx)
	if err != nil {
		return 2
	}
	store := storagefault.Wrap(inner)
	seed, _ := strconv.ParseUint(os.Getenv("UF_SEED"), 10, 64)
	rnd := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	start, _ := time.Parse(time.RFC3339Nano, os.Getenv("UF_START"))
	real0, _ := time.Parse(time.RFC3339Nano, os.Getenv("UF_REAL0"))
	cfg := chaosConfig()
	opts := []service.Option{service.WithStore(store), service.WithClock(virtualClock(start, real0)), service.WithLogger(quiet)}
	if addr := os.Getenv("UF_CLAMD"); addr != "" {
		client, err := clamd.New(addr, 5*time.Second)
		if err != nil {
			return 2
		}
		cfg.ScanMode = service.ScanGate
		opts = append(opts, service.WithScanner(func(ctx context.Context, r io.Reader) (service.ScanVerdict, error) {
			v, err := client.Scan(ctx, r)
			return service.ScanVerdict{Infected: v.Infected, Unscannable: v.Unscannable, Signature: v.Signature}, err
		}))
	}
	svc, err := service.New(ctx, cfg, pool, opts...)
	if err != nil {
		return 2
	}
	w := &worker{svc: svc, s3: os.Getenv("UF_DRIVER") == service.DriverS3, http: &http.Client{Timeout: 5 * time.Second}}
	ops := []storagefault.Op{storagefault.OpPut, storagefault.OpDelete, storagefault.OpStat, storagefault.OpOpen, storagefault.OpPromote}
	var ids []string
	for {
		if rnd.IntN(4) == 0 { // a storage failure on a random step of the next operations
			store.Reset()
			store.Inject(storagefault.Fault{Op: ops[rnd.IntN(len(ops))], Mode: storagefault.Mode(rnd.IntN(2)), Nth: 1 + rnd.IntN(2)})
		}
		uctx := service.WithRequestContext(ctx, service.RequestContext{Tenant: fmt.Sprintf("t%d", rnd.IntN(3)), UserID: "u"})
		body := []byte(fmt.Sprintf("row,%d\n%s\n", rnd.Int(), strings.Repeat("x", rnd.IntN(4000))))
		if rnd.IntN(5) == 0 {
			body = append(body, clamdtest.EICAR+"\n"...) // infected: must never become visible
		}
		switch rnd.IntN(9) {
		case 0, 1: // buffer uploads, up to six at once: their statements commit in shared batches
			bodies := [][]byte{body}
			for range rnd.IntN(6) {
				bodies = append(bodies, fmt.Appendf(nil, "row,%d\n%s\n", rnd.Int(), strings.Repeat("y", rnd.IntN(4000))))
			}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for i, b := range bodies {
				ctx := uctx
				if i > 0 && rnd.IntN(2) == 0 { // a keyed upload, and sometimes its retry at once
					b, ctx = keyedUpload(uctx, rnd.IntN(20))
				}
				wg.Go(func() {
					if r, err := svc.Upload(ctx, bytes.NewReader(b), "data.csv", nil); err == nil {
						mu.Lock()
						ids = append(ids, r.ID.String())
						mu.Unlock()
					}
				})
			}
			wg.Wait()
		case 7: // an image and its variants, requested concurrently
			if r, err := svc.Upload(uctx, bytes.NewReader(chaosImage(rnd)), "pic.png", nil); err == nil {
				ids = append(ids, r.ID.String())
				w.concurrently(2, func() { _, _ = svc.FindVariant(uctx, r.ID.String(), "thumb") },
					func() { _, _ = svc.FindVariant(uctx, r.ID.String(), "icon") })
			}
		case 2:
			_, _ = svc.UploadTemporary(uctx, bytes.NewReader(body), "tmp.csv", nil)
		case 8:
			if id := w.resumable(uctx, rnd, body); id != "" {
				ids = append(ids, id)
			}
		case 3, 4:
			if id := w.direct(uctx, rnd, body); id != "" {
				ids = append(ids, id)
			}
		case 5: // a client writing an old target again: after its complete, abort, expiry or cleanup
			w.rePut(rnd)
		default:
			if len(ids) > 0 {
				i := rnd.IntN(len(ids))
				_ = svc.DeleteByID(service.WithRequestContext(ctx, service.RequestContext{Tenant: "t0", UserID: "u"}), ids[i])
				for _, tenant := range []string{"t1", "t2"} {
					_ = svc.DeleteByID(service.WithRequestContext(ctx, service.RequestContext{Tenant: tenant, UserID: "u"}), ids[i])
				}
				ids = append(ids[:i], ids[i+1:]...)
			}
		}
	}
}

// keyedUpload is the upload under Idempotency-Key n of ctx's caller, from a
// pool every worker draws from: the same key is the same body (the same
// request), sent again by the worker that used it, a concurrent one, or a
// worker started after the one that used it was killed -- with the file it
// made ready, deleted, or left behind hidden.
func keyedUpload(ctx context.Context, n int) ([]byte, context.Context) {
	body := fmt.Appendf(nil, "row,key-%d\n%s\n", n, strings.Repeat("k", 100*n))
	return body, service.WithUploadKey(ctx, service.NewUploadKey(fmt.Sprintf("key-%d", n), nil))
}

// worker is a chaos worker's client side of the direct lifecycle.
type worker struct {
	svc  *service.Service
	s3   bool
	http *http.Client
	past []pastUpload
	turn atomic.Int64 // alternates the local target's two ways in
}

// pastUpload is an upload target a client still holds.
type pastUpload struct {
	ctx    context.Context
	init   *service.InitiateResult
	body   []byte
	target service.UploadTarget
}

// direct runs one direct upload: content written by one or two concurrent
// PUTs (or none), then an abort, nothing, or a complete racing another PUT,
// sometimes followed by a re-PUT. It returns the id of a completed file.
func (w *worker) direct(ctx context.Context, rnd *rand.Rand, body []byte) string {
	sum := sha256.Sum256(body)
	init, err := w.svc.InitiateUpload(ctx, service.InitiateInput{OriginalName: "d.csv", ContentType: "text/csv", SizeBytes: int64(len(body)),
		Checksum: "sha256:" + base64.StdEncoding.EncodeToString(sum[:])}, nil)
	if err != nil {
		return ""
	}
	p := pastUpload{ctx: ctx, init: init, body: body, target: init.Upload}
	w.past = append(w.past, p)
	if len(w.past) > 64 {
		w.past = w.past[1:]
	}
	if rnd.IntN(5) > 0 {
		w.concurrently(1+rnd.IntN(2), func() { w.put(p) })
	}
	id := ""
	switch rnd.IntN(4) {
	case 0:
		_ = w.svc.AbortUpload(ctx, init.ID.String())
	case 1: // left pending: the pending sweep's
	default:
		w.concurrently(2, func() {
			if r, err := w.svc.CompleteUpload(ctx, init.ID.String()); err == nil {
				id = r.ID.String()
			}
		}, func() { w.put(p) })
	}
	if rnd.IntN(3) == 0 {
		w.put(p) // written again after the complete (or abort)
	}
	return id
}

// resumable runs one resumable upload in chunks of random sizes: a chunk
// sometimes sent twice at once (a retry racing the first) or cut short;
// then finished, abandoned half way (the pending sweep's), or aborted
// while a chunk is written. It returns the id of a ready file.
func (w *worker) resumable(ctx context.Context, rnd *rand.Rand, body []byte) string {
	up, err := w.svc.CreateResumableUpload(ctx, service.ResumableInput{OriginalName: "r.csv", ContentType: "text/csv", SizeBytes: int64(len(body))}, nil)
	if err != nil {
		return ""
	}
	id := up.ID.String()
	stop, abort := len(body), false
	switch rnd.IntN(4) {
	case 0:
		stop = rnd.IntN(len(body))
	case 1:
		abort = true
	}
	for range 40 {
		st, err := w.svc.ResumableState(ctx, id)
		if err != nil {
			return ""
		}
		if st.File != nil {
			return id
		}
		off := int(st.Offset)
		if off >= stop {
			return ""
		}
		end := min(len(body), off+1+rnd.IntN(1500))
		cut := end - off
		if rnd.IntN(6) == 0 {
			cut = rnd.IntN(end - off) // the connection drops mid-chunk
		}
		send := func() {
			c := service.Chunk{Offset: int64(off), Length: int64(end - off), Body: io.LimitReader(bytes.NewReader(body[off:end]), int64(cut))}
			_, _ = w.svc.WriteChunk(ctx, id, c)
		}
		switch {
		case abort && rnd.IntN(3) == 0:
			w.concurrently(1, send, func() { _ = w.svc.AbortUpload(ctx, id) })
		case rnd.IntN(4) == 0:
			w.concurrently(2, send)
		default:
			send()
		}
	}
	return ""
}

// rePut writes one of the worker's old targets again.
func (w *worker) rePut(rnd *rand.Rand) {
	if len(w.past) > 0 {
		w.put(w.past[rnd.IntN(len(w.past))])
	}
}

// put writes the content as a client would: the local target through the
// service, the presigned URL with plain net/http and exactly its headers.
func (w *worker) put(p pastUpload) {
	if !w.s3 {
		w.putLocal(p)
		return
	}
	_, _ = sendToTarget(w.http, p.target, p.body)
}

// sendToTarget PUTs body to a presigned target with plain net/http and
// exactly its headers, as a browser would, and returns the status.
func sendToTarget(c *http.Client, target service.UploadTarget, body []byte) (int, error) {
	req, err := http.NewRequest(target.Method, target.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, v := range target.Headers {
		if k != "Content-Length" {
			req.Header.Set(k, v)
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// putLocal writes through the local target: its signed URL, exactly as a
// client without a token would (the service's WriteSignedContent behind the
// HTTP route), or, every other time, with the caller's own authentication.
func (w *worker) putLocal(p pastUpload) {
	u, err := url.Parse(p.target.URL)
	if err != nil || w.turn.Add(1)%2 == 0 {
		_, _ = w.svc.PutUploadContent(p.ctx, p.init.ID.String(), bytes.NewReader(p.body))
		return
	}
	_, _ = w.svc.WriteSignedContent(context.Background(), p.init.ID.String(), service.SignedContent{
		Query: u.Query(), ContentType: p.target.Headers["Content-Type"], ContentLength: int64(len(p.body)),
		Checksum: p.target.Headers[service.ChecksumHeader],
	}, bytes.NewReader(p.body))
}

// concurrently runs n copies of the first function with the others, all
// at once, and waits for them.
func (w *worker) concurrently(n int, first func(), others ...func()) {
	var wg sync.WaitGroup
	for range n {
		wg.Go(first)
	}
	for _, f := range others {
		wg.Go(f)
	}
	wg.Wait()
}

// TestChaos runs worker processes with random storage failures, kills them
// at random moments, runs the maintenance tracks alongside, then settles
// everything and checks the invariants over the database and the whole
// store (final and staging namespaces) -- on the local driver and on S3.
func TestChaos(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{service.DriverLocal, service.DriverS3} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			runChaos(t, driver)
		})
	}
}

func runChaos(t *testing.T, driver string) {
	e := setup(t)
	c := newChaosStore(t, e, driver)
	start, real0 := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC), time.Now()
	clock := virtualClock(start, real0)
	newService := func(clock func() time.Time) *service.Service {
		svc, err := service.New(context.Background(), c.cfg, e.pool, service.WithStore(c.store), service.WithClock(clock), service.WithLogger(quiet))
		require.NoError(t, err)
		return svc
	}
	runner := tracks.New(newService(clock), e.pool, tracks.Options{Logger: quiet})
	runner.SetClock(clock)
	repairer := newService(clock)
	repairs := 0

	// The workers upload through the scan gate, on the real clamd; a fifth
	// of their uploads carry the EICAR string.
	scanner := clamdtest.Start(t, 30)
	rnd := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	spawn := func() *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "UF_CHAOS_CHILD=1", "UF_DB="+e.url, "UF_SEED="+strconv.FormatUint(rnd.Uint64(), 10),
			"UF_START="+start.Format(time.RFC3339Nano), "UF_REAL0="+real0.Format(time.RFC3339Nano))
		cmd.Env = append(cmd.Env, c.env...)
		cmd.Env = append(cmd.Env, "UF_CLAMD="+scanner.Addr)
		require.NoError(t, cmd.Start())
		return cmd
	}
	workers := []*exec.Cmd{spawn(), spawn()}
	kills := 0
	// The work runs for the duration and then, on a machine slow enough
	// that it has not yet reached every path the checks below require to
	// have run (an infected upload refused, buffer uploads activated in one
	// transaction, a variant made for a visible file, a file made by a keyed
	// upload), on until it has, for up to seven times as long again (three
	// were once not enough on S3 under -race for two activations to meet).
	begin, d := time.Now(), *chaosDuration
	deadline, longest := begin.Add(d), begin.Add(8*d)
	for time.Now().Before(deadline) || time.Now().Before(longest) && !chaosCovered(t, e) {
		time.Sleep(time.Duration(50+rnd.IntN(300)) * time.Millisecond)
		// Past the duration the work only runs on to reach what it has not
		// yet: kills come four times less often, so that a slow path (a
		// variant made under -race on a loaded machine) can finish.
		killOdds := 3
		if time.Now().After(deadline) {
			killOdds = 12
		}
		if rnd.IntN(killOdds) == 0 { // kill a worker mid-operation and start another
			i := rnd.IntN(len(workers))
			_ = workers[i].Process.Signal(syscall.SIGKILL)
			_ = workers[i].Wait()
			kills++
			workers[i] = spawn()
		}
		track := tracks.TrackPending
		if rnd.IntN(2) == 0 {
			track = tracks.TrackTemporary
		}
		_, err := runner.Run(context.Background(), track)
		require.NoError(t, err)
		if rnd.IntN(4) == 0 {
			// A repair in the middle of the work, with no grace: only its
			// ownership re-check stands between it and live uploads.
			_, err := repairer.UnsafeSystemReconcile(context.Background(), service.ReconcileOptions{Repair: true}, nil)
			require.NoError(t, err)
			repairs++
		}
	}
	for _, w := range workers {
		_ = w.Process.Signal(syscall.SIGKILL)
		_ = w.Wait()
	}
	t.Logf("chaos[%s]: work ran %s (covered: %v)", driver, time.Since(begin).Round(time.Millisecond), chaosCovered(t, e))

	// Settle: far past every lease, expiry and window, until a round does
	// nothing but reschedule tombstones.
	later := func(d time.Duration) func() time.Time { return func() time.Time { return clock().Add(d) } }
	for round := 1; round <= 30; round++ {
		r := tracks.New(newService(later(time.Duration(round)*48*time.Hour)), e.pool, tracks.Options{Logger: quiet})
		r.SetClock(later(time.Duration(round) * 48 * time.Hour))
		p, err := r.Run(context.Background(), tracks.TrackPending)
		require.NoError(t, err)
		tmp, err := r.Run(context.Background(), tracks.TrackTemporary)
		require.NoError(t, err)
		if p.Examined+tmp.Examined == 0 || (round > 3 && p.Done == p.Examined && tmp.Examined == 0 && onlyTombstones(t, e.pool)) {
			break
		}
	}
	counts := checkChaosInvariants(t, e, c)
	t.Logf("chaos[%s]: %d reconcile repairs ran during the work", driver, repairs)
	t.Logf("chaos[%s]: %s of work, %d worker kills; checked %s", driver, *chaosDuration, kills, counts.Summary())
	require.Positive(t, counts.Rows, "the workers did work")

	// A reconcile of the settled store, with no grace, finds nothing.
	rec, err := newService(later(100*48*time.Hour)).UnsafeSystemReconcile(context.Background(), service.ReconcileOptions{}, func(f service.Finding) error {
		t.Errorf("reconcile after settling: %+v", f)
		return nil
	})
	require.NoError(t, err)
	require.EqualValues(t, counts.Objects, rec.Objects)
	t.Logf("chaos[%s]: reconcile after settling: %d objects, %d references, 0 findings", driver, rec.Objects, rec.References)
}

// chaosTarget is the store one chaos run works on, as the parent sees it
// and as it tells its children.
type chaosTarget struct {
	cfg   service.Config
	store storage.Store
	env   []string
	list  func() []string // every key in the store
}

func newChaosStore(t *testing.T, e *env, driver string) chaosTarget {
	t.Helper()
	if driver != service.DriverS3 {
		return chaosTarget{
			cfg: service.Config{LocalRoot: e.root, Variants: chaosVariants}, store: e.inner, env: []string{"UF_DRIVER=local", "UF_ROOT=" + e.root},
			list: func() []string { return localKeys(t, e.root) },
		}
	}
	srv := s3test.Shared(t)
	cfg := srv.NewBucket(t)
	st, err := s3store.New(context.Background(), cfg)
	require.NoError(t, err)
	return chaosTarget{
		cfg: service.Config{Driver: service.DriverS3, Bucket: cfg.Bucket, Variants: chaosVariants}, store: st,
		env: []string{"UF_DRIVER=s3", "UF_S3_BUCKET=" + cfg.Bucket, "UF_S3_REGION=" + cfg.Region, "UF_S3_ENDPOINT=" + cfg.Endpoint,
			"UF_S3_ACCESS_ID=" + cfg.AccessID, "UF_S3_ACCESS_KEY=" + cfg.AccessKey},
		list: func() []string { return bucketKeys(t, srv.Client(), cfg.Bucket) },
	}
}

// localKeys walks the whole root; a temporary write file left behind fails.
func localKeys(t *testing.T, root string) []string {
	t.Helper()
	var keys []string
	require.NoError(t, filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if strings.Contains(filepath.Base(rel), ".uploadedfile-tmp-") {
			return errors.New("a temporary write file was left behind: " + rel)
		}
		keys = append(keys, filepath.ToSlash(rel))
		return nil
	}))
	return keys
}

// bucketKeys lists the whole bucket, page by page.
func bucketKeys(t *testing.T, client *awss3.Client, bucket string) []string {
	t.Helper()
	var keys []string
	p := awss3.NewListObjectsV2Paginator(client, &awss3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(context.Background())
		require.NoError(t, err)
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	return keys
}

// onlyTombstones reports whether every unsettled row is an upload
// tombstone (rescheduled forever until an operator retires it).
func onlyTombstones(t *testing.T, pool *pgxpool.Pool) bool {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		`SELECT count(*) FROM uploaded_file WHERE (deletion_pending_at IS NOT NULL OR upload_pending_at IS NOT NULL) AND NOT (upload_pending_at IS NOT NULL AND upload_expires_at IS NULL)`).Scan(&n))
	return n == 0
}

// checkChaosInvariants: every invariant of a settled run holds
// (internal/testkit/invariant), and what the chaos workers exercised shows: no
// visible file holds an infected upload, the gate refused some, buffer
// uploads were activated together, variants were made.
func checkChaosInvariants(t *testing.T, e *env, c chaosTarget) *invariant.Report {
	t.Helper()
	ctx := context.Background()
	r, err := invariant.Check(ctx, e.pool, c.store, c.list())
	require.NoError(t, err)
	require.Empty(t, r.Violations, r.Summary())
	for id, key := range r.Visible {
		rc, err := c.store.Open(ctx, key, nil)
		require.NoError(t, err)
		content, err := io.ReadAll(rc)
		rc.Close()
		require.NoError(t, err)
		require.NotContains(t, string(content), clamdtest.EICAR, "file %s: an infected upload became visible", id)
	}
	var infected int
	require.NoError(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM uploaded_file_event WHERE type = 'upload.failed' AND rule = 'content.infected'").Scan(&infected))
	require.Positive(t, infected, "the gate refused infected uploads")
	t.Logf("scan gate: %d infected uploads refused, %d visible files read back clean", infected, len(r.Visible))
	var batched int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM (
		SELECT FROM uploaded_file_event WHERE type = 'file.ready' GROUP BY xmin::text HAVING count(*) > 1) AS together`).Scan(&batched))
	require.Positive(t, batched, "buffer uploads were activated in shared transactions")
	t.Logf("group commit: %d transactions activated more than one buffer upload", batched)
	// Variants made, counted by their events: a worker may delete a
	// variant's file between the work's end and the settle, which then
	// removes the variant with it (r.Variants counts those still there).
	var variantsMade int
	require.NoError(t, e.pool.QueryRow(ctx, "SELECT count(*) FROM uploaded_file_event WHERE type = 'file.variant-ready'").Scan(&variantsMade))
	require.Positive(t, variantsMade, "the workers made variants")
	t.Logf("variants: %d made, %d still stored after the settle", variantsMade, r.Variants)
	var resumable, assembled int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'ready' AND resumable_offset > 0)
		FROM uploaded_file WHERE resumable_offset IS NOT NULL`).Scan(&resumable, &assembled))
	require.Positive(t, assembled, "resumable uploads were assembled from chunks")
	t.Logf("resumable uploads: %d begun, %d assembled from more than one chunk into a file", resumable, assembled)
	return r
}

// chaosCovered reports whether the work so far reached what
// checkChaosInvariants requires to have run: the scan gate refused an
// infected upload, and a visible file has a ready variant.
func chaosCovered(t *testing.T, e *env) bool {
	t.Helper()
	var covered bool
	require.NoError(t, e.pool.QueryRow(context.Background(), `
SELECT EXISTS (SELECT FROM uploaded_file_event WHERE type = 'upload.failed' AND rule = 'content.infected')
   -- buffer uploads activated together, in one transaction (group commit)
   AND EXISTS (SELECT FROM uploaded_file_event WHERE type = 'file.ready' GROUP BY xmin::text HAVING count(*) > 1)
   -- a keyed buffer upload (its key on its row) made a file
   AND EXISTS (SELECT FROM uploaded_file WHERE idempotency_key IS NOT NULL AND status = 'ready')
   -- a resumable upload was assembled from more than one chunk into a file
   AND EXISTS (SELECT FROM uploaded_file f WHERE f.resumable_offset IS NOT NULL AND f.status = 'ready'
               AND f.resumable_offset > 0)
   AND EXISTS (SELECT FROM uploaded_file_variant v JOIN uploaded_file f ON f.id = v.file_id
               WHERE v.status = 'ready' AND f.status = 'ready' AND f.deleted_at IS NULL AND f.deletion_pending_at IS NULL)`).Scan(&covered))
	return covered
}

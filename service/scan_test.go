package service_test

import (
	"archive/zip"
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/clamd"
	"github.com/uploadedfile/uploadedfile/internal/testkit/clamdtest"
	"github.com/uploadedfile/uploadedfile/service"
)

// gated is setup with the scan gate on, scanning with the real clamd at d.
func gated(t *testing.T, driver string, d *clamdtest.Daemon, timeout time.Duration) *bundle {
	t.Helper()
	scanner := service.WithScanner(d.Scanner(timeout))
	return setupWith(t, driver, []service.Option{scanner}, func(cfg *service.Config) { cfg.ScanMode = service.ScanGate })
}

// infectedDOCX is a genuine Word package with the EICAR string inside it.
func infectedDOCX(t *testing.T) []byte {
	t.Helper()
	r, err := zip.NewReader(bytes.NewReader(realDOCX(t)), int64(len(realDOCX(t))))
	require.NoError(t, err)
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for _, f := range r.File {
		rc, err := f.Open()
		require.NoError(t, err)
		body, _ := io.ReadAll(rc)
		rc.Close()
		out, err := w.Create(f.Name)
		require.NoError(t, err)
		_, _ = out.Write(body)
	}
	out, err := w.Create("word/media/notes.txt")
	require.NoError(t, err)
	_, _ = out.Write([]byte(clamdtest.EICAR))
	require.NoError(t, w.Close())
	return buf.Bytes()
}

// TestScanGate: with the gate on, clean files become ready and infected
// ones never do -- on both upload styles and both drivers, infected
// inside a DOCX too: invalid-upload with rule content.infected, no byte
// left once the sweeps ran, an upload.failed event with the rule, the
// space given back.
func TestScanGate(t *testing.T) {
	t.Parallel()
	d := clamdtest.Start(t, 30)
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := gated(t, driver, d, 10*time.Second)

			clean, err := b.svc.Upload(alice, strings.NewReader("id,amount\n1,42\n"), "rows.csv", nil)
			require.NoError(t, err)
			require.Equal(t, service.StatusReady, clean.Status)

			_, err = b.svc.Upload(alice, strings.NewReader(clamdtest.EICAR), "notes.txt", nil)
			require.ErrorIs(t, err, service.ErrInvalidUpload)
			require.Equal(t, service.RuleContentInfected, service.Rule(err))

			docx := realDOCX(t)
			ok, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, docx), nil)
			require.NoError(t, err)
			b.write(alice, ok, docx)
			ready, err := b.svc.CompleteUpload(alice, ok.ID.String())
			require.NoError(t, err)
			require.Equal(t, service.StatusReady, ready.Status)

			bad := infectedDOCX(t)
			init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, bad), nil)
			require.NoError(t, err)
			b.write(alice, init, bad)
			_, err = b.svc.CompleteUpload(alice, init.ID.String())
			require.ErrorIs(t, err, service.ErrInvalidUpload)
			require.Equal(t, service.RuleContentInfected, service.Rule(err), "found inside the DOCX")
			_, err = b.svc.Find(alice, init.ID.String())
			requireNotFound(t, err, "never visible")
			es := b.events(init.ID)
			require.Equal(t, []string{"upload.failed"}, types(es))
			require.Equal(t, service.RuleContentInfected, *es[0].Rule)

			b.settle()
			b.checkInvariants()
			require.Len(t, b.objects(), 2, "only the two clean files are stored")
			_, files := b.usageOf("acme", "alice")
			require.EqualValues(t, 2, files, "the refused uploads hold nothing")
			var failed int
			require.NoError(t, b.db.Pool.QueryRow(context.Background(),
				"SELECT count(*) FROM uploaded_file_event WHERE type = 'upload.failed' AND rule = 'content.infected'").Scan(&failed))
			require.Equal(t, 2, failed, "each infected upload has its upload.failed event")
		})
	}
}

// TestScanGateRefusesWhatClamdCannotJudge: archives past clamd's limits
// (nested too deep, too many entries) and an encrypted one -- each with the
// test signature where clamd does not look -- are refused with rule
// content.unscannable (invalid-upload, not retryable) on both upload
// styles, never stored, their space given back.
func TestScanGateRefusesWhatClamdCannotJudge(t *testing.T) {
	t.Parallel()
	d := clamdtest.Start(t, 30)
	b := gated(t, service.DriverLocal, d, 10*time.Second)
	for name, archive := range map[string][]byte{"nested": clamdtest.NestedZip, "crowded": clamdtest.CrowdedZip, "encrypted": clamdtest.EncryptedZip} {
		_, err := b.svc.Upload(alice, bytes.NewReader(archive), name+".zip", nil)
		require.ErrorIs(t, err, service.ErrInvalidUpload, name)
		require.Equal(t, service.RuleContentUnscannable, service.Rule(err), name)
		require.False(t, service.Retryable(err), name)

		init, err := b.svc.InitiateUpload(alice, input(name+".zip", "application/zip", archive), nil)
		require.NoError(t, err)
		b.write(alice, init, archive)
		_, err = b.svc.CompleteUpload(alice, init.ID.String())
		require.ErrorIs(t, err, service.ErrInvalidUpload, name)
		require.Equal(t, service.RuleContentUnscannable, service.Rule(err), name)
		_, err = b.svc.Find(alice, init.ID.String())
		requireNotFound(t, err, "never visible")
	}
	b.settle()
	b.checkInvariants()
	require.Empty(t, b.objects(), "nothing was stored")
	_, files := b.usageOf("acme", "alice")
	require.Zero(t, files)
}

// TestScanGateFailsClosed: clamd slower than the timeout, and clamd killed
// mid-scan: the upload is refused with upload-failed (retryable), never
// ready without a scan; a direct upload stays pending and completes once
// clamd is back.
func TestScanGateFailsClosed(t *testing.T) {
	t.Parallel()
	d := clamdtest.Start(t, 30)
	b := gated(t, service.DriverLocal, d, time.Second)
	docx := realDOCX(t)
	init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, docx), nil)
	require.NoError(t, err)
	b.write(alice, init, docx)

	d.Pause() // slower than the timeout
	_, err = b.svc.CompleteUpload(alice, init.ID.String())
	require.ErrorIs(t, err, service.ErrUploadFailed)
	require.ErrorIs(t, err, service.ErrUnavailable, "the scanner did not answer: not the upload's fault")
	dep, _ := service.Unavailable(err)
	require.Equal(t, service.DependencyScanner, dep)
	require.Equal(t, "core.scanner.unavailable", err.Error())
	require.Equal(t, service.RuleScanUnavailable, service.Rule(err))
	require.True(t, service.Retryable(err))
	require.Equal(t, "pending", b.row(init.ID).Status, "still pending: it can be completed again")

	_, err = b.svc.Upload(alice, strings.NewReader("a,b\n1,2\n"), "rows.csv", nil)
	require.ErrorIs(t, err, service.ErrUploadFailed, "a buffer upload is refused too")

	// Killed while a scan waits on it.
	done := make(chan error, 1)
	go func() {
		_, err := b.svc.CompleteUpload(alice, init.ID.String())
		done <- err
	}()
	time.Sleep(200 * time.Millisecond)
	d.Kill()
	err = <-done
	require.ErrorIs(t, err, service.ErrUploadFailed)
	require.Equal(t, "pending", b.row(init.ID).Status)

	d.Restart()
	ready, err := b.svc.CompleteUpload(alice, init.ID.String())
	require.NoError(t, err, "completed once clamd is back")
	require.Equal(t, service.StatusReady, ready.Status)

	b.settle()
	b.checkInvariants()
	require.Len(t, b.objects(), 1, "the refused buffer upload left nothing")
	var rules []string
	rows, err := b.db.Pool.Query(context.Background(), "SELECT rule FROM uploaded_file_event WHERE type = 'upload.failed'")
	require.NoError(t, err)
	for rows.Next() {
		var r string
		require.NoError(t, rows.Scan(&r))
		rules = append(rules, r)
	}
	require.Equal(t, []string{service.RuleScanUnavailable}, rules, "the refused buffer upload's event says why; the direct one never failed")
}

// TestScanGateNeedsAScanner: the gate without a scanner refuses to start.
func TestScanGateNeedsAScanner(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	cfg := b.cfg
	cfg.ScanMode = service.ScanGate
	_, err := service.New(context.Background(), cfg, b.db)
	require.ErrorContains(t, err, "scan.mode")
	cfg.ScanMode = "audit"
	_, err = service.New(context.Background(), cfg, b.db)
	require.ErrorContains(t, err, "scan.mode")
}

// TestRescanAndQuarantine: files stored while the gate was off are scanned
// again; a detection is quarantined -- hidden from every read exactly as a
// missing file is, with a file.quarantined event -- until an operator
// unquarantines it.
func TestRescanAndQuarantine(t *testing.T) {
	t.Parallel()
	d := clamdtest.Start(t, 30)
	scanner := service.WithScanner(d.Scanner(10 * time.Second))
	b := setupWith(t, service.DriverLocal, []service.Option{scanner}) // gate off: stored unscanned
	clean := b.upload(alice)
	bad, err := b.svc.Upload(alice, strings.NewReader(clamdtest.EICAR), "notes.txt", nil)
	require.NoError(t, err, "the gate is off")
	other, err := b.svc.Upload(as("globex", "mallory"), strings.NewReader(clamdtest.EICAR), "notes.txt", nil)
	require.NoError(t, err)
	ctx := context.Background()

	var found []service.Detection
	rep, err := b.svc.UnsafeSystemRescan(ctx, service.RescanOptions{Tenant: "acme"}, func(d service.Detection) { found = append(found, d) })
	require.NoError(t, err)
	require.Equal(t, service.RescanReport{Scanned: 2, Detected: 1}, rep, "one tenant, reported only")
	require.Equal(t, []service.Detection{{ID: bad.ID, Tenant: "acme", Signature: clamdtest.Signature}}, found)
	_, err = b.svc.Find(alice, bad.ID.String())
	require.NoError(t, err, "without --quarantine nothing changes")

	rep, err = b.svc.UnsafeSystemRescan(ctx, service.RescanOptions{Quarantine: true}, func(service.Detection) {})
	require.NoError(t, err)
	require.Equal(t, service.RescanReport{Scanned: 3, Detected: 2, Quarantined: 2}, rep)

	_, err = b.svc.Find(alice, bad.ID.String())
	requireNotFound(t, err, "a quarantined file looks missing")
	_, err = b.svc.Download(alice, bad.ID.String())
	requireNotFound(t, err)
	requireNotFound(t, b.svc.MarkUsed(alice, []string{bad.ID.String()}, nil, nil))
	requireNotFound(t, b.svc.DeleteByID(alice, bad.ID.String()))
	page, err := b.svc.List(alice, service.ListOptions{})
	require.NoError(t, err)
	require.Len(t, page.Files, 1)
	require.Equal(t, clean.ID, page.Files[0].ID)
	es := b.events(bad.ID)
	require.Equal(t, []string{"file.ready", "file.quarantined"}, types(es))
	require.Equal(t, "quarantined", es[1].Data["status"])
	require.True(t, b.hasObject(bad.Key), "its bytes are kept for the operator")

	rep, err = b.svc.UnsafeSystemRescan(ctx, service.RescanOptions{}, func(service.Detection) {})
	require.NoError(t, err)
	require.Equal(t, 1, rep.Scanned, "a quarantined file is not scanned again")

	require.NoError(t, b.svc.UnsafeSystemUnquarantine(ctx, other.ID.String()))
	_, err = b.svc.Find(as("globex", "mallory"), other.ID.String())
	require.NoError(t, err, "visible again")
	require.Equal(t, []string{"file.ready", "file.quarantined", "file.unquarantined"}, types(b.events(other.ID)))
	requireNotFound(t, b.svc.UnsafeSystemUnquarantine(ctx, clean.ID.String()), "not quarantined")

	since := b.clock.Now().Add(time.Hour)
	rep, err = b.svc.UnsafeSystemRescan(ctx, service.RescanOptions{Since: &since}, func(service.Detection) {})
	require.NoError(t, err)
	require.Zero(t, rep.Scanned, "nothing created since")

	d.Kill()
	var missed []service.NoVerdict
	rep, err = b.svc.UnsafeSystemRescan(ctx, service.RescanOptions{NoVerdict: func(n service.NoVerdict) { missed = append(missed, n) }}, func(service.Detection) {})
	require.NoError(t, err, "a file without a verdict is reported, not the end of the run")
	require.Equal(t, service.RescanReport{Unscanned: 2}, rep)
	require.Len(t, missed, 2)
	require.ElementsMatch(t, []uuid.UUID{clean.ID, other.ID}, []uuid.UUID{missed[0].ID, missed[1].ID})
	require.ErrorIs(t, missed[0].Err, clamd.ErrUnavailable)
}

// TestRescanGoesOnPastAFileWithoutVerdict: a rescan of 4 streams scans
// files at once (two are seen in flight together), sends a file the
// scanner failed on once again and counts it scanned, reports a file it
// fails on every time and goes on with the rest; five files in a row
// without a verdict (clamd down) stop it with clamd's error.
func TestRescanGoesOnPastAFileWithoutVerdict(t *testing.T) {
	t.Parallel()
	d := clamdtest.Start(t, 30)
	real := d.Scanner(10 * time.Second)
	var mu sync.Mutex
	var inFlight, most int
	tried := map[string]int{}
	both := make(chan struct{})
	var bothOnce sync.Once
	scanner := func(ctx context.Context, r io.Reader) (service.ScanVerdict, error) {
		body, err := io.ReadAll(r)
		if err != nil {
			return service.ScanVerdict{}, err
		}
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		if inFlight >= 2 {
			bothOnce.Do(func() { close(both) })
		}
		tried[string(body)]++
		n := tried[string(body)]
		mu.Unlock()
		defer func() { mu.Lock(); inFlight--; mu.Unlock() }()
		select { // the first scans wait (a while at most) for a second one
		case <-both:
		case <-time.After(2 * time.Second):
		}
		switch {
		case strings.HasPrefix(string(body), "never") || strings.HasPrefix(string(body), "flaky") && n == 1:
			return service.ScanVerdict{}, fmt.Errorf("%w: the stream broke", clamd.ErrUnavailable)
		}
		return real(ctx, bytes.NewReader(body))
	}
	b := setupWith(t, service.DriverLocal, []service.Option{service.WithScanner(scanner)})
	for i := range 20 {
		_, err := b.svc.Upload(alice, strings.NewReader(fmt.Sprintf("id,n\n%d,1\n", i)), "rows.csv", nil)
		require.NoError(t, err)
	}
	_, err := b.svc.Upload(alice, strings.NewReader(clamdtest.EICAR), "notes.txt", nil)
	require.NoError(t, err)
	_, err = b.svc.Upload(alice, strings.NewReader("flaky,n\n1,2\n"), "flaky.csv", nil)
	require.NoError(t, err)
	never, err := b.svc.Upload(alice, strings.NewReader("never,n\n1,2\n"), "never.csv", nil)
	require.NoError(t, err)

	var missed []service.NoVerdict
	rep, err := b.svc.UnsafeSystemRescan(context.Background(), service.RescanOptions{Concurrency: 4, Retries: 2,
		NoVerdict: func(n service.NoVerdict) { missed = append(missed, n) }}, func(service.Detection) {})
	require.NoError(t, err)
	require.Equal(t, service.RescanReport{Scanned: 22, Detected: 1, Unscanned: 1}, rep)
	require.Len(t, missed, 1)
	require.Equal(t, never.ID, missed[0].ID)
	require.Equal(t, 3, tried["never,n\n1,2\n"], "sent once and retried twice")
	require.Equal(t, 2, tried["flaky,n\n1,2\n"], "scanned on its retry")
	require.GreaterOrEqual(t, most, 2, "files scanned at once")

	d.Kill()
	rep, err = b.svc.UnsafeSystemRescan(context.Background(), service.RescanOptions{Concurrency: 2}, func(service.Detection) {})
	require.ErrorIs(t, err, clamd.ErrUnavailable, "clamd down: the rescan stops")
	require.GreaterOrEqual(t, rep.Unscanned, 5)
	require.Less(t, rep.Unscanned, 23, "it stopped before the end")
}

// TestRescanSinceWalksPastFilesItSkips: a rescan --since over 25,000 files
// created before it and two after -- all of them later in id order than
// the old ones -- reads the table a budget a statement, goes on past the
// statements that found nothing, and scans the two, for every tenant and
// for one.
func TestRescanSinceWalksPastFilesItSkips(t *testing.T) {
	t.Parallel()
	d := clamdtest.Start(t, 30)
	b := setupWith(t, service.DriverLocal, []service.Option{service.WithScanner(d.Scanner(10 * time.Second))})
	b.exec(`INSERT INTO uploaded_file (id, tenant_code, user_id, key, original_name, size_bytes, content_type, status, completed_at, created_at, updated_at)
SELECT ('00000000-0000-4000-8000-' || lpad(to_hex(i), 12, '0'))::uuid, 'acme', 'alice', 'core/acme/old-' || i || '.pdf', 'old.pdf', 10,
    'application/pdf', 'ready', $1::timestamptz, $1::timestamptz - interval '1 year', $1::timestamptz
FROM generate_series(1, 25000) AS i`, b.clock.Now())
	clean := b.upload(alice)
	bad, err := b.svc.Upload(alice, strings.NewReader(clamdtest.EICAR), "notes.txt", nil)
	require.NoError(t, err)
	since := b.clock.Now().Add(-time.Hour)
	for _, tenant := range []string{"", "acme"} {
		var found []service.Detection
		rep, err := b.svc.UnsafeSystemRescan(context.Background(), service.RescanOptions{Tenant: tenant, Since: &since},
			func(d service.Detection) { found = append(found, d) })
		require.NoError(t, err)
		require.Equal(t, service.RescanReport{Scanned: 2, Detected: 1}, rep, "tenant %q", tenant)
		require.Equal(t, bad.ID, found[0].ID)
		require.NotEqual(t, clean.ID, found[0].ID)
	}
}

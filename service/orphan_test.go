package service_test

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/storagefault"
	"github.com/uploadedfile/uploadedfile/service"
)

// These tests pin the interleavings that once left an object no row, claim
// or pending upload pointed to: the store must be empty of such objects
// once the sweeps have run, whatever the order of PUTs, completes, aborts,
// deletions and sweeps.

// TestStagingCleanupWaitsForTheTarget (S3): the staging sweep does not
// delete a completed upload's staging object while its presigned PUT can
// still land, so a re-PUT finds it and is refused; after a deletion the
// re-PUT can land again, and the staging sweep still removes what it wrote.
func TestStagingCleanupWaitsForTheTarget(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverS3)
	ctx := context.Background()
	body := realDOCX(t)
	init := b.written(body)
	done, err := b.svc.CompleteUpload(alice, init.ID.String())
	require.NoError(t, err)
	staging := *b.row(init.ID).PendingKey

	n, err := b.svc.UnsafeSystemCleanupCompletedStaging(ctx, 0)
	require.NoError(t, err)
	require.Zero(t, n, "the upload target is still valid: the staging object stays")
	require.Equal(t, http.StatusPreconditionFailed, putTarget(t, init.Upload, body), "a re-PUT finds the staging object and is refused")

	require.NoError(t, b.svc.DeleteByID(alice, done.ID.String()))
	require.False(t, b.hasObject(staging), "the deletion removed the staging object")
	require.Equal(t, http.StatusOK, putTarget(t, init.Upload, body), "the still-valid target lands again after the deletion")
	require.True(t, b.hasObject(staging))
	b.checkInvariants()

	b.clock.Advance(10*time.Minute + 15*time.Minute)
	n, err = b.svc.UnsafeSystemCleanupCompletedStaging(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, 1, n, "once the target has expired (plus the clock-skew margin) the staging sweep runs")
	require.False(t, b.hasObject(staging), "what the re-PUT wrote is gone")
	require.Nil(t, b.row(init.ID).PendingKey)
	require.Empty(t, b.objects())
}

// TestRePutRacingComplete (local): a content PUT that passed its first
// check while complete promotes and unlinks the staging name must not
// create the staging object again behind a ready row.
func TestRePutRacingComplete(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	body := realDOCX(t)
	init := b.written(body)
	staging := *b.row(init.ID).PendingKey

	// The re-PUT stops just before it writes the staging name; complete runs
	// in that gap (to its end, or until it waits for the re-PUT's lock).
	release := make(chan struct{})
	completed := make(chan error, 1)
	b.store.Inject(storagefault.Fault{Op: storagefault.OpPut, Mode: storagefault.Delay, Release: release,
		Key: func(k string) bool { return k == staging },
		OnHit: func() {
			go func() { _, err := b.svc.CompleteUpload(alice, init.ID.String()); completed <- err }()
			require.Eventually(t, func() bool { return len(completed) == 1 || b.waitsOnLock() }, 10*time.Second, 5*time.Millisecond)
			close(release)
		}})
	_, err := b.svc.PutUploadContent(alice, init.ID.String(), bytes.NewReader(body))
	require.ErrorIs(t, err, service.ErrInvalidUpload, "the staging object is written once")
	require.Equal(t, "content.already-written", service.Rule(err))
	require.NoError(t, <-completed)
	require.Equal(t, "ready", b.row(init.ID).Status)
	require.False(t, b.hasObject(staging), "no staging object behind a ready row")
	b.checkInvariants()
}

// written initiates a direct upload of body as alice and writes its content.
func (b *bundle) written(body []byte) *service.InitiateResult {
	b.t.Helper()
	init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
	require.NoError(b.t, err)
	b.write(alice, init, body)
	return init
}

// waitsOnLock reports whether some session of the test database waits for
// a row lock.
func (b *bundle) waitsOnLock() bool { return b.waiting("%") > 0 }

// TestConcurrentPutsAndCompletes (local): many content PUTs racing a
// complete; whatever wins, no staging file is left behind a ready row.
func TestConcurrentPutsAndCompletes(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	body := realDOCX(t)
	for range 20 {
		init := b.written(body)
		start := make(chan struct{})
		errs := make(chan error, 5)
		for i := range 5 {
			go func() {
				<-start
				if i == 0 {
					_, err := b.svc.CompleteUpload(alice, init.ID.String())
					errs <- err
					return
				}
				_, err := b.svc.PutUploadContent(alice, init.ID.String(), bytes.NewReader(body))
				if err == nil {
					err = errUnexpectedSuccess
				}
				if service.Rule(err) == "content.already-written" {
					err = nil
				}
				errs <- err
			}()
		}
		close(start)
		for range 5 {
			require.NoError(t, <-errs)
		}
		require.Equal(t, "ready", b.row(init.ID).Status)
	}
	b.checkInvariants()
	b.settle()
	b.checkInvariants()
	for _, k := range b.objects() {
		require.False(t, strings.Contains(k, "_staging"), "no staging file survives a ready row: %s", k)
	}
}

var errUnexpectedSuccess = service.ErrUploadFailed

// TestStalledCompleterVsPendingSweep: a completer stalled past its lease
// promotes while the pending sweep deletes the reclaimed row's objects; no
// final object may survive.
func TestStalledCompleterVsPendingSweep(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			sweeper := b.secondInstance()
			body := realDOCX(t)
			init := b.written(body)

			// The completer stalls just before its promotion.
			promote := make(chan struct{})
			b.store.Inject(storagefault.Fault{Op: storagefault.OpPromote, Mode: storagefault.Delay, Release: promote})
			completed := make(chan error, 1)
			go func() { _, err := b.svc.CompleteUpload(alice, init.ID.String()); completed <- err }()
			require.Eventually(t, func() bool { return b.store.Calls(storagefault.OpPromote) == 1 }, 10*time.Second, 5*time.Millisecond)

			// Far past every lease, the pending sweep reclaims the row; right
			// after its first object delete, the stalled completer promotes.
			b.clock.Advance(2 * time.Hour)
			resume := make(chan struct{})
			b.store.Inject(storagefault.Fault{Op: storagefault.OpDelete, Mode: storagefault.DelayAfter, Nth: 1, Release: resume,
				OnHit: func() {
					close(promote)
					<-completed
					close(resume)
				}})
			_, err := sweeper.CleanupPendingUploads(context.Background(), 100)
			require.NoError(t, err)
			b.settle()
			require.Empty(t, b.objects(), "no object outlives the reclaimed row")
			b.checkInvariants()
		})
	}
}

// TestContentPutFinalAnswers (local): a content PUT on an upload in a
// final state gets a final answer, never "completing, retry later".
func TestContentPutFinalAnswers(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	body := realDOCX(t)

	init := b.written(body)
	_, err := b.svc.CompleteUpload(alice, init.ID.String())
	require.NoError(t, err)
	_, err = b.svc.PutUploadContent(alice, init.ID.String(), bytes.NewReader(body))
	require.ErrorIs(t, err, service.ErrInvalidUpload, "ready: the content was written")
	require.NotErrorIs(t, err, service.ErrUploadCompleting)
	require.Equal(t, "content.already-written", service.Rule(err))

	wrong := bytes.Repeat([]byte("x"), len(body))
	failed, err := b.svc.InitiateUpload(alice, service.InitiateInput{OriginalName: "plan.docx", ContentType: docxType, SizeBytes: int64(len(wrong)), Checksum: checksum(wrong)}, nil)
	require.NoError(t, err)
	b.write(alice, failed, wrong)
	_, err = b.svc.CompleteUpload(alice, failed.ID.String())
	require.ErrorIs(t, err, service.ErrUploadVerificationFailed)
	_, err = b.svc.PutUploadContent(alice, failed.ID.String(), bytes.NewReader(wrong))
	require.Error(t, err)
	require.NotErrorIs(t, err, service.ErrUploadCompleting, "failed is final")
	b.settle()
	b.checkInvariants()
}

// TestCompleteAfterTemporaryExpiry: completing a temporary file again once
// its 24 hours have passed is core.file.expired, like every other read.
func TestCompleteAfterTemporaryExpiry(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			body := []byte("id,amount\n1,2\n")
			init, err := b.svc.InitiateTemporaryUpload(alice, input("rows.csv", "text/csv", body), nil)
			require.NoError(t, err)
			b.write(alice, init, body)
			_, err = b.svc.CompleteUpload(alice, init.ID.String())
			require.NoError(t, err)
			b.clock.Advance(24 * time.Hour)
			r, err := b.svc.CompleteUpload(alice, init.ID.String())
			require.ErrorIs(t, err, service.ErrExpired, "got %+v", r)
		})
	}
}

// TestSignedTargetAcrossReplicas (local): a target signed by one replica is
// honoured by another (they share the signing key through the database),
// and the write answers with the staging object's ETag.
func TestSignedTargetAcrossReplicas(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	other := b.secondInstance()
	body := realDOCX(t)
	init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
	require.NoError(t, err)
	u, err := url.Parse(init.Upload.URL)
	require.NoError(t, err)
	rc, err := other.WriteSignedContent(context.Background(), init.ID.String(), service.SignedContent{
		Query: u.Query(), ContentType: init.Upload.Headers["Content-Type"], ContentLength: int64(len(body)),
		Checksum: init.Upload.Headers[service.ChecksumHeader],
	}, bytes.NewReader(body))
	require.NoError(t, err)
	require.NotEmpty(t, rc.ETag)
	staging := *b.row(init.ID).PendingKey
	oi, err := b.inner.Stat(context.Background(), staging)
	require.NoError(t, err)
	require.Equal(t, oi.ETag, rc.ETag)
}

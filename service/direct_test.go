package service_test

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/storagefault"
	"github.com/uploadedfile/uploadedfile/service"
)

const docxType = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"

// realDOCX is a minimal but genuine Word package.
func realDOCX(t testing.TB) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := zip.NewWriter(&buf)
	for name, content := range map[string]string{
		"[Content_Types].xml": `<?xml version="1.0" encoding="UTF-8"?><Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"><Default Extension="xml" ContentType="application/xml"/></Types>`,
		"_rels/.rels":         `<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships"/>`,
		"word/document.xml":   `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body><w:p><w:r><w:t>Plan for the quarter</w:t></w:r></w:p></w:body></w:document>`,
	} {
		f, err := w.Create(name)
		require.NoError(t, err)
		_, err = f.Write([]byte(content))
		require.NoError(t, err)
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func checksum(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + base64.StdEncoding.EncodeToString(s[:])
}

func input(name, ct string, body []byte) service.InitiateInput {
	return service.InitiateInput{OriginalName: name, ContentType: ct, SizeBytes: int64(len(body)), Checksum: checksum(body)}
}

// putTarget sends body to an upload target as a browser would: plain
// net/http, exactly the headers it was given.
func putTarget(t *testing.T, target service.UploadTarget, body []byte) int {
	t.Helper()
	req, err := http.NewRequest(target.Method, target.URL, bytes.NewReader(body))
	require.NoError(t, err)
	for k, v := range target.Headers {
		if k != "Content-Length" {
			req.Header.Set(k, v)
		}
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// write sends the bytes to the target: the content route on local, the
// presigned PUT on S3.
func (b *bundle) write(ctx context.Context, init *service.InitiateResult, body []byte) {
	b.t.Helper()
	if b.driver == service.DriverS3 {
		require.Equal(b.t, http.StatusOK, putTarget(b.t, init.Upload, body))
		return
	}
	_, err := b.svc.PutUploadContent(ctx, init.ID.String(), bytes.NewReader(body))
	require.NoError(b.t, err)
}

func TestDirectUpload(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			body := realDOCX(t)
			init, err := b.svc.InitiateUpload(alice, input("Plan.docx", docxType, body), nil)
			require.NoError(t, err)
			require.Equal(t, service.StatusPending, init.File.Status)
			require.Equal(t, service.Private, init.File.Visibility)
			require.Equal(t, b.clock.Now().Add(10*time.Minute), init.Upload.ExpiresAt.UTC(), "uploadUrlTtlSeconds")
			row := b.row(init.ID)
			require.NotEqual(t, row.Key, *row.PendingKey, "a private staging key distinct from the final key")
			require.NotNil(t, row.UploadPendingAt, "an in-flight cleanup lease")
			_, err = b.svc.Find(alice, init.ID.String())
			requireNotFound(t, err, "a pending upload is not readable")

			if driver == service.DriverLocal {
				require.True(t, strings.HasPrefix(init.Upload.URL, "https://files.example.test/uploaded-file/"+init.ID.String()+"/content?"), init.Upload.URL)
				require.Contains(t, init.Upload.URL, "signature=", "a self-contained, signed target")
			}
			require.NotContains(t, init.Upload.Headers, "Content-Length", "only headers a browser may set")
			b.write(alice, init, body)
			if driver == service.DriverLocal {
				_, err := b.svc.PutUploadContent(alice, init.ID.String(), bytes.NewReader(body))
				require.ErrorIs(t, err, service.ErrInvalidUpload, "the staging object is written once")
			}

			done, err := b.svc.CompleteUpload(alice, init.ID.String())
			require.NoError(t, err)
			require.Equal(t, service.StatusReady, done.Status)
			require.Equal(t, body, []byte(b.readObject(done.Key)))
			final := b.row(init.ID)
			switch driver {
			case service.DriverLocal:
				require.Nil(t, final.PendingKey, "local promotion clears the staging key")
				require.False(t, b.hasObject(*row.PendingKey))
			case service.DriverS3:
				require.NotNil(t, final.PendingKey, "S3 keeps the staging object until the staging sweep")
				require.True(t, b.hasObject(*row.PendingKey))
				n, err := b.svc.UnsafeSystemCleanupCompletedStaging(context.Background(), 0)
				require.NoError(t, err)
				require.Zero(t, n, "not while the upload target can still land")
				b.clock.Advance(25 * time.Minute)
				n, err = b.svc.UnsafeSystemCleanupCompletedStaging(context.Background(), 0)
				require.NoError(t, err)
				require.Equal(t, 1, n)
				require.False(t, b.hasObject(*row.PendingKey))
				require.Nil(t, b.row(init.ID).PendingKey)
			}
			again, err := b.svc.CompleteUpload(alice, init.ID.String())
			require.NoError(t, err, "completing a ready upload returns it again")
			require.Equal(t, done.ID, again.ID)
			_, err = b.svc.Find(alice, init.ID.String())
			require.NoError(t, err)
			b.checkInvariants()
		})
	}
}

// TestPresignedPutRefusesChangedBytes: the object store itself refuses a
// body with one byte changed (the checksum is a signed header).
func TestPresignedPutRefusesChangedBytes(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverS3)
	body := realDOCX(t)
	init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
	require.NoError(t, err)
	tampered := bytes.Clone(body)
	tampered[len(tampered)/2] ^= 0x01
	status := putTarget(t, init.Upload, tampered)
	require.GreaterOrEqual(t, status, 400)
	require.Less(t, status, 500)
	require.False(t, b.hasObject(*b.row(init.ID).PendingKey), "nothing was stored")

	_, err = b.svc.CompleteUpload(alice, init.ID.String())
	require.ErrorIs(t, err, service.ErrUploadVerificationFailed, "nothing to complete")
	require.Equal(t, "pending", b.row(init.ID).Status, "the client may still send the right bytes")
	require.Equal(t, http.StatusOK, putTarget(t, init.Upload, body))
	_, err = b.svc.CompleteUpload(alice, init.ID.String())
	require.NoError(t, err)
}

func TestDirectUploadWrongContentFailsDurably(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			png := append([]byte("\x89PNG\r\n\x1a\n"), bytes.Repeat([]byte{1}, 200)...)
			init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, png), nil)
			require.NoError(t, err)
			b.write(alice, init, png)
			_, err = b.svc.CompleteUpload(alice, init.ID.String())
			require.ErrorIs(t, err, service.ErrUploadVerificationFailed)
			row := b.row(init.ID)
			require.Equal(t, "failed", row.Status, "failed durably")
			require.False(t, b.hasObject(*row.PendingKey), "its staging object is deleted")
			_, err = b.svc.CompleteUpload(alice, init.ID.String())
			requireNotFound(t, err, "a failed upload cannot be completed again")
			b.settle()
			b.checkInvariants()
			require.Empty(t, b.objects())
		})
	}
}

func TestInitiateValidation(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	body := realDOCX(t)
	good := input("plan.docx", docxType, body)
	for name, c := range map[string]struct {
		in   service.InitiateInput
		opts *service.UploadOptions
		want error
	}{
		"checksum not sha256":       {service.InitiateInput{OriginalName: "plan.docx", ContentType: docxType, SizeBytes: 10, Checksum: "md5:abc"}, nil, service.ErrInvalidMeta},
		"checksum not base64":       {service.InitiateInput{OriginalName: "plan.docx", ContentType: docxType, SizeBytes: 10, Checksum: "sha256:???"}, nil, service.ErrInvalidMeta},
		"no declared type":          {service.InitiateInput{OriginalName: "plan.docx", SizeBytes: 10, Checksum: good.Checksum}, nil, service.ErrInvalidMeta},
		"type disagrees":            {service.InitiateInput{OriginalName: "plan.docx", ContentType: "application/pdf", SizeBytes: 10, Checksum: good.Checksum}, nil, service.ErrInvalidUpload},
		"too large":                 {service.InitiateInput{OriginalName: "plan.docx", ContentType: docxType, SizeBytes: 26 << 20, Checksum: good.Checksum}, nil, service.ErrInvalidUpload},
		"empty":                     {service.InitiateInput{OriginalName: "plan.docx", ContentType: docxType, SizeBytes: 0, Checksum: good.Checksum}, nil, service.ErrInvalidUpload},
		"public not allowed":        {good, &service.UploadOptions{Visibility: service.Public}, service.ErrPublicUploadDisabled},
		"type narrowed out":         {good, &service.UploadOptions{AllowedMIMETypes: []string{"image/png"}}, service.ErrInvalidUpload},
		"unsupported extension":     {service.InitiateInput{OriginalName: "run.sh", ContentType: "text/x-sh", SizeBytes: 10, Checksum: good.Checksum}, nil, service.ErrInvalidUpload},
		"name empty when sanitized": {service.InitiateInput{OriginalName: "../", ContentType: docxType, SizeBytes: 10, Checksum: good.Checksum}, nil, service.ErrInvalidUpload},
	} {
		_, err := b.svc.InitiateUpload(alice, c.in, c.opts)
		require.ErrorIs(t, err, c.want, name)
	}
	require.Zero(t, b.rowCount(), "a refused initiation persists nothing")
}

func TestDirectUploadExpiry(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	body := realDOCX(t)
	init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
	require.NoError(t, err)
	b.clock.Advance(10 * time.Minute)
	_, err = b.svc.PutUploadContent(alice, init.ID.String(), bytes.NewReader(body))
	require.ErrorIs(t, err, service.ErrUploadExpired)
	_, err = b.svc.CompleteUpload(alice, init.ID.String())
	require.ErrorIs(t, err, service.ErrUploadExpired)

	// The pending sweep reclaims it once the cleanup lease has passed.
	n, err := b.svc.CleanupPendingUploads(context.Background(), 0)
	require.NoError(t, err)
	require.Zero(t, n, "not before the cleanup lease")
	b.clock.Advance(2 * time.Hour)
	n, err = b.svc.CleanupPendingUploads(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	row := b.row(init.ID)
	require.NotNil(t, row.DeletedAt)
	require.Nil(t, row.DeletionPendingAt)
	b.checkInvariants()
}

func TestTemporaryDirectUpload(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverS3)
	body := []byte("id,amount\n1,2\n")
	init, err := b.svc.InitiateTemporaryUpload(alice, input("rows.csv", "text/csv", body), nil)
	require.NoError(t, err)
	require.True(t, init.File.IsTemporary)
	b.write(alice, init, body)
	b.clock.Advance(time.Minute)
	done, err := b.svc.CompleteUpload(alice, init.ID.String())
	require.NoError(t, err)
	require.Equal(t, b.clock.Now(), done.CompletedAt.UTC())
	require.Equal(t, done.CompletedAt.Add(24*time.Hour), *done.ExpiredAt)
	b.clock.Advance(24 * time.Hour)
	_, err = b.svc.Find(alice, init.ID.String())
	require.ErrorIs(t, err, service.ErrExpired)
}

func TestAbortUpload(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			body := realDOCX(t)
			init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
			require.NoError(t, err)
			b.write(alice, init, body)
			requireNotFound(t, b.svc.AbortUpload(as("acme", "bob", "sales"), init.ID.String()), "another owner")
			require.NoError(t, b.svc.AbortUpload(alice, init.ID.String()))
			row := b.row(init.ID)
			require.False(t, b.hasObject(*row.PendingKey), "the staging object is deleted")
			require.NotNil(t, row.UploadPendingAt, "a tombstone while the target could still be written")
			_, err = b.svc.CompleteUpload(alice, init.ID.String())
			requireNotFound(t, err)
			requireNotFound(t, b.svc.AbortUpload(alice, init.ID.String()))
			b.settle()
			final := b.row(init.ID)
			require.Nil(t, final.UploadPendingAt, "settled once the window closed")
			require.Nil(t, final.DeletionPendingAt)
			b.checkInvariants()
			require.Empty(t, b.objects())

			// DeleteByID of a pending upload aborts it too.
			other, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
			require.NoError(t, err)
			require.NoError(t, b.svc.DeleteByID(alice, other.ID.String()))
			require.NotNil(t, b.row(other.ID).DeletionPendingAt)
		})
	}
}

// secondInstance is another service on its own connection pool over the
// same database and bucket: another replica.
func (b *bundle) secondInstance() *service.Service {
	b.t.Helper()
	pool, err := pgxpool.New(context.Background(), b.db.Pool.Config().ConnString())
	require.NoError(b.t, err)
	b.t.Cleanup(pool.Close)
	svc, err := service.New(context.Background(), b.cfg, pool, service.WithStore(b.store), service.WithClock(b.clock.Now))
	require.NoError(b.t, err)
	return svc
}

func TestConcurrentCompletes(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			other := b.secondInstance()
			body := realDOCX(t)
			for range 5 {
				init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
				require.NoError(t, err)
				b.write(alice, init, body)
				before := b.store.Calls(storagefault.OpPromote)

				var wg sync.WaitGroup
				errs := make([]error, 2)
				for i, svc := range []*service.Service{b.svc, other} {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, errs[i] = svc.CompleteUpload(alice, init.ID.String())
					}()
				}
				wg.Wait()
				require.Equal(t, 1, b.store.Calls(storagefault.OpPromote)-before, "exactly one promotion")
				for _, err := range errs {
					if err != nil {
						require.ErrorIs(t, err, service.ErrUploadCompleting)
					}
				}
				require.False(t, errs[0] != nil && errs[1] != nil, "at least one completes: %v", errs)
				r, err := b.svc.CompleteUpload(alice, init.ID.String())
				require.NoError(t, err, "afterwards both see the ready file")
				require.Equal(t, service.StatusReady, r.Status)
			}
			b.checkInvariants()
		})
	}
}

func TestCompleteRacingAbort(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverS3)
	other := b.secondInstance()
	body := realDOCX(t)
	outcomes := map[string]int{}
	for range 8 {
		init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
		require.NoError(t, err)
		b.write(alice, init, body)
		var wg sync.WaitGroup
		var completeErr, abortErr error
		wg.Add(2)
		go func() { defer wg.Done(); _, completeErr = b.svc.CompleteUpload(alice, init.ID.String()) }()
		go func() { defer wg.Done(); abortErr = other.AbortUpload(alice, init.ID.String()) }()
		wg.Wait()
		r, findErr := b.svc.Find(alice, init.ID.String())
		switch {
		case findErr == nil:
			outcomes["ready"]++
			require.NoError(t, completeErr)
			require.True(t, b.hasObject(r.Key), "a ready row always has its object")
		default:
			outcomes["removed"]++
			require.NoError(t, abortErr)
			require.True(t, completeErr != nil)
		}
	}
	t.Logf("outcomes: %v", outcomes)
	b.settle()
	b.checkInvariants()
}

// TestAbandonedCompleterIsRecovered: a completer that dies holding the
// lease blocks others until the lease expires, then another instance takes
// the completion over.
func TestAbandonedCompleterIsRecovered(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			other := b.secondInstance()
			body := realDOCX(t)
			init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
			require.NoError(t, err)
			b.write(alice, init, body)

			// The first completer hangs in its promotion and is abandoned.
			ctx, cancel := context.WithCancel(alice)
			b.store.Inject(storagefault.Fault{Op: storagefault.OpPromote, Mode: storagefault.Hang, Nth: 1})
			done := make(chan error, 1)
			go func() { _, err := b.svc.CompleteUpload(ctx, init.ID.String()); done <- err }()
			require.Eventually(t, func() bool { return b.store.Calls(storagefault.OpPromote) == 1 }, 10*time.Second, 5*time.Millisecond)
			cancel()
			require.Error(t, <-done)
			require.Equal(t, "completing", b.row(init.ID).Status, "it died holding the lease")

			_, err = other.CompleteUpload(alice, init.ID.String())
			require.ErrorIs(t, err, service.ErrUploadCompleting, "the lease is still live")
			b.clock.Advance(2 * time.Minute)
			r, err := other.CompleteUpload(alice, init.ID.String())
			require.NoError(t, err, "the expired lease is taken over")
			require.Equal(t, service.StatusReady, r.Status)
			require.Equal(t, body, []byte(b.readObject(r.Key)))
			b.checkInvariants()
		})
	}
}

// TestLongCompletionKeepsItsLease: a completion that runs longer than its
// lease (its promotion hangs) keeps the lease alive, so nobody takes the
// upload over under it; once it is gone the lease runs out within
// CompletionLease and another instance finishes the upload.
func TestLongCompletionKeepsItsLease(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			service.SetCompletionBeat(b.svc, 10*time.Millisecond)
			other := b.secondInstance()
			body := realDOCX(t)
			init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
			require.NoError(t, err)
			b.write(alice, init, body)

			ctx, cancel := context.WithCancel(alice)
			b.store.Inject(storagefault.Fault{Op: storagefault.OpPromote, Mode: storagefault.Hang, Nth: 1})
			done := make(chan error, 1)
			go func() { _, err := b.svc.CompleteUpload(ctx, init.ID.String()); done <- err }()
			require.Eventually(t, func() bool { return b.store.Calls(storagefault.OpPromote) == 1 }, 10*time.Second, 5*time.Millisecond)
			for range 3 {
				// Far past the lease it took: the running completion has
				// extended it meanwhile.
				// The lease is read before the clock moves: a beat between the
				// move and the read would already carry the new lease, and
				// every later beat (the clock stands still) the same one.
				lease := *b.row(init.ID).CompletionLeaseUntil
				b.clock.Advance(2 * service.CompletionLease)
				require.Eventually(t, func() bool { return b.row(init.ID).CompletionLeaseUntil.After(lease) }, 10*time.Second, 5*time.Millisecond)
				_, err = other.CompleteUpload(alice, init.ID.String())
				require.ErrorIs(t, err, service.ErrUploadCompleting, "a live completion is not taken over")
			}

			cancel() // the completer dies
			require.Error(t, <-done)
			b.clock.Advance(service.CompletionLease)
			r, err := other.CompleteUpload(alice, init.ID.String())
			require.NoError(t, err, "the lease it left ran out and was taken over")
			require.Equal(t, service.StatusReady, r.Status)
			b.checkInvariants()
		})
	}
}

// TestDirectFaultsAtEveryStep injects a failure at each storage step of
// initiate, put, complete and abort; afterwards, and after the sweeps
// settle, the invariants hold and the upload is either ready with its
// object or gone with none.
func TestDirectFaultsAtEveryStep(t *testing.T) {
	t.Parallel()
	type step struct {
		name   string
		driver string
		fault  storagefault.Fault
		abort  bool
	}
	var steps []step
	for _, driver := range drivers {
		for _, f := range []storagefault.Fault{
			{Op: storagefault.OpStat, Mode: storagefault.Before, Nth: 1},
			{Op: storagefault.OpStat, Mode: storagefault.Before, Nth: 2},
			{Op: storagefault.OpOpen, Mode: storagefault.Before, Nth: 1},
			{Op: storagefault.OpPromote, Mode: storagefault.Before, Nth: 1},
			{Op: storagefault.OpPromote, Mode: storagefault.After, Nth: 1},
			{Op: storagefault.OpDelete, Mode: storagefault.Before, Nth: 1},
		} {
			steps = append(steps, step{name: string(f.Op) + modeName(f.Mode), driver: driver, fault: f})
		}
		steps = append(steps, step{name: "abort delete fails", driver: driver, fault: storagefault.Fault{Op: storagefault.OpDelete, Mode: storagefault.Before, Nth: 1}, abort: true})
	}
	steps = append(steps,
		step{name: "presign fails", driver: service.DriverS3, fault: storagefault.Fault{Op: storagefault.OpPresignPut, Mode: storagefault.Before, Nth: 1}},
		step{name: "content put fails", driver: service.DriverLocal, fault: storagefault.Fault{Op: storagefault.OpPut, Mode: storagefault.Before, Nth: 1}},
		step{name: "content put lost", driver: service.DriverLocal, fault: storagefault.Fault{Op: storagefault.OpPut, Mode: storagefault.After, Nth: 1}},
	)
	for _, st := range steps {
		t.Run(st.driver+"/"+st.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, st.driver)
			body := realDOCX(t)
			b.store.Inject(st.fault)
			init, err := b.svc.InitiateUpload(alice, input("plan.docx", docxType, body), nil)
			if err == nil {
				if st.driver == service.DriverS3 {
					putTarget(t, init.Upload, body)
				} else {
					_, _ = b.svc.PutUploadContent(alice, init.ID.String(), bytes.NewReader(body))
				}
				if st.abort {
					_ = b.svc.AbortUpload(alice, init.ID.String())
				} else {
					_, _ = b.svc.CompleteUpload(alice, init.ID.String())
				}
			}
			b.checkInvariants()
			b.store.Reset()
			if err == nil && !st.abort {
				b.clock.Advance(3 * time.Minute) // past any completion lease left by the fault
				if _, cerr := b.svc.CompleteUpload(alice, init.ID.String()); cerr != nil && !errors.Is(cerr, service.ErrNotFound) &&
					!errors.Is(cerr, service.ErrUploadVerificationFailed) && !errors.Is(cerr, service.ErrUploadExpired) {
					require.NoError(t, cerr, "a retried complete either finishes or reports a final state")
				}
			}
			b.settle()
			b.checkInvariants()
			if err == nil {
				if r, ferr := b.svc.Find(alice, init.ID.String()); ferr == nil {
					require.Equal(t, body, []byte(b.readObject(r.Key)))
					return
				}
			}
			require.Empty(t, b.objects(), "an upload that did not complete leaves no object")
		})
	}
}

func modeName(m storagefault.Mode) string {
	return map[storagefault.Mode]string{storagefault.Before: " fails", storagefault.After: " lost", storagefault.Hang: " hangs"}[m]
}

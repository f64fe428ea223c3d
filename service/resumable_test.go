package service_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/service"
)

// chunk is body[from:to] as the chunk at from.
func chunk(body []byte, from, to int) service.Chunk {
	return service.Chunk{Offset: int64(from), Length: int64(to - from), Body: bytes.NewReader(body[from:to])}
}

func resumableInput(name, ct string, body []byte) service.ResumableInput {
	return service.ResumableInput{OriginalName: name, ContentType: ct, SizeBytes: int64(len(body))}
}

// chunkRows counts the chunk rows of a file, and those still live.
func (b *bundle) chunkRows(id string) (all, live int) {
	b.t.Helper()
	require.NoError(b.t, b.db.Pool.QueryRow(context.Background(),
		"SELECT count(*), count(*) FILTER (WHERE trimmed_at IS NULL) FROM uploaded_file_chunk WHERE file_id = $1", id).Scan(&all, &live))
	return all, live
}

func TestResumableUpload(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			body := realDOCX(t)
			third := len(body) / 3
			up, err := b.svc.CreateResumableUpload(alice, resumableInput("Plan.docx", docxType, body), nil)
			require.NoError(t, err)
			id := up.ID.String()
			require.Zero(t, up.Offset)
			require.Equal(t, b.clock.Now().Add(24*time.Hour), up.ExpiresAt.UTC(), "resumableUploadTtlSeconds")
			_, err = b.svc.Find(alice, id)
			requireNotFound(t, err, "a resumable upload is not a file until its last byte")
			_, err = b.svc.CompleteUpload(alice, id)
			requireNotFound(t, err, "its last chunk completes it, not complete")

			got, err := b.svc.WriteChunk(alice, id, chunk(body, 0, third))
			require.NoError(t, err)
			require.EqualValues(t, third, got.Offset)
			require.Nil(t, got.File)

			_, err = b.svc.WriteChunk(alice, id, chunk(body, 0, third))
			require.ErrorIs(t, err, service.ErrUploadOffsetMismatch, "the same chunk again")
			_, err = b.svc.WriteChunk(as("acme", "bob", "sales"), id, chunk(body, third, 2*third))
			requireNotFound(t, err, "another owner's upload is missing to them")
			_, err = b.svc.ResumableState(as("globex", "alice", "sales"), id)
			requireNotFound(t, err, "another tenant's upload is missing to them")

			bad := chunk(body, third, 2*third)
			wrong := sha256.Sum256([]byte("other bytes"))
			bad.SHA256 = wrong[:]
			_, err = b.svc.WriteChunk(alice, id, bad)
			require.ErrorIs(t, err, service.ErrChunkChecksumMismatch)
			short := chunk(body, third, 2*third)
			short.Length += 10
			_, err = b.svc.WriteChunk(alice, id, short)
			require.ErrorIs(t, err, service.ErrChunkIncomplete, "a body that ends before its length")
			state, err := b.svc.ResumableState(alice, id)
			require.NoError(t, err)
			require.EqualValues(t, third, state.Offset, "a refused chunk keeps nothing")
			_, live := b.chunkRows(id)
			require.Equal(t, 1, live)

			good := chunk(body, third, 2*third)
			sum := sha256.Sum256(body[third : 2*third])
			good.SHA256 = sum[:]
			got, err = b.svc.WriteChunk(alice, id, good)
			require.NoError(t, err)
			require.EqualValues(t, 2*third, got.Offset)

			done, err := b.svc.WriteChunk(alice, id, chunk(body, 2*third, len(body)))
			require.NoError(t, err)
			require.EqualValues(t, len(body), done.Offset)
			require.NotNil(t, done.File)
			require.Equal(t, service.StatusReady, done.File.Status)
			require.Equal(t, checksum(body), *b.row(up.ID).Checksum, "the assembled file's checksum is recorded")
			require.Equal(t, body, []byte(b.readObject(done.File.Key)))
			_, live = b.chunkRows(id)
			require.Zero(t, live, "the chunks are given up once the file is ready")

			again, err := b.svc.ResumableState(alice, id)
			require.NoError(t, err)
			require.EqualValues(t, len(body), again.Offset)
			_, err = b.svc.Find(alice, id)
			require.NoError(t, err)
			b.checkInvariants()
			b.settle()
			all, _ := b.chunkRows(id)
			require.Zero(t, all, "the sweep removes given-up chunk rows")
			b.checkInvariants()
		})
	}
}

// TestResumableWholeFileInOneChunk: the chunk that is the whole file is
// written as the staging object itself, and the digest it declares is
// checked against it (the staging object's own).
func TestResumableWholeFileInOneChunk(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	up, err := b.svc.CreateTemporaryResumableUpload(alice, resumableInput("report.pdf", "application/pdf", []byte(pdf)), nil)
	require.NoError(t, err)
	whole := chunk([]byte(pdf), 0, len(pdf))
	wrong := sha256.Sum256([]byte(pdf[1:]))
	whole.SHA256 = wrong[:]
	_, err = b.svc.WriteChunk(alice, up.ID.String(), whole)
	require.ErrorIs(t, err, service.ErrChunkChecksumMismatch)
	state, err := b.svc.ResumableState(alice, up.ID.String())
	require.NoError(t, err)
	require.Zero(t, state.Offset, "a refused chunk keeps nothing")
	whole = chunk([]byte(pdf), 0, len(pdf))
	right := sha256.Sum256([]byte(pdf))
	whole.SHA256 = right[:]
	done, err := b.svc.WriteChunk(alice, up.ID.String(), whole)
	require.NoError(t, err)
	require.True(t, done.File.IsTemporary)
	all, _ := b.chunkRows(up.ID.String())
	require.Zero(t, all)
	require.Equal(t, pdf, b.readObject(done.File.Key))
}

// TestWriteChunkToIsTheCallersOnly: an upload as ResumableState answered
// one caller is written by that caller without being read again, and by
// no one else: to another owner or tenant it is missing.
func TestWriteChunkToIsTheCallersOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	body := []byte(pdf)
	up, err := b.svc.CreateResumableUpload(alice, resumableInput("report.pdf", "application/pdf", body), nil)
	require.NoError(t, err)
	read, err := b.svc.ResumableState(alice, up.ID.String())
	require.NoError(t, err)
	for _, other := range []context.Context{as("acme", "bob", "sales"), as("globex", "alice", "sales")} {
		_, err = b.svc.WriteChunkTo(other, read, chunk(body, 0, 10))
		requireNotFound(t, err, "another caller's upload is missing to them")
	}
	got, err := b.svc.WriteChunkTo(alice, read, chunk(body, 0, 10))
	require.NoError(t, err)
	require.EqualValues(t, 10, got.Offset)
	_, err = b.svc.WriteChunkTo(alice, read, chunk(body, 0, 10))
	require.ErrorIs(t, err, service.ErrUploadOffsetMismatch, "a row read before a write does not write at its offset again")
	done, err := b.svc.WriteChunkTo(alice, got, chunk(body, 10, len(body)))
	require.NoError(t, err, "an upload no ResumableState answered is read")
	require.Equal(t, service.StatusReady, done.File.Status)
	require.Equal(t, pdf, b.readObject(done.File.Key))
}

// TestResumableRefusedContentFailsDurably: the last chunk runs the
// content checks; bytes that are not what was declared fail the upload,
// which keeps no object and no quota.
func TestResumableRefusedContentFailsDurably(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverS3)
	fake := bytes.Repeat([]byte("not a pdf "), 20)
	up, err := b.svc.CreateResumableUpload(alice, resumableInput("report.pdf", "application/pdf", fake), nil)
	require.NoError(t, err)
	_, err = b.svc.WriteChunk(alice, up.ID.String(), chunk(fake, 0, 100))
	require.NoError(t, err)
	_, err = b.svc.WriteChunk(alice, up.ID.String(), chunk(fake, 100, len(fake)))
	require.ErrorIs(t, err, service.ErrUploadVerificationFailed)
	_, err = b.svc.ResumableState(alice, up.ID.String())
	requireNotFound(t, err, "a failed upload is gone")
	u, err := b.svc.Usage(alice)
	require.NoError(t, err)
	require.Zero(t, u.Tenant.Bytes, "its quota is released")
	b.settle()
	b.checkInvariants()
	require.Empty(t, b.objects())
}

// TestResumableWritersExcludeEachOther: while one request writes a chunk,
// another is refused; a writer that stalls past its lease loses the upload
// to the next one, and its late chunk is given up, never counted.
func TestResumableWritersExcludeEachOther(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverLocal)
	body := realDOCX(t)
	up, err := b.svc.CreateResumableUpload(alice, resumableInput("Plan.docx", docxType, body), nil)
	require.NoError(t, err)
	id := up.ID.String()

	pr, pw := io.Pipe()
	var wg sync.WaitGroup
	var stalledErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, stalledErr = b.svc.WriteChunk(alice, id, service.Chunk{Offset: 0, Length: 100, Body: pr})
	}()
	_, err = pw.Write(body[:50])
	require.NoError(t, err)
	_, err = b.svc.WriteChunk(alice, id, chunk(body, 0, 100))
	require.ErrorIs(t, err, service.ErrUploadLocked, "another request is writing")

	b.clock.Advance(time.Minute) // the stalled writer's lease runs out
	got, err := b.svc.WriteChunk(alice, id, chunk(body, 0, 200))
	require.NoError(t, err)
	require.EqualValues(t, 200, got.Offset)

	_, err = pw.Write(body[50:100])
	require.NoError(t, err)
	require.NoError(t, pw.Close())
	wg.Wait()
	require.ErrorIs(t, stalledErr, service.ErrUploadLocked, "the stalled writer lost its lease")
	state, err := b.svc.ResumableState(alice, id)
	require.NoError(t, err)
	require.EqualValues(t, 200, state.Offset)

	done, err := b.svc.WriteChunk(alice, id, chunk(body, 200, len(body)))
	require.NoError(t, err)
	require.Equal(t, body, []byte(b.readObject(done.File.Key)))
	b.checkInvariants()
	b.settle()
	b.checkInvariants()
	require.Len(t, b.objects(), 1, "only the file is left")
}

// TestAbandonedResumableUploadIsReclaimed: an upload never finished
// expires with the pending sweep: its chunks go, its quota comes back.
func TestAbandonedResumableUploadIsReclaimed(t *testing.T) {
	t.Parallel()
	for _, driver := range drivers {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			b := setup(t, driver)
			body := realDOCX(t)
			up, err := b.svc.CreateResumableUpload(alice, resumableInput("Plan.docx", docxType, body), nil)
			require.NoError(t, err)
			_, err = b.svc.WriteChunk(alice, up.ID.String(), chunk(body, 0, 100))
			require.NoError(t, err)
			u, err := b.svc.Usage(alice)
			require.NoError(t, err)
			require.EqualValues(t, len(body), u.Tenant.Bytes, "the declared size is reserved")
			require.Len(t, b.objects(), 1, "one chunk object")

			b.clock.Advance(24 * time.Hour)
			_, err = b.svc.WriteChunk(alice, up.ID.String(), chunk(body, 100, 200))
			require.ErrorIs(t, err, service.ErrUploadExpired)
			b.settle()
			u, err = b.svc.Usage(alice)
			require.NoError(t, err)
			require.Zero(t, u.Tenant.Bytes)
			require.Empty(t, b.objects())
			all, _ := b.chunkRows(up.ID.String())
			require.Zero(t, all)
			b.checkInvariants()
		})
	}
}

// TestTerminatedResumableUpload: termination aborts the upload and its
// chunks at once.
func TestTerminatedResumableUpload(t *testing.T) {
	t.Parallel()
	b := setup(t, service.DriverS3)
	body := realDOCX(t)
	up, err := b.svc.CreateResumableUpload(alice, resumableInput("Plan.docx", docxType, body), nil)
	require.NoError(t, err)
	_, err = b.svc.WriteChunk(alice, up.ID.String(), chunk(body, 0, 100))
	require.NoError(t, err)
	requireNotFound(t, b.svc.AbortUpload(as("acme", "bob", "sales"), up.ID.String()))
	require.NoError(t, b.svc.AbortUpload(alice, up.ID.String()))
	require.Empty(t, b.objects(), "the chunk is deleted with the upload")
	_, err = b.svc.ResumableState(alice, up.ID.String())
	requireNotFound(t, err)
	b.settle()
	b.checkInvariants()
}

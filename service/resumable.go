package service

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// Resumable uploads carry a file's bytes in chunks that each survive the
// connection that sent them: a client that loses its connection asks for
// the offset and sends the rest (the tus protocol, served by the HTTP
// adapter's tus.go over tusd's handler). The upload is a pending
// direct-lifecycle row like an initiated one -- the same declaration
// checks, quota, expiry sweep and scope -- whose chunks are stored as
// objects of their own beside its staging key, each with a row
// (uploaded_file_chunk) from before its object is written until after it
// is deleted. The chunk that ends the file streams, after the stored
// ones, into the staging object, and the direct upload's completion
// (content checks, scan gate, promotion, events) makes the file ready.

const (
	// resumableLease is the write lease of one chunk's request, extended
	// every third of it while the chunk streams in: after a writer is
	// killed its upload can be written again within it. Short, because
	// every retry a client makes meanwhile is refused (423) after it began
	// to send its chunk.
	resumableLease = 3 * time.Second
	// ResumableClaimWait is the longest a chunk's request waits for the
	// upload's write lease that another request holds: one lease and a
	// beat, so the lease of a writer that died runs out within it.
	ResumableClaimWait = resumableLease + resumableLease/3
	// MaxResumableChunks bounds the chunks one resumable upload keeps.
	MaxResumableChunks = 1000
	// chunkGrace: the chunk sweep removes a chunk given up this long ago,
	// or a chunk of an upload that is over once its write began this long
	// ago: far beyond a write lease and a body's read bound, so no stalled
	// writer writes it afterwards.
	chunkGrace = time.Hour
)

// Errors of resumable uploads.
var (
	// ErrUploadOffsetMismatch: a chunk was sent for another offset than the
	// upload's (HTTP 409: ask for the offset, then send from there).
	ErrUploadOffsetMismatch = &Error{Code: "core.file.upload-offset-mismatch"}
	// ErrUploadLocked: another request is writing a chunk of the upload
	// (HTTP 423 with Retry-After); a writer that died holds it at most
	// resumableLease.
	ErrUploadLocked = &Error{Code: "core.file.upload-locked"}
	// ErrChunkChecksumMismatch: the chunk's bytes do not match the digest
	// its request declared; nothing of it was kept (HTTP 460, the tus
	// checksum extension's status).
	ErrChunkChecksumMismatch = &Error{Code: "core.file.chunk-checksum-mismatch"}
	// ErrTooManyChunks: the upload already keeps MaxResumableChunks
	// chunks; send larger ones (HTTP 400).
	ErrTooManyChunks = &Error{Code: "core.file.too-many-chunks"}
	// ErrChunkIncomplete: the chunk's body ended before its declared
	// length; nothing of it was kept (HTTP 400; send it again).
	ErrChunkIncomplete = &Error{Code: "core.file.chunk-incomplete"}
)

// ResumableInput is what a resumable upload declares when it is created:
// the name, the type and the exact size (no checksum: each chunk may
// carry its own, and the whole file's is recorded when it is assembled).
type ResumableInput struct {
	OriginalName string
	ContentType  string
	SizeBytes    int64
}

// ResumableUpload is a resumable upload as its client resumes it.
type ResumableUpload struct {
	ID        uuid.UUID
	SizeBytes int64
	// Offset is the number of bytes received; SizeBytes once the file is
	// ready. Until then the chunk that ends the file is not counted: a
	// client that lost the answer to it sends it again.
	Offset    int64
	ExpiresAt time.Time
	// File is the file once it is ready; nil before.
	File *Result

	// read is the row ResumableState read, for WriteChunkTo.
	read *readUpload
}

// readUpload is a resumable upload's row as one caller read it.
type readUpload struct {
	row   db.UploadedFile
	dbNow time.Time
	a     access
}

// Chunk is one request's part of a resumable upload.
type Chunk struct {
	// Offset is where the chunk starts; it must be the upload's offset.
	Offset int64
	// Length is the exact number of bytes Body holds.
	Length int64
	// SHA256, when set, is the digest the chunk's bytes must have.
	SHA256 []byte
	Body   io.Reader
}

// CreateResumableUpload starts a resumable upload: the declaration is
// checked like an initiate's and the pending row is persisted, reserving
// its quota, with an expiry resumableUploadTtlSeconds ahead. An upload
// never completed is reclaimed by the pending sweep like an abandoned
// direct upload, its chunks with it.
func (s *Service) CreateResumableUpload(ctx context.Context, in ResumableInput, opts *UploadOptions) (*ResumableUpload, error) {
	return s.createResumable(ctx, in, derefOptions(opts), false)
}

// CreateTemporaryResumableUpload is CreateResumableUpload for a temporary
// file (always private, expiring 24 hours after it is ready).
func (s *Service) CreateTemporaryResumableUpload(ctx context.Context, in ResumableInput, opts *TemporaryUploadOptions) (*ResumableUpload, error) {
	var o UploadOptions
	if opts != nil {
		o = UploadOptions{ContentType: opts.ContentType, AllowedMIMETypes: opts.AllowedMIMETypes, MaxFileSizeBytes: opts.MaxFileSizeBytes, Disposition: opts.Disposition}
	}
	return s.createResumable(ctx, in, o, true)
}

func (s *Service) createResumable(ctx context.Context, in ResumableInput, o UploadOptions, temporary bool) (*ResumableUpload, error) {
	row, _, _, err := s.insertPending(ctx, InitiateInput{OriginalName: in.OriginalName, ContentType: in.ContentType, SizeBytes: in.SizeBytes}, o, pendingKind{temporary: temporary, resumable: true})
	if err != nil {
		return nil, err
	}
	return &ResumableUpload{ID: row.ID, SizeBytes: row.SizeBytes, ExpiresAt: *row.UploadExpiresAt}, nil
}

// ResumableState is the caller's resumable upload id: its offset, and its
// file once ready. Missing, out of scope, not resumable, failed or
// aborted is ErrNotFound; past its expiry while pending, ErrUploadExpired.
func (s *Service) ResumableState(ctx context.Context, id string) (*ResumableUpload, error) {
	row, dbNow, a, err := s.resumable(ctx, id)
	if err != nil {
		return nil, err
	}
	up, err := s.resumableState(ctx, row, dbNow)
	if err == nil {
		up.read = &readUpload{row: row, dbNow: dbNow, a: a}
	}
	return up, err
}

// resumable loads the caller's resumable upload id.
func (s *Service) resumable(ctx context.Context, id string) (db.UploadedFile, time.Time, access, error) {
	row, dbNow, a, err := s.direct(ctx, OpComplete, id)
	if err == nil && row.ResumableOffset == nil {
		err = ErrNotFound
	}
	return row, dbNow, a, err
}

func (s *Service) resumableState(ctx context.Context, row db.UploadedFile, dbNow time.Time) (*ResumableUpload, error) {
	up := &ResumableUpload{ID: row.ID, SizeBytes: row.SizeBytes, Offset: *row.ResumableOffset, ExpiresAt: *row.UploadExpiresAt}
	switch Status(row.Status) {
	case StatusReady:
		if row.ExpiredAt != nil && !dbNow.Before(*row.ExpiredAt) {
			return nil, ErrExpired
		}
		res, err := s.result(ctx, row, &dbNow)
		if err != nil {
			return nil, err
		}
		up.Offset, up.File = row.SizeBytes, res
	case StatusPending:
		if !dbNow.Before(*row.UploadExpiresAt) {
			return nil, ErrUploadExpired
		}
	case StatusCompleting:
	default:
		return nil, ErrNotFound
	}
	return up, nil
}

// WriteChunk appends c to the caller's resumable upload id under the
// upload's write lease: a chunk for another offset is
// ErrUploadOffsetMismatch, one while another request writes is
// ErrUploadLocked. A chunk whose body ends early, or whose bytes miss its
// declared digest, keeps nothing (ErrChunkIncomplete,
// ErrChunkChecksumMismatch). The chunk that ends the file completes it:
// it streams, after the stored chunks, into the staging object and the
// direct completion runs; its refusal fails the upload durably, a scanner
// without a verdict leaves it pending (send the last chunk again). The
// answer is the upload after the chunk.
func (s *Service) WriteChunk(ctx context.Context, id string, c Chunk) (*ResumableUpload, error) {
	row, dbNow, a, err := s.resumable(ctx, id)
	if err != nil {
		return nil, err
	}
	return s.writeChunk(ctx, row, dbNow, a, c)
}

// WriteChunkTo is WriteChunk on up, as ResumableState answered it to the
// same caller while serving the same request (a tus PATCH reads the
// upload, then writes to it): the row read then is not read again. The
// claim of the write lease checks the scope, the offset and the lease in
// its statement, so a row read a moment before is as good as one read
// now. An up read for another caller, or not by ResumableState, is read
// again.
func (s *Service) WriteChunkTo(ctx context.Context, up *ResumableUpload, c Chunk) (*ResumableUpload, error) {
	if up.read == nil {
		return s.WriteChunk(ctx, up.ID.String(), c)
	}
	a, err := s.authorize(ctx, OpComplete, []uuid.UUID{up.ID}, nil)
	if err != nil {
		return nil, err
	}
	if !a.sameAs(up.read.a) {
		return s.WriteChunk(ctx, up.ID.String(), c)
	}
	return s.writeChunk(ctx, up.read.row, up.read.dbNow, a, c)
}

// writeChunk is WriteChunk on the caller's row read at dbNow.
func (s *Service) writeChunk(ctx context.Context, row db.UploadedFile, dbNow time.Time, a access, c Chunk) (*ResumableUpload, error) {
	switch Status(row.Status) {
	case StatusCompleting:
		// The last chunk arrived and its completion runs, or died: a live
		// one is waited for; a dead one is taken over.
		if row.CompletionLeaseUntil.After(dbNow) {
			return nil, ErrUploadLocked
		}
		if _, err := s.completeRow(ctx, row, dbNow, a); err != nil {
			return nil, err
		}
		return s.ResumableState(ctx, row.ID.String())
	case StatusReady:
		return nil, ErrUploadOffsetMismatch
	}
	if _, err := s.resumableState(ctx, row, dbNow); err != nil {
		return nil, err
	}
	if c.Offset != *row.ResumableOffset {
		return nil, ErrUploadOffsetMismatch
	}
	if c.Length <= 0 || c.Offset+c.Length > row.SizeBytes {
		return nil, ErrInvalidUpload
	}
	claimed, err := s.claimWrite(ctx, row, a, c.Offset)
	if err != nil {
		return nil, err
	}
	lease := claimed.Lease
	w := &chunkWrite{s: s, row: row, a: a, c: c, givenUp: claimed.TrimmedKeys}
	w.keeper = s.keepLease(ctx, row.ID, lease, resumableLease/3, w.extend)
	return w.run(ctx)
}

// claimWrite takes the upload's write lease at offset. While another
// request holds it, it waits for the lease to run out, at most one lease
// and a beat: a writer that died (its server killed) is taken over without
// the client's retry, whose chunk would be refused after it began to send
// it; a live writer keeps extending the lease, and the wait ends in
// ErrUploadLocked. An offset that moved meanwhile is
// ErrUploadOffsetMismatch. The chunks at or past offset are given up in
// the same statement (their keys returned, for the caller to delete).
func (s *Service) claimWrite(ctx context.Context, row db.UploadedFile, a access, offset int64) (db.FileClaimResumableWriteRow, error) {
	var none db.FileClaimResumableWriteRow
	give := time.Now().Add(ResumableClaimWait)
	for {
		claimed, err := s.q.FileClaimResumableWrite(ctx, s.db, db.FileClaimResumableWriteParams{
			ID: row.ID, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, OwnerUserID: a.ownerUserID(),
			AtOffset: offset, Lease: resumableLease, Now: s.now(),
		})
		if err == nil {
			return claimed, nil
		}
		if !isNoRows(err) {
			return none, s.internalError(ctx, ErrUploadFailed, "claim resumable write", err, "file_id", row.ID)
		}
		now, dbNow, _, err := s.resumable(ctx, row.ID.String())
		switch {
		case err != nil:
			return none, err
		case Status(now.Status) != StatusPending || *now.ResumableOffset != offset:
			return none, ErrUploadOffsetMismatch
		case time.Now().After(give):
			return none, ErrUploadLocked
		}
		wait := 10 * time.Millisecond
		if now.ResumableLeaseUntil != nil {
			wait = min(now.ResumableLeaseUntil.Sub(dbNow)+wait, time.Until(give))
		}
		select {
		case <-ctx.Done():
			return none, ctx.Err()
		case <-time.After(max(wait, 10*time.Millisecond)):
		}
	}
}

// chunkWrite is one chunk's write under the upload's write lease.
type chunkWrite struct {
	s      *Service
	row    db.UploadedFile
	a      access
	c      Chunk
	keeper *leaseKeeper
	// givenUp are the keys of the chunks the claim gave up (at or past
	// the offset): their objects are deleted before this chunk is written.
	givenUp []string
}

func (w *chunkWrite) extend(held time.Time) (*time.Time, error) {
	next, err := w.s.q.FileExtendResumableWrite(context.Background(), w.s.db, db.FileExtendResumableWriteParams{
		ID: w.row.ID, Claim: held, Lease: resumableLease, Now: w.s.now(),
	})
	return &next, err
}

// run stores the chunk and advances the offset, or completes the file
// with the chunk that ends it; whatever fails gives the lease back.
func (w *chunkWrite) run(ctx context.Context) (*ResumableUpload, error) {
	s, row, c := w.s, w.row, w.c
	for _, key := range w.givenUp {
		if err := s.store.Delete(ctx, key); err != nil {
			return nil, w.release(ctx, s.internalError(ctx, ErrUploadFailed, "delete chunk", err, "file_id", row.ID))
		}
	}
	if c.Offset+c.Length == row.SizeBytes {
		// The chunk that ends the file is not stored as a chunk: it
		// streams, after the chunks before it, into the staging object.
		staged, err := w.assemble(ctx)
		if err != nil {
			return nil, w.release(ctx, err)
		}
		return w.complete(ctx, staged, c.Offset > 0)
	}
	if err := w.putChunk(ctx); err != nil {
		return nil, w.release(ctx, err)
	}
	lease := w.keeper.stop()
	_, err := s.q.FileAdvanceResumable(ctx, s.db, db.FileAdvanceResumableParams{
		ID: row.ID, AtOffset: c.Offset, NewOffset: c.Offset + c.Length, Size: c.Length, Claim: lease, Now: s.now(),
	})
	if err != nil {
		return nil, w.lost(ctx, err)
	}
	return &ResumableUpload{ID: row.ID, SizeBytes: row.SizeBytes, Offset: c.Offset + c.Length, ExpiresAt: *row.UploadExpiresAt}, nil
}

// putChunk writes the chunk's object after its row, verifying its length
// and digest; a chunk that fails leaves neither.
func (w *chunkWrite) putChunk(ctx context.Context) error {
	s, row, c := w.s, w.row, w.c
	key, err := chunkKey(*row.PendingKey, c.Offset)
	if err != nil {
		return err
	}
	_, err = s.q.ChunkBegin(ctx, s.db, db.ChunkBeginParams{FileID: row.ID, StartOffset: c.Offset, Key: key, MaxChunks: MaxResumableChunks, Now: s.now()})
	switch {
	case isNoRows(err):
		return ErrTooManyChunks
	case err != nil:
		return s.internalError(ctx, ErrUploadFailed, "record chunk", err, "file_id", row.ID)
	}
	body, digest := digested(c.Body, c.SHA256 != nil)
	_, err = s.store.Put(ctx, key, body, storage.PutOptions{Size: c.Length, ContentType: "application/octet-stream"})
	if err == nil && c.SHA256 != nil && !bytes.Equal(digest(), c.SHA256) {
		err = ErrChunkChecksumMismatch
	}
	if err != nil {
		// Given up at once; its object is deleted now when the store
		// answered, and left to the chunk sweep when it did not (waiting
		// on a store that hangs again would double the answer's time).
		deleteNow := !errors.Is(err, storage.ErrUnavailable)
		if terr := s.giveUpChunks(ctx, row.ID, c.Offset, deleteNow); terr != nil {
			s.log.WarnContext(ctx, "drop a failed chunk; the chunk sweep removes it", "file_id", row.ID, "error", terr.Error())
		}
		return w.storeError(ctx, "store chunk", err)
	}
	return nil
}

// storeError maps a failed write of the chunk's bytes: a body that ended
// early is the client's, a digest that differs too; anything else is the
// store's.
func (w *chunkWrite) storeError(ctx context.Context, what string, err error) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return err
	case errors.Is(err, storage.ErrPrecondition):
		return ErrChunkIncomplete
	}
	return w.s.internalError(ctx, ErrUploadFailed, what, err, "file_id", w.row.ID)
}

// assemble writes the upload's staging object: the chunks before this
// one, in order, then this chunk's body, through a spool (the local
// driver's own file; a temporary file on S3) whose SHA-256 the object
// carries; when the chunk declares a digest, its own bytes must match it.
// Chunks that do not cover the file up to this one are the store's state
// (ErrUploadFailed), never the client's; a body that ends early is
// ErrChunkIncomplete. An object an earlier assembly left is replaced.
func (w *chunkWrite) assemble(ctx context.Context) (storage.ObjectInfo, error) {
	s, row, c := w.s, w.row, w.c
	var none storage.ObjectInfo
	var chunks []db.UploadedFileChunk
	if c.Offset > 0 {
		var err error
		if chunks, err = s.q.ChunkList(ctx, s.db, row.ID); err != nil {
			return none, s.internalError(ctx, ErrUploadFailed, "list chunks", err, "file_id", row.ID)
		}
	}
	var at int64
	for _, ch := range chunks {
		if ch.StartOffset != at {
			break
		}
		at += *ch.SizeBytes
	}
	if at != c.Offset {
		return none, s.internalError(ctx, ErrUploadFailed, "assemble chunks", fmt.Errorf("chunks cover %d of the %d bytes before the last", at, c.Offset), "file_id", row.ID)
	}
	stored := &chunkReader{ctx: ctx, store: s.store, chunks: chunks}
	defer stored.close()
	// The chunk's own digest is computed only when it declared one, and is
	// the spool's when the chunk is the whole file.
	body, tail := digested(io.LimitReader(c.Body, c.Length), c.SHA256 != nil && c.Offset > 0)
	sp, err := storage.NewSpool(ctx, s.store, s.cfg.SpoolDir)
	if err != nil {
		return none, s.internalError(ctx, ErrUploadFailed, "create spool", err, "file_id", row.ID)
	}
	defer func() { _ = sp.Close() }()
	n, err := io.Copy(sp, io.MultiReader(stored, body))
	switch {
	case stored.err != nil:
		return none, s.internalError(ctx, ErrUploadFailed, "read chunks", stored.err, "file_id", row.ID)
	case err != nil && errors.Is(err, storage.ErrUnavailable):
		return none, s.internalError(ctx, ErrUploadFailed, "spool the upload", err, "file_id", row.ID)
	case err != nil || n != row.SizeBytes:
		return none, ErrChunkIncomplete
	}
	sum, own := sp.SHA256(), tail()
	if c.Offset == 0 {
		own = sum
	}
	if c.SHA256 != nil && !bytes.Equal(own, c.SHA256) {
		return none, ErrChunkChecksumMismatch
	}
	if err := s.store.Delete(ctx, *row.PendingKey); err != nil {
		return none, s.internalError(ctx, ErrUploadFailed, "clear staging object", err, "file_id", row.ID)
	}
	oi, err := sp.Commit(ctx, *row.PendingKey, storage.PutOptions{ContentType: row.ContentType, Size: row.SizeBytes, SHA256: sum})
	if err != nil {
		return none, s.internalError(ctx, ErrUploadFailed, "write staging object", err, "file_id", row.ID)
	}
	s.faults.wrote(ctx, s.log)
	oi.SHA256 = sum
	return oi, nil
}

// complete claims the completion with the staging object's checksum and
// version, in one statement, and runs the direct completion; the chunks,
// when there are any, go once the file is ready.
func (w *chunkWrite) complete(ctx context.Context, staged storage.ObjectInfo, chunked bool) (*ResumableUpload, error) {
	s, row := w.s, w.row
	lease := w.keeper.stop()
	claimed, err := s.q.FileClaimResumableCompletion(ctx, s.db, db.FileClaimResumableCompletionParams{
		ID: row.ID, Checksum: "sha256:" + base64.StdEncoding.EncodeToString(staged.SHA256), ETag: &staged.ETag,
		CompletionLease: completionLease, Claim: lease, Now: s.now(),
	})
	if err != nil {
		return nil, w.lost(ctx, err)
	}
	res, err := s.completeClaimed(ctx, db.UploadedFile(claimed))
	if err != nil {
		w.giveBack(ctx, lease)
		return nil, err
	}
	if chunked {
		cctx, cancel := detached(ctx)
		defer cancel()
		if err := s.trimChunks(cctx, row.ID, 0); err != nil {
			s.log.WarnContext(ctx, "drop the chunks of a ready upload; the chunk sweep removes them", "file_id", row.ID, "error", err.Error())
		}
	}
	return &ResumableUpload{ID: row.ID, SizeBytes: row.SizeBytes, Offset: row.SizeBytes, ExpiresAt: *row.UploadExpiresAt, File: res}, nil
}

// release stops the keeper, gives the lease back and returns err.
func (w *chunkWrite) release(ctx context.Context, err error) error {
	w.giveBack(ctx, w.keeper.stop())
	return err
}

// giveBack releases lease without moving the offset; zero rows: it was
// taken over, or the upload left pending (completed, failed or reclaimed).
func (w *chunkWrite) giveBack(ctx context.Context, lease time.Time) {
	_, err := w.s.q.FileReleaseResumableWrite(context.WithoutCancel(ctx), w.s.db, db.FileReleaseResumableWriteParams{ID: w.row.ID, Claim: lease})
	if err != nil && !isNoRows(err) {
		w.s.log.WarnContext(ctx, "release resumable write; its lease will run out", "file_id", w.row.ID, "error", err.Error())
	}
}

// lost maps a statement naming the write lease that matched no row: the
// lease ran out and another request took the upload over (its chunk is
// trimmed by that one).
func (w *chunkWrite) lost(ctx context.Context, err error) error {
	if isNoRows(err) {
		return ErrUploadLocked
	}
	return w.s.internalError(ctx, ErrUploadFailed, "record chunk", err, "file_id", w.row.ID)
}

// trimChunks gives up the live chunks of file id at or past from and
// deletes their objects; their rows stay, owning the keys, until the
// chunk sweep deletes each object once more and removes the row.
func (s *Service) trimChunks(ctx context.Context, id uuid.UUID, from int64) error {
	return s.giveUpChunks(ctx, id, from, true)
}

// giveUpChunks is trimChunks, the objects deleted only when deleteNow
// (otherwise the chunk sweep deletes them with their rows).
func (s *Service) giveUpChunks(ctx context.Context, id uuid.UUID, from int64, deleteNow bool) error {
	chunks, err := s.q.ChunkTrim(ctx, s.db, db.ChunkTrimParams{FileID: id, AtOffset: from, Now: s.now()})
	if err != nil {
		return s.internalError(ctx, ErrUploadFailed, "give up chunks", err, "file_id", id)
	}
	if !deleteNow {
		return nil
	}
	for _, ch := range chunks {
		if err := s.store.Delete(ctx, ch.Key); err != nil {
			return s.internalError(ctx, ErrUploadFailed, "delete chunk", err, "file_id", id)
		}
	}
	return nil
}

// sweepChunks deletes, for good, up to max chunks that were given up an
// hour ago or outlived their upload by as much, each object before its
// row.
func (s *Service) sweepChunks(ctx context.Context, max int) (done, claimed int, err error) {
	chunks, err := s.q.ChunkClaimStale(ctx, s.db, db.ChunkClaimStaleParams{Max: int32(max), Grace: chunkGrace, Now: s.now()})
	if err != nil {
		return 0, 0, s.internalError(ctx, ErrCleanupFailed, "claim stale chunks", err)
	}
	for _, ch := range chunks {
		if err := s.store.Delete(ctx, ch.Key); err != nil {
			s.log.WarnContext(ctx, "delete stale chunk failed; the sweep retries in an hour", "file_id", ch.FileID, "error", err.Error())
			continue
		}
		if _, err := s.q.ChunkDrop(ctx, s.db, db.ChunkDropParams{Key: ch.Key, Claim: *ch.TrimmedAt}); err != nil && !isNoRows(err) {
			s.log.ErrorContext(ctx, "drop stale chunk", "file_id", ch.FileID, "error", err.Error())
			continue
		}
		done++
	}
	return done, len(chunks), nil
}

// chunkKey is the key of the chunk at offset of the upload whose staging
// key is staging: beside it, with the offset and a random part, so a
// chunk written again after a trim never reuses a key (a key no row owns
// is never owned again, which the orphan repair relies on).
func chunkKey(staging string, offset int64) (string, error) {
	var r [8]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	key := fmt.Sprintf("%s.chunk-%016d-%s", staging, offset, hex.EncodeToString(r[:]))
	return key, storage.ValidateKey(key)
}

// digested is r, hashed as it is read when hash is set: digest returns the
// SHA-256 of what was read then, nil otherwise. A chunk that declares no
// digest is not hashed twice (the store and the spool hash what they
// write).
func digested(r io.Reader, hash bool) (body io.Reader, digest func() []byte) {
	if !hash {
		return r, func() []byte { return nil }
	}
	h := sha256.New()
	return io.TeeReader(r, h), func() []byte { return h.Sum(nil) }
}

// chunkReader reads stored chunks one after the other, each opened when
// the one before it ends; err keeps the store's error (a failure of the
// store, not of the client whose bytes follow).
type chunkReader struct {
	ctx    context.Context
	store  storage.Store
	chunks []db.UploadedFileChunk
	cur    io.ReadCloser
	err    error
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for {
		if r.cur == nil {
			if len(r.chunks) == 0 {
				return 0, io.EOF
			}
			rc, err := r.store.Open(r.ctx, r.chunks[0].Key, nil)
			if err != nil {
				r.err = err
				return 0, err
			}
			r.cur, r.chunks = rc, r.chunks[1:]
		}
		n, err := r.cur.Read(p)
		switch {
		case errors.Is(err, io.EOF):
			_ = r.cur.Close()
			r.cur = nil
			if n == 0 {
				continue
			}
			err = nil
		case err != nil:
			r.err = err
		}
		return n, err
	}
}

func (r *chunkReader) close() {
	if r.cur != nil {
		_ = r.cur.Close()
	}
}

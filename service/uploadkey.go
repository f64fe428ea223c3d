package service

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/uploadedfile/uploadedfile/db"
)

// Idempotency keys of buffer uploads live on the file's own row
// (db/queries/file_buffer_upload.sql): the insert that reserves the file
// claims the key, so a keyed upload costs one more index entry, not a key
// row of its own with its claim and its answer (docs/decisions.md, "A
// buffer upload's key on its file's row").

// idempotencyKeyIndex is the unique index a retry's insert fails on.
const idempotencyKeyIndex = "uploaded_file_idempotency_key_unique"

// inFlightRetry is the longest Retry-After of a retry that found its key's
// first upload still storing its bytes.
const inFlightRetry = 5 * time.Second

// UploadKey is the Idempotency-Key of one buffer upload (WithUploadKey).
type UploadKey struct {
	key      string
	request  []byte
	replayed bool
}

// NewUploadKey is key for a buffer upload. request names what the upload's
// own inputs do not -- for HTTP, the route, the path and the media type --
// and is the same for the same request; the upload's fingerprint is
// request with the file's name, declared type, options, provenance, extra
// data and the SHA-256 of its bytes (which the upload computes anyway: the
// body is not read twice).
func NewUploadKey(key string, request []byte) *UploadKey {
	return &UploadKey{key: key, request: request}
}

// fingerprint is the SHA-256 of the request k names, of the caller's
// department (a replay under another department is another request: its
// answer would name a file that caller's detail refuses) and of u's inputs
// as the upload resolved them, each part length-prefixed.
func (k *UploadKey) fingerprint(u bufferUpload, department string, vis Visibility, disp Disposition, extra []byte, contentSHA256 []byte) []byte {
	h := sha256.New()
	var n [8]byte
	part := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	m := u.meta
	if m == nil {
		m = &Meta{}
	}
	if department != "" { // callers without one keep the fingerprints they had
		part([]byte("department:" + department))
	}
	for _, p := range []string{u.name, u.declared, string(vis), string(disp), m.Module, m.Entity, m.EntityID, m.Type} {
		part([]byte(p))
	}
	temporary := []byte{0}
	if u.temporary {
		temporary[0] = 1
	}
	part(k.request)
	part(temporary)
	part(extra)
	part(contentSHA256)
	return h.Sum(nil)
}

// Replayed reports whether the upload made nothing: it answered with the
// file the key's first request made.
func (k *UploadKey) Replayed() bool { return k.replayed }

type uploadKeyCtx struct{}

// WithUploadKey has the buffer upload under ctx (Upload and its kin) made
// at most once per key of the caller for IdempotencyRetention: the first
// request stores the key on its file; a retry with the same fingerprint
// answers with that file (k.Replayed), one with another fingerprint, or a
// key used on another route, fails with ErrIdempotencyKeyReused, and one
// while the first still runs with *KeyInFlightError.
func WithUploadKey(ctx context.Context, k *UploadKey) context.Context {
	return context.WithValue(ctx, uploadKeyCtx{}, k)
}

func uploadKeyFrom(ctx context.Context) *UploadKey {
	k, _ := ctx.Value(uploadKeyCtx{}).(*UploadKey)
	return k
}

// KeyInFlightError means a request under the key is still running (its file is
// hidden under a live activation lease); RetryAfter is when to look again
// (at most 5 seconds). errors.Is matches ErrIdempotencyInFlight.
type KeyInFlightError struct{ RetryAfter time.Duration }

func (e *KeyInFlightError) Error() string { return ErrIdempotencyInFlight.Code }

// Is matches ErrIdempotencyInFlight.
func (e *KeyInFlightError) Is(target error) bool { return target == ErrIdempotencyInFlight }

// keyTaken is what an insert under a key that is not free found: the row
// to answer with, or an error; retry: the key was freed, insert again.
type keyTaken struct {
	row   db.UploadedFile
	retry bool
}

// insertKeyed runs FileInsertHidden with p (which carries k and its
// fingerprint) and, when the key is taken, answers from the row that holds
// it: replay (k.replayed, the ready file), ErrIdempotencyKeyReused,
// *KeyInFlightError, or, once the dead or deleted row let go of the key,
// insert again (three tries). Any other error of the insert is
// insertError's.
func (s *Service) insertKeyed(ctx context.Context, a access, k *UploadKey, p db.FileInsertHiddenParams) (db.UploadedFile, error) {
	for range 3 {
		row, err := s.uploads.InsertHidden(ctx, p)
		switch {
		case err == nil:
			return db.UploadedFile(row), nil
		case db.KeyElsewhere(err): // the key names another route's request
			return db.UploadedFile{}, ErrIdempotencyKeyReused
		case !db.UniqueViolation(err, idempotencyKeyIndex):
			return db.UploadedFile{}, s.insertError(ctx, a, p.SizeBytes, "insert hidden upload", err)
		}
		taken, err := s.keyTaken(ctx, a, k, p.IdempotencyFingerprint)
		if err != nil || !taken.retry {
			return taken.row, err
		}
	}
	return db.UploadedFile{}, ErrUploadCompleting // the key kept changing under us: retry later
}

// keyTaken reads the row that holds k and says what its retry gets.
func (s *Service) keyTaken(ctx context.Context, a access, k *UploadKey, fp []byte) (keyTaken, error) {
	got, err := s.q.FileGetByIdempotencyKey(ctx, s.db, db.FileGetByIdempotencyKeyParams{
		TenantCode: a.scope.TenantCode, UserID: a.scope.UserID, IdempotencyKey: k.key, Now: s.now(),
	})
	switch {
	case isNoRows(err):
		return keyTaken{retry: true}, nil // gone meanwhile: the key is free
	case err != nil:
		return keyTaken{}, s.internalError(ctx, ErrUploadFailed, "read upload key", err)
	}
	row := got.UploadedFile
	switch {
	case row.DeletionPendingAt != nil || row.DeletedAt != nil || !row.CreatedAt.After(got.DBNow.Add(-IdempotencyRetention)):
		return s.forgetKey(ctx, row, k)
	case !bytes.Equal(row.IdempotencyFingerprint, fp):
		return keyTaken{}, ErrIdempotencyKeyReused
	case row.Status == string(StatusReady) && row.UploadPendingAt == nil:
		k.replayed = true
		return keyTaken{row: row}, nil
	case row.UploadPendingAt != nil && row.UploadPendingAt.After(got.DBNow):
		// Most likely the first request is storing its bytes and answers
		// in moments: look again soon, not when its lease would run out.
		return keyTaken{}, &KeyInFlightError{RetryAfter: min(row.UploadPendingAt.Sub(got.DBNow), inFlightRetry)}
	case row.UploadPendingAt != nil:
		// The first request died between its insert and its activation:
		// settle its row as it would have (its exact marker), then insert
		// again. Whatever the settling answers, the next insert tells.
		_, _ = s.settleFailedUpload(ctx, a, row.ID, *row.UploadPendingAt, "", nil)
		return keyTaken{retry: true}, nil
	}
	return keyTaken{}, ErrIdempotencyKeyReused // not a buffer upload's row
}

// forgetKey frees k from row (being deleted, or claimed too long ago).
func (s *Service) forgetKey(ctx context.Context, row db.UploadedFile, k *UploadKey) (keyTaken, error) {
	if _, err := s.q.FileForgetIdempotencyKey(ctx, s.db, db.FileForgetIdempotencyKeyParams{
		ID: row.ID, IdempotencyKey: k.key, Retention: IdempotencyRetention, Now: s.now(),
	}); err != nil {
		return keyTaken{}, s.internalError(ctx, ErrUploadFailed, "free upload key", err)
	}
	return keyTaken{retry: true}, nil
}

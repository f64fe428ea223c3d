package service

import (
	"bytes"
	"context"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/storage"
	"github.com/uploadedfile/uploadedfile/internal/storage/local"
)

// The local driver's upload target is self-contained, like a presigned S3
// PUT: PUT {host}/{downloadPath}/{id}/content?expires=…&signature=…, with
// exactly the headers UploadTarget lists (Content-Type and
// X-Checksum-Sha256, both signed) and no bearer token. The signature is an
// HMAC-SHA256 over the file id, the expiry, the exact size, the content type
// and the checksum, with a key every replica shares through the database
// (uploaded_file_signing_key). The write then takes the same locked path as
// an authenticated content PUT.

// ChecksumHeader carries the base64 SHA-256 of the bytes a local upload
// target receives (the local x-amz-checksum-sha256): the local driver's own
// presigned-PUT header.
const ChecksumHeader = local.ChecksumHeader

// Query parameters of a signed local upload target.
const (
	signedExpires   = "expires"
	signedSignature = "signature"
)

// signingKeyPurpose names the key the upload targets are signed with.
const signingKeyPurpose = "upload-target"

// SignedContent is what a request to a signed local upload target carries
// besides its body: the URL's query and the headers the signature covers.
type SignedContent struct {
	Query         url.Values
	ContentType   string
	ContentLength int64
	Checksum      string // the X-Checksum-Sha256 header
}

// IsSigned reports whether q is a signed upload target's query (the request
// carries its own authorization instead of a bearer token).
func IsSigned(q url.Values) bool { return q.Get(signedSignature) != "" }

// ContentReceipt is what a content write answers: the pending file and the
// ETag of the staging object written (what an S3 PUT answers with).
type ContentReceipt struct {
	File *Result
	ETag string
}

// signingKeys caches the shared key, loaded once per service, and the
// download grants' sealer derived from it.
type signingKeys struct {
	mu     sync.Mutex
	key    []byte
	grants atomic.Pointer[cipher.AEAD]
}

// signingKey returns the key the replicas share, creating it on first use.
func (s *Service) signingKey(ctx context.Context) ([]byte, error) {
	s.keys.mu.Lock()
	defer s.keys.mu.Unlock()
	if s.keys.key != nil {
		return s.keys.key, nil
	}
	fresh := make([]byte, 32)
	_, _ = rand.Read(fresh)
	key, err := s.q.SigningKeyEnsure(ctx, s.db, db.SigningKeyEnsureParams{Purpose: signingKeyPurpose, Secret: fresh})
	if err != nil {
		return nil, err
	}
	s.keys.key = key
	return key, nil
}

// signature is the HMAC of one upload target. Every field is length-
// prefixed, so no two targets share a message.
func signature(key []byte, id string, expires int64, size int64, contentType, checksum string) string {
	mac := hmac.New(sha256.New, key)
	for _, f := range []string{"uploadedfile-content-put", id, strconv.FormatInt(expires, 10), strconv.FormatInt(size, 10), contentType, checksum} {
		mac.Write([]byte(strconv.Itoa(len(f)) + ":" + f + "\n"))
	}
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// localTarget is the signed content URL of a pending local upload.
func (s *Service) localTarget(ctx context.Context, row db.UploadedFile, sum []byte) (UploadTarget, error) {
	key, err := s.signingKey(ctx)
	if err != nil {
		return UploadTarget{}, err
	}
	expires := *row.UploadExpiresAt
	b64 := base64.StdEncoding.EncodeToString(sum)
	q := url.Values{
		signedExpires:   {strconv.FormatInt(expires.Unix(), 10)},
		signedSignature: {signature(key, row.ID.String(), expires.Unix(), row.SizeBytes, row.ContentType, b64)},
	}
	return UploadTarget{
		Method:    http.MethodPut,
		URL:       s.cfg.Host + "/" + s.cfg.DownloadPath + "/" + row.ID.String() + "/content?" + q.Encode(),
		Headers:   map[string]string{"Content-Type": row.ContentType, ChecksumHeader: b64},
		ExpiresAt: expires,
	}, nil
}

// PutUploadContent writes the staging object of a pending direct upload
// from r, for the caller in ctx (the local driver's content route with a
// bearer token; on S3 the client writes to the presigned URL instead and
// this is ErrNotFound). The bytes must be exactly the declared size and
// checksum, and the staging object is written once.
//
// The bytes are received into an unnamed spool first; the staging name is
// linked to them only inside a transaction that holds a share lock on the
// still-pending row (FileLockPendingContent), so a completion, abort or
// sweep either waits for the link or has already moved the row on, and then
// the write is refused and nothing is left. Answers: the target expired
// (ErrUploadExpired); the bytes are not the declared ones
// (ErrUploadVerificationFailed, rule content.mismatch, retryable: the row
// stays pending and can be written again); content already written, or the
// upload completing or ready (ErrInvalidUpload, rule
// content.already-written); the upload failed (ErrUploadVerificationFailed,
// final).
func (s *Service) PutUploadContent(ctx context.Context, id string, r io.Reader) (*Result, error) {
	rc, err := s.WriteUploadContent(ctx, id, r)
	if err != nil {
		return nil, err
	}
	return rc.File, nil
}

// WriteUploadContent is PutUploadContent answering with the ETag of the
// object written too.
func (s *Service) WriteUploadContent(ctx context.Context, id string, r io.Reader) (*ContentReceipt, error) {
	if s.store.Kind() == storage.KindS3 {
		return nil, ErrNotFound
	}
	row, dbNow, a, err := s.direct(ctx, OpPutContent, id)
	if err != nil {
		return nil, err
	}
	if err := contentRefusal(row.Status, row.UploadExpiresAt, dbNow); err != nil {
		return nil, err
	}
	sum, err := parseChecksum(deref(row.Checksum))
	if err != nil {
		return nil, ErrUploadVerificationFailed
	}
	return s.receiveContent(ctx, r, row.SizeBytes, sum, func(tx db.Tx) (db.UploadedFile, error) {
		return s.q.FileLockPendingContent(ctx, tx, db.FileLockPendingContentParams{ID: row.ID, TenantCode: a.scope.TenantCode, Now: s.now()})
	}, func() error { return s.scopedMovedOn(ctx, id) })
}

// WriteSignedContent writes the staging object through the local driver's
// self-contained upload target: the signature, its expiry and the signed
// headers (Content-Type, Content-Length, X-Checksum-Sha256) are checked
// before any byte is read or any row is looked at -- a bad or tampered
// signature, or a header that differs from the signed one, is
// ErrUploadTargetInvalid (like S3's SignatureDoesNotMatch), an expired one
// ErrUploadExpired -- then the write takes PutUploadContent's locked path
// and answers as it does.
func (s *Service) WriteSignedContent(ctx context.Context, id string, req SignedContent, r io.Reader) (*ContentReceipt, error) {
	if s.store.Kind() == storage.KindS3 {
		return nil, ErrNotFound
	}
	uid, err := uuid.Parse(id)
	if err != nil {
		return nil, ErrUploadTargetInvalid
	}
	expires, err := strconv.ParseInt(req.Query.Get(signedExpires), 10, 64)
	if err != nil {
		return nil, ErrUploadTargetInvalid
	}
	key, err := s.signingKey(ctx)
	if err != nil {
		return nil, s.internalError(ctx, ErrUploadFailed, "load the signing key", err)
	}
	want := signature(key, uid.String(), expires, req.ContentLength, req.ContentType, req.Checksum)
	if !hmac.Equal([]byte(want), []byte(req.Query.Get(signedSignature))) {
		return nil, ErrUploadTargetInvalid
	}
	if !s.clock().Before(time.Unix(expires, 0)) {
		return nil, ErrUploadExpired
	}
	sum, err := base64.StdEncoding.DecodeString(req.Checksum)
	if err != nil || len(sum) != sha256.Size {
		return nil, ErrUploadTargetInvalid
	}
	// The signature names this id's size, type and checksum, which never
	// change: the locked row is the one signed for.
	return s.receiveContent(ctx, r, req.ContentLength, sum, func(tx db.Tx) (db.UploadedFile, error) {
		return s.q.FileLockPendingContentSigned(ctx, tx, db.FileLockPendingContentSignedParams{ID: uid, Now: s.now()})
	}, func() error { return s.signedMovedOn(ctx, uid) })
}

// receiveContent spools r (exactly size bytes whose SHA-256 is sum), then
// links the staging object inside a transaction whose lock returns the
// still-pending row; when the lock finds none, movedOn gives the answer.
func (s *Service) receiveContent(ctx context.Context, r io.Reader, size int64, sum []byte, lock func(db.Tx) (db.UploadedFile, error), movedOn func() error) (*ContentReceipt, error) {
	sp, err := s.spool(ctx, r, size)
	if SizeOnly(err) {
		return nil, verificationFailed(RuleContentMismatch, true)
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = sp.Close() }()
	if sp.Size() != size || !bytes.Equal(sp.sum, sum) {
		return nil, verificationFailed(RuleContentMismatch, true)
	}
	var row db.UploadedFile
	var written storage.ObjectInfo
	err = s.inOneTx(ctx, func(tx db.Tx) error {
		var err error
		row, err = lock(tx)
		switch {
		case isNoRows(err):
			return movedOn()
		case err != nil:
			return s.internalError(ctx, ErrUploadFailed, "lock pending upload", err)
		}
		written, err = sp.Commit(ctx, *row.PendingKey, storage.PutOptions{ContentType: row.ContentType, Size: row.SizeBytes, SHA256: sum})
		switch {
		case errors.Is(err, storage.ErrExists):
			return invalidUpload(RuleContentWritten)
		case errors.Is(err, storage.ErrPrecondition):
			return verificationFailed(RuleContentMismatch, true)
		case err != nil:
			return s.internalError(ctx, ErrUploadFailed, "write staging object", err, "file_id", row.ID)
		}
		s.faults.wrote(ctx, s.log)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &ContentReceipt{File: resultFromRow(row, URL{}), ETag: written.ETag}, nil
}

// contentRefusal is the answer to a content write on a direct upload in
// status with the given upload expiry, or nil when its target is live.
func contentRefusal(status string, expires *time.Time, dbNow time.Time) error {
	switch Status(status) {
	case StatusPending:
		if expires == nil || !dbNow.Before(*expires) {
			return ErrUploadExpired
		}
		return nil
	case StatusFailed:
		return verificationFailed(RuleContentMismatch, false)
	default: // completing, ready: the content was written and verified
		return invalidUpload(RuleContentWritten)
	}
}

// scopedMovedOn answers a content write whose row left pending between the
// first read and the lock: it reads the row again (ErrNotFound when it was
// aborted or deleted meanwhile).
func (s *Service) scopedMovedOn(ctx context.Context, id string) error {
	row, dbNow, _, err := s.direct(ctx, OpPutContent, id)
	if err != nil {
		return err
	}
	if err := contentRefusal(row.Status, row.UploadExpiresAt, dbNow); err != nil {
		return err
	}
	return ErrUploadExpired // still pending: only the expiry can have refused the lock
}

// signedMovedOn is scopedMovedOn for a signed target, by id (the signature
// authorized it): aborted, deleted and missing uploads are ErrNotFound.
func (s *Service) signedMovedOn(ctx context.Context, id uuid.UUID) error {
	st, err := s.q.FileGetUploadState(ctx, s.db, db.FileGetUploadStateParams{ID: id, Now: s.now()})
	switch {
	case isNoRows(err):
		return ErrNotFound
	case err != nil:
		return s.internalError(ctx, ErrUploadFailed, "read upload state", err, "file_id", id)
	case st.DeletionPendingAt != nil || st.DeletedAt != nil:
		return ErrNotFound
	}
	return contentRefusal(st.Status, nil, st.DBNow) // still pending: only the expiry can have refused the lock
}

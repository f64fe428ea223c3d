package service

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/filecheck"
	"github.com/uploadedfile/uploadedfile/internal/objectkey"
	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// InitiateInput is the four parts a direct
// upload declares up front.
type InitiateInput struct {
	OriginalName string
	ContentType  string
	SizeBytes    int64
	// Checksum is "sha256:<base64 of the 32-byte digest>".
	Checksum string
}

// UploadTarget is a provider-neutral, one-object upload instruction: send
// the bytes with Method to URL with exactly Headers before ExpiresAt --
// nothing else, no credentials: on S3 a presigned PUT, on the local driver
// the service's own content route, signed the same way. Headers lists only
// headers a browser may set (the length follows from the body).
type UploadTarget struct {
	Method    string
	URL       string
	Headers   map[string]string
	ExpiresAt time.Time
}

// InitiateResult is the new file's id, its
// upload target, and its private pending metadata.
type InitiateResult struct {
	ID     uuid.UUID
	Upload UploadTarget
	File   *Result
}

// InitiateUpload starts a direct upload: the declared name, type and size
// are checked like a buffer upload's, the row is persisted (pending, with a
// private staging key, a distinct final key, the upload expiry and the
// in-flight cleanup lease) and only then is the target returned.
func (s *Service) InitiateUpload(ctx context.Context, in InitiateInput, opts *UploadOptions) (*InitiateResult, error) {
	o := derefOptions(opts)
	return s.initiate(ctx, in, o, false)
}

// InitiateTemporaryUpload is InitiateUpload for a temporary file: always
// private, expiring 24 hours after completion; it takes no visibility or
// lifetime.
func (s *Service) InitiateTemporaryUpload(ctx context.Context, in InitiateInput, opts *TemporaryUploadOptions) (*InitiateResult, error) {
	var o UploadOptions
	if opts != nil {
		o = UploadOptions{ContentType: opts.ContentType, AllowedMIMETypes: opts.AllowedMIMETypes, MaxFileSizeBytes: opts.MaxFileSizeBytes, Disposition: opts.Disposition}
	}
	return s.initiate(ctx, in, o, true)
}

// browserMaySet: a header a script may set on a request (not one the
// browser sets itself, such as Content-Length or Host).
func browserMaySet(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Content-Length", "Host", "Connection", "Expect", "Transfer-Encoding":
		return false
	}
	return true
}

// parseChecksum reads "sha256:<base64>"; any other form or algorithm is
// ErrInvalidMeta.
func parseChecksum(c string) ([]byte, error) {
	algo, value, ok := strings.Cut(c, ":")
	if !ok || algo != "sha256" {
		return nil, ErrInvalidMeta
	}
	sum, err := base64.StdEncoding.DecodeString(value)
	if err != nil || len(sum) != 32 {
		return nil, ErrInvalidMeta
	}
	return sum, nil
}

func (s *Service) initiate(ctx context.Context, in InitiateInput, o UploadOptions, temporary bool) (*InitiateResult, error) {
	row, a, sum, err := s.insertPending(ctx, in, o, pendingKind{temporary: temporary})
	if err != nil {
		return nil, err
	}
	target, err := s.target(ctx, row, sum, s.cfg.uploadURLTTL)
	if err != nil {
		// The row exists but no target was handed out: abort it durably.
		if claimed, cerr := s.q.FileClaimAbort(ctx, s.db, db.FileClaimAbortParams{
			ID: row.ID, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, DeletionLease: deletionLease, Now: s.now(),
		}); cerr == nil {
			cctx, cancel := detached(ctx)
			defer cancel()
			s.finishDeletion(cctx, db.UploadedFile(claimed))
		}
		return nil, s.internalError(ctx, ErrUploadFailed, "create upload target", err, "file_id", row.ID)
	}
	return &InitiateResult{ID: row.ID, Upload: target, File: resultFromRow(row, URL{})}, nil
}

// pendingKind: what kind of pending direct-lifecycle row insertPending
// writes.
type pendingKind struct {
	temporary bool
	// resumable: the bytes arrive in chunks (no checksum is declared up
	// front; the row starts at offset 0 and lives for the resumable TTL).
	resumable bool
}

// insertPending checks a direct or resumable upload's declaration like a
// buffer upload's (the declared name, type and size; the checksum unless
// resumable) and persists its pending row, reserving its quota, with a
// private staging key, a distinct final key, the upload expiry and the
// in-flight cleanup lease. It returns the row, the caller's access and the
// declared checksum (nil when resumable).
func (s *Service) insertPending(ctx context.Context, in InitiateInput, o UploadOptions, kind pendingKind) (db.UploadedFile, access, []byte, error) {
	var none db.UploadedFile
	a, err := s.authorize(ctx, OpCreate, nil, nil)
	if err != nil {
		return none, a, nil, err
	}
	if in.ContentType == "" {
		return none, a, nil, ErrInvalidMeta
	}
	if err := s.storeUp(ctx); err != nil {
		return none, a, nil, s.internalError(ctx, ErrUploadFailed, "the store did not answer a probe: no upload begun", err)
	}
	var sum []byte
	checksum, ttl, offset := &in.Checksum, s.cfg.uploadURLTTL, (*int64)(nil)
	if kind.resumable {
		checksum, ttl, offset = nil, s.cfg.resumableTTL, ptr(int64(0))
	} else if sum, err = parseChecksum(in.Checksum); err != nil {
		return none, a, nil, err
	}
	vis, disp, err := s.uploadModes(o.Visibility, o.Disposition, kind.temporary)
	if err != nil {
		return none, a, nil, err
	}
	checked, err := s.cfg.policy.Narrow(o.AllowedMIMETypes, o.MaxFileSizeBytes).CheckMeta(filecheck.Meta{Name: in.OriginalName, DeclaredType: in.ContentType, Size: in.SizeBytes})
	if err != nil {
		return none, a, nil, s.checkError(ctx, err)
	}
	id := newFileID(ctx)
	final, staging, err := objectkey.Pair(s.cfg.Folder, a.scope.TenantCode, a.scope.DepartmentCode, id, checked.Extension, vis == Public)
	if err != nil {
		return none, a, nil, ErrInvalidMeta
	}
	tb, tf, ob, of := s.quotaDefaults()
	inserted, err := s.q.FileInsertPending(ctx, s.db, db.FileInsertPendingParams{
		ID: id, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, UserID: a.scope.UserID,
		Key: final, CDN: s.persistedCDN(id, final, vis), PendingKey: &staging, OriginalName: checked.Name, SizeBytes: in.SizeBytes, ContentType: checked.ContentType,
		Visibility: string(vis), Disposition: string(disp), IsTemporary: kind.temporary, Checksum: checksum, ResumableOffset: offset,
		UploadTTL: ttl, CleanupLease: ttl + completionLease + directCleanupGrace, Now: s.now(),
		DefaultTenantBytes: tb, DefaultTenantFiles: tf, DefaultOwnerBytes: ob, DefaultOwnerFiles: of,
	})
	if err != nil {
		return none, a, nil, s.insertError(ctx, a, in.SizeBytes, "insert pending upload", err)
	}
	return db.UploadedFile(inserted), a, sum, nil
}

// target builds the upload instructions: a presigned PUT of the staging key
// valid for ttl, never past the row's upload expiry (S3), or the signed
// content route (local, which signs the row's expiry itself).
func (s *Service) target(ctx context.Context, row db.UploadedFile, sum []byte, ttl time.Duration) (UploadTarget, error) {
	expires := *row.UploadExpiresAt
	if s.store.Kind() != storage.KindS3 {
		return s.localTarget(ctx, row, sum)
	}
	p, err := s.store.PresignPut(ctx, *row.PendingKey, storage.PresignPutOptions{
		ContentType: row.ContentType, Size: row.SizeBytes, SHA256: sum, Expires: ttl,
	})
	if err != nil {
		return UploadTarget{}, err
	}
	h := make(map[string]string, len(p.Header))
	for k, v := range p.Header {
		if browserMaySet(k) {
			h[k] = strings.Join(v, ",")
		}
	}
	return UploadTarget{Method: p.Method, URL: p.URL, Headers: h, ExpiresAt: expires}, nil
}

// ResumeUpload answers an initiate again for the caller's pending direct
// upload id -- an idempotent initiate whose first answer was lost: the same
// id and file, and a target that expires when the upload does (never
// later: the staging copy's re-PUT guarantee rests on it). A file that is
// not a pending upload of the caller is ErrNotFound; an expired one,
// ErrUploadExpired.
func (s *Service) ResumeUpload(ctx context.Context, id string) (*InitiateResult, error) {
	row, dbNow, _, err := s.direct(ctx, OpComplete, id)
	if err != nil {
		return nil, err
	}
	if Status(row.Status) != StatusPending {
		return nil, ErrNotFound
	}
	ttl := row.UploadExpiresAt.Sub(dbNow).Truncate(time.Second)
	if ttl < time.Second {
		return nil, ErrUploadExpired
	}
	sum, err := parseChecksum(deref(row.Checksum))
	if err != nil {
		return nil, ErrNotFound
	}
	target, err := s.target(ctx, row, sum, ttl)
	if err != nil {
		return nil, s.internalError(ctx, ErrUploadFailed, "create upload target", err, "file_id", row.ID)
	}
	return &InitiateResult{ID: row.ID, Upload: target, File: resultFromRow(row, URL{})}, nil
}

// direct authorizes op and loads the direct upload id within the scope.
func (s *Service) direct(ctx context.Context, op Operation, id string) (db.UploadedFile, time.Time, access, error) {
	uid, err := parseID(id)
	if err != nil {
		return db.UploadedFile{}, time.Time{}, access{}, err
	}
	a, err := s.authorize(ctx, op, []uuid.UUID{uid}, nil)
	if err != nil {
		return db.UploadedFile{}, time.Time{}, access{}, err
	}
	row, err := s.q.FileGetDirect(ctx, s.db, db.FileGetDirectParams{
		ID: uid, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, OwnerUserID: a.ownerUserID(), Now: s.now(),
	})
	if err != nil {
		return db.UploadedFile{}, time.Time{}, access{}, s.lookupError(ctx, err)
	}
	return row.UploadedFile, row.DBNow, a, nil
}

// CompleteUpload verifies the staging object with metadata and bounded
// ranged reads (size, type, checksum, version; signatures from the leading
// bytes; the OOXML structure over the central directory), claims the
// completion (pending -> completing, with a lease), promotes the object to
// its final key without streaming it through the service, verifies the
// final object and finalizes (completing -> ready). Completing a ready file
// returns it again. Wrong bytes fail the upload durably
// (ErrUploadVerificationFailed); an expired target is ErrUploadExpired;
// another live completer is ErrUploadCompleting; an expired completion
// lease is taken over.
func (s *Service) CompleteUpload(ctx context.Context, id string) (*Result, error) {
	row, dbNow, a, err := s.direct(ctx, OpComplete, id)
	if err != nil {
		return nil, err
	}
	return s.completeRow(ctx, row, dbNow, a)
}

// completeRow is CompleteUpload of the caller's row read at dbNow.
func (s *Service) completeRow(ctx context.Context, row db.UploadedFile, dbNow time.Time, a access) (*Result, error) {
	switch Status(row.Status) {
	case StatusReady:
		if row.ExpiredAt != nil && !dbNow.Before(*row.ExpiredAt) {
			return nil, ErrExpired
		}
		return s.result(ctx, row, &dbNow)
	case StatusCompleting:
		if row.CompletionLeaseUntil.After(dbNow) {
			return nil, ErrUploadCompleting
		}
		staging, err := s.stagingVersion(ctx, row)
		if err != nil {
			return nil, err
		}
		taken, err := s.q.FileTakeOverCompletion(ctx, s.db, db.FileTakeOverCompletionParams{
			ID: row.ID, TenantCode: a.scope.TenantCode, ETag: staging, ExpiredLease: *row.CompletionLeaseUntil,
			CompletionLease: completionLease, Now: s.now(),
		})
		if err != nil {
			return nil, s.claimLost(ctx, err)
		}
		return s.completeClaimed(ctx, taken)
	case StatusPending:
		if !dbNow.Before(*row.UploadExpiresAt) {
			return nil, ErrUploadExpired
		}
		if row.ResumableOffset != nil {
			return nil, ErrNotFound // its last chunk completes it
		}
		staging, err := s.stagingVersion(ctx, row)
		if err != nil {
			return nil, err
		}
		claimed, err := s.q.FileClaimCompletion(ctx, s.db, db.FileClaimCompletionParams{
			ID: row.ID, TenantCode: a.scope.TenantCode, ETag: staging, CompletionLease: completionLease, Now: s.now(),
		})
		if err != nil {
			return nil, s.claimLost(ctx, err)
		}
		return s.completeClaimed(ctx, claimed)
	default:
		return nil, ErrNotFound
	}
}

// stagingVersion returns the ETag of the staging object, or of the final
// object when a previous completer already promoted and unlinked the
// staging name. No object at all: nothing was uploaded yet.
func (s *Service) stagingVersion(ctx context.Context, row db.UploadedFile) (*string, error) {
	oi, err := s.store.Stat(ctx, *row.PendingKey)
	if errors.Is(err, storage.ErrNotFound) {
		oi, err = s.store.Stat(ctx, row.Key)
	}
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return nil, verificationFailed(RuleContentMissing, true)
	case err != nil:
		return nil, s.internalError(ctx, ErrUploadFailed, "stat staging object", err, "file_id", row.ID)
	}
	return &oi.ETag, nil
}

// claimLost maps a completion claim that matched no row.
func (s *Service) claimLost(ctx context.Context, err error) error {
	if isNoRows(err) {
		return ErrUploadCompleting
	}
	return s.internalError(ctx, ErrUploadFailed, "claim completion", err)
}

// completeClaimed runs the completion while holding the lease in row. It
// keeps the lease alive while it verifies, scans and promotes (the lease is
// short: the one a killed completer leaves runs out soon and the client's
// retry takes the upload over), then ends the completion in one statement
// naming the lease in force: ready, failed (a *refusal), or pending again
// (the scanner gave no verdict).
func (s *Service) completeClaimed(ctx context.Context, row db.UploadedFile) (*Result, error) {
	keeper := s.keepCompletion(ctx, row)
	final, retain, err := s.promoteClaimed(ctx, row)
	row.CompletionLeaseUntil = ptr(keeper.stop())
	var refused *refusal
	var noVerdict *scanUnavailable
	switch {
	case errors.As(err, &refused):
		return nil, s.failUploadWith(ctx, row, refused.rule, refused.reason, refused.answer)
	case errors.As(err, &noVerdict):
		s.releaseCompletion(ctx, row)
		return nil, noVerdict.err
	case err != nil:
		return nil, err
	}
	width, height := s.imageSize(ctx, row)
	ready, err := s.q.FileFinalizeCompletion(ctx, s.db, db.FileFinalizeCompletionParams{
		ID: row.ID, Lease: *row.CompletionLeaseUntil, FinalETag: optional(final.ETag), RetainStaging: retain,
		ClockSkew: targetClockSkew, Width: pixels(width), Height: pixels(height), Now: s.now(),
	})
	if isNoRows(err) {
		s.lostAfterPromote(ctx, row)
	}
	if err != nil {
		return nil, s.claimLost(ctx, err)
	}
	s.observeUpload(ready.SizeBytes)
	return s.result(ctx, db.UploadedFile(ready), nil)
}

// promoteClaimed verifies and scans the staging object, promotes it to the
// final key and verifies the final object; retain reports that the
// staging object stays for the staging sweep (S3). A verdict against the
// upload is a *refusal, a scanner without a verdict a *scanUnavailable; it
// writes no row.
func (s *Service) promoteClaimed(ctx context.Context, row db.UploadedFile) (final storage.ObjectInfo, retain bool, err error) {
	sum, err := parseChecksum(deref(row.Checksum))
	if err != nil {
		return final, false, refuse(RuleContentMismatch, "bad declared checksum")
	}
	final, err = s.store.Stat(ctx, row.Key)
	if errors.Is(err, storage.ErrNotFound) {
		if err := s.verifyStaging(ctx, row, sum); err != nil {
			return final, false, err
		}
		if err := s.scanStaging(ctx, row); err != nil {
			return final, false, err
		}
		final, err = s.store.Promote(ctx, *row.PendingKey, row.Key, deref(row.ETag), storage.PromoteOptions{Public: isPublic(row)})
		switch {
		case errors.Is(err, storage.ErrExists):
			final, err = s.store.Stat(ctx, row.Key)
		case errors.Is(err, storage.ErrPrecondition), errors.Is(err, storage.ErrNotFound):
			return final, false, refuse(RuleContentChanged, "staging object changed after verification")
		}
	}
	if err != nil {
		return final, false, s.internalError(ctx, ErrUploadFailed, "promote upload", err, "file_id", row.ID)
	}
	if final.Size != row.SizeBytes || !bytes.Equal(final.SHA256, sum) {
		return final, false, refuse(RuleContentMismatch, "final object does not match the declaration")
	}
	retain = s.store.Kind() == storage.KindS3
	if !retain {
		// Local: the final name is a hard link; drop the staging name now.
		if err := s.store.Delete(ctx, *row.PendingKey); err != nil {
			return final, false, s.internalError(ctx, ErrUploadFailed, "unlink staging name", err, "file_id", row.ID)
		}
	}
	return final, retain, nil
}

// imageSize is the upright size an image's final object declares in its
// header (one ranged read of at most imageheader.MaxHeader bytes); 0, 0
// for other types and for a header that cannot be read.
func (s *Service) imageSize(ctx context.Context, row db.UploadedFile) (width, height int) {
	ra := &objectReaderAt{ctx: ctx, store: s.store, key: row.Key}
	return filecheck.Dimensions(row.ContentType, ra, row.SizeBytes)
}

// refusal is a completion check's verdict against the upload: the rule it
// broke, why, and the answer (nil: verification failed with the rule).
type refusal struct {
	rule, reason string
	answer       error
}

func (r *refusal) Error() string { return "upload refused: " + r.reason }

// refuse is the verification failure of rule.
func refuse(rule, reason string) *refusal {
	return &refusal{rule: rule, reason: reason, answer: verificationFailed(rule, false)}
}

// scanUnavailable: the scan gate got no verdict (err says why); the upload
// goes back to pending so the client can complete it again.
type scanUnavailable struct{ err error }

func (e *scanUnavailable) Error() string { return e.err.Error() }
func (e *scanUnavailable) Unwrap() error { return e.err }

// releaseCompletion gives a completing upload back to pending (the holder
// of the lease in row); a release that fails leaves the lease to run out.
func (s *Service) releaseCompletion(ctx context.Context, row db.UploadedFile) {
	if _, err := s.q.FileReleaseCompletion(context.WithoutCancel(ctx), s.db, db.FileReleaseCompletionParams{
		ID: row.ID, Lease: *row.CompletionLeaseUntil, Now: s.now(),
	}); err != nil && !isNoRows(err) {
		s.log.WarnContext(ctx, "release completion failed; its lease will run out", "file_id", row.ID, "error", err.Error())
	}
}

// isPublic: the row's object is publicly readable (a temporary file never is).
func isPublic(row db.UploadedFile) bool {
	return Visibility(row.Visibility) == Public && !row.IsTemporary
}

// lostAfterPromote runs when a completer that promoted the final object
// finds its lease lost. When the row was taken over by another completer,
// that one owns the final object and nothing is done. When the row is
// being deleted (a pending sweep reclaimed it while this completer
// stalled), it can never become ready again, and the final object this
// completer may have created after the sweep deleted it would be an
// orphan: it is deleted here. Should this completer die before, the sweep's
// order (staging before final) still leaves no final object behind: a
// promotion needs the staging object the sweep deletes first.
func (s *Service) lostAfterPromote(ctx context.Context, row db.UploadedFile) {
	state, err := s.q.FileGetUploadState(ctx, s.db, db.FileGetUploadStateParams{ID: row.ID, Now: s.now()})
	if err != nil || state.DeletionPendingAt == nil && state.DeletedAt == nil {
		return
	}
	cctx, cancel := detached(ctx)
	defer cancel()
	if err := s.store.Delete(cctx, row.Key); err != nil {
		s.log.WarnContext(ctx, "delete final object of a reclaimed upload", "file_id", row.ID, "error", err.Error())
	}
}

// verifyStaging checks the staging object against the declaration with
// metadata and bounded ranged reads; wrong bytes are a *refusal (the upload
// fails durably).
func (s *Service) verifyStaging(ctx context.Context, row db.UploadedFile, sum []byte) error {
	oi, err := s.store.Stat(ctx, *row.PendingKey)
	if err != nil {
		return s.internalError(ctx, ErrUploadFailed, "stat staging object", err, "file_id", row.ID)
	}
	switch {
	case oi.ETag != deref(row.ETag):
		return refuse(RuleContentChanged, "staging object changed after the claim")
	case oi.Size != row.SizeBytes:
		return refuse(RuleContentMismatch, "size differs from the declaration")
	case !bytes.Equal(oi.SHA256, sum):
		return refuse(RuleContentMismatch, "checksum differs from the declaration")
	case oi.ContentType != "" && oi.ContentType != row.ContentType:
		return refuse(RuleTypeMismatch, "content type differs from the declaration")
	}
	ra := &objectReaderAt{ctx: ctx, store: s.store, key: *row.PendingKey}
	_, _, err = s.cfg.policy.CheckStored(filecheck.Meta{Name: row.OriginalName, DeclaredType: row.ContentType, Size: row.SizeBytes}, ra)
	if ra.err != nil {
		return s.internalError(ctx, ErrUploadFailed, "read staging object", ra.err, "file_id", row.ID)
	}
	if err != nil {
		return refuse(filecheck.RuleOf(err), "content check")
	}
	return nil
}

// failUploadWith fails a completing upload durably (with a deletion claim
// in the same statement, by the holder of the lease in row), deletes its
// objects and answers refused; a lost lease is reported as such.
func (s *Service) failUploadWith(ctx context.Context, row db.UploadedFile, rule, reason string, refused error) error {
	s.log.InfoContext(ctx, "direct upload refused", "file_id", row.ID, "rule", rule, "reason", reason)
	failed, err := s.q.FileFailCompletion(ctx, s.db, db.FileFailCompletionParams{
		ID: row.ID, Lease: *row.CompletionLeaseUntil, DeletionLease: deletionLease, Rule: rule, Now: s.now(),
	})
	if err != nil {
		return s.claimLost(ctx, err)
	}
	cctx, cancel := detached(ctx)
	defer cancel()
	s.finishDeletion(cctx, db.UploadedFile(failed))
	return refused
}

// AbortUpload aborts a pending direct upload durably: a deletion claim,
// then its objects, then the soft delete (kept as a tombstone until the
// upload target can no longer be written). A completing upload is
// ErrUploadCompleting.
func (s *Service) AbortUpload(ctx context.Context, id string) error {
	row, _, a, err := s.direct(ctx, OpAbort, id)
	if err != nil {
		return err
	}
	if Status(row.Status) != StatusPending {
		if Status(row.Status) == StatusCompleting {
			return ErrUploadCompleting
		}
		return ErrNotFound
	}
	claimed, err := s.q.FileClaimAbort(ctx, s.db, db.FileClaimAbortParams{
		ID: row.ID, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, OwnerUserID: a.ownerUserID(),
		DeletionLease: deletionLease, Now: s.now(),
	})
	switch {
	case isNoRows(err):
		return ErrUploadCompleting // claimed by a completer meanwhile
	case err != nil:
		return s.internalError(ctx, ErrDeleteFailed, "claim abort", err, "file_id", row.ID)
	}
	cctx, cancel := detached(ctx)
	defer cancel()
	s.finishDeletion(cctx, db.UploadedFile(claimed))
	return nil
}

// objectReaderAt reads an object through ranged reads, remembering the
// first storage error (so a storage failure is not mistaken for bad bytes).
type objectReaderAt struct {
	ctx   context.Context
	store storage.Store
	key   string
	err   error
}

func (o *objectReaderAt) ReadAt(p []byte, off int64) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	rc, err := o.store.Open(o.ctx, o.key, &storage.Range{Offset: off, Length: int64(len(p))})
	if err != nil {
		if errors.Is(err, storage.ErrInvalidArgument) {
			return 0, io.EOF
		}
		o.err = err
		return 0, err
	}
	defer rc.Close()
	n, err := io.ReadFull(rc, p)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return n, io.EOF
	}
	if err != nil {
		o.err = err
	}
	return n, err
}

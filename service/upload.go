package service

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/filecheck"
	"github.com/uploadedfile/uploadedfile/internal/objectkey"
	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// bufferUpload is one server-side upload, whatever its API flavour.
type bufferUpload struct {
	op          Operation
	src         io.Reader
	name        string
	declared    string
	allowed     []string
	maxSize     int64
	visibility  Visibility
	disposition Disposition
	temporary   bool
	meta        *Meta
	extra       any
}

// UploadLegacy is the legacy buffer upload: it stores src under fileName
// with optional provenance and extra data and returns the entity, with its
// key and cdn.
func (s *Service) UploadLegacy(ctx context.Context, src io.Reader, fileName string, meta *Meta, extraData any, opts *UploadOptions) (*File[json.RawMessage], error) {
	o := derefOptions(opts)
	row, err := s.upload(ctx, bufferUpload{
		op: OpLegacy, src: src, name: fileName, declared: o.ContentType, allowed: o.AllowedMIMETypes, maxSize: o.MaxFileSizeBytes,
		visibility: o.Visibility, disposition: o.Disposition, meta: meta, extra: extraData,
	})
	if err != nil {
		return nil, err
	}
	return fileFromRow(row, row.ExtraData), nil
}

// Upload is the managed buffer upload: it stores src under originalName
// and returns the result with a URL to read it.
func (s *Service) Upload(ctx context.Context, src io.Reader, originalName string, opts *UploadOptions) (*Result, error) {
	o := derefOptions(opts)
	row, err := s.upload(ctx, bufferUpload{
		op: OpCreate, src: src, name: originalName, declared: o.ContentType, allowed: o.AllowedMIMETypes, maxSize: o.MaxFileSizeBytes,
		visibility: o.Visibility, disposition: o.Disposition,
	})
	if err != nil {
		return nil, err
	}
	return s.result(ctx, row, nil)
}

// UploadTemporaryLegacy is the legacy temporary upload: private, expiring
// 24 hours after it completes; it returns the key and cdn. Options that set
// a visibility are refused with ErrInvalidMeta.
func (s *Service) UploadTemporaryLegacy(ctx context.Context, src io.Reader, fileName string, opts *UploadOptions) (*LegacyTemporaryResult, error) {
	o := derefOptions(opts)
	if o.Visibility != "" {
		return nil, ErrInvalidMeta
	}
	row, err := s.upload(ctx, bufferUpload{
		op: OpLegacy, src: src, name: fileName, declared: o.ContentType, allowed: o.AllowedMIMETypes, maxSize: o.MaxFileSizeBytes,
		disposition: o.Disposition, temporary: true,
	})
	if err != nil {
		return nil, err
	}
	return &LegacyTemporaryResult{Key: row.Key, CDN: deref(row.CDN), ID: row.ID, File: fileFromRow(row, row.ExtraData)}, nil
}

// UploadTemporary is the managed temporary upload: private, expiring 24
// hours after it completes.
func (s *Service) UploadTemporary(ctx context.Context, src io.Reader, originalName string, opts *TemporaryUploadOptions) (*Result, error) {
	var o TemporaryUploadOptions
	if opts != nil {
		o = *opts
	}
	row, err := s.upload(ctx, bufferUpload{
		op: OpCreate, src: src, name: originalName, declared: o.ContentType, allowed: o.AllowedMIMETypes, maxSize: o.MaxFileSizeBytes,
		disposition: o.Disposition, temporary: true,
	})
	if err != nil {
		return nil, err
	}
	return s.result(ctx, row, nil)
}

func derefOptions(o *UploadOptions) UploadOptions {
	if o == nil {
		return UploadOptions{}
	}
	return *o
}

// deref is *p, or T's zero value for nil.
func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// upload runs a buffer upload: authorize, validate everything before any
// write, spool and check the bytes, persist the hidden row, write, activate;
// on any failure after the row exists, the settled cleanup.
func (s *Service) upload(ctx context.Context, u bufferUpload) (db.UploadedFile, error) {
	a, err := s.authorize(ctx, u.op, nil, nil)
	if err != nil {
		return db.UploadedFile{}, err
	}
	vis, disp, err := s.uploadModes(u.visibility, u.disposition, u.temporary)
	if err != nil {
		return db.UploadedFile{}, err
	}
	if err := validMeta(u.meta); err != nil {
		return db.UploadedFile{}, err
	}
	extra, err := extraDataJSON(u.extra)
	if err != nil {
		return db.UploadedFile{}, err
	}
	policy := s.cfg.policy.Narrow(u.allowed, u.maxSize)
	sp, err := s.spool(ctx, u.src, policy.MaxFileSizeBytes)
	if err != nil {
		return db.UploadedFile{}, err
	}
	defer func() { _ = sp.Close() }()
	checked, _, err := policy.Check(filecheck.Meta{Name: u.name, DeclaredType: u.declared, Size: sp.Size()}, sp)
	if err != nil {
		return db.UploadedFile{}, s.checkError(ctx, err)
	}
	row, err := s.insertHidden(ctx, a, checked, sp, vis, disp, u, extra)
	if err != nil {
		return db.UploadedFile{}, err
	}
	if k := uploadKeyFrom(ctx); k != nil && k.replayed {
		return row, nil // the key's first request made it: nothing is written
	}
	keeper := s.keepActivation(ctx, row)
	if err := s.scan(ctx, io.NewSectionReader(sp, 0, sp.Size()), row); err != nil {
		// Not written yet: the settled cleanup fails the row (upload.failed
		// with the rule) and gives its space back.
		_, _ = s.settleFailedUpload(ctx, a, row.ID, keeper.stop(), Rule(err), err)
		return db.UploadedFile{}, err
	}
	return s.writeAndActivate(ctx, a, row, sp, vis, keeper)
}

// uploadModes resolves visibility and disposition: temporary files are
// private; public needs allowPublicUploads.
func (s *Service) uploadModes(v Visibility, d Disposition, temporary bool) (Visibility, Disposition, error) {
	switch d {
	case "":
		d = DispositionAttachment
	case DispositionInline, DispositionAttachment:
	default:
		return "", "", ErrInvalidMeta
	}
	if temporary {
		return Private, d, nil
	}
	switch v {
	case "":
		return s.cfg.DefaultVisibility, d, nil
	case Private:
		return Private, d, nil
	case Public:
		if !s.cfg.AllowPublicUploads {
			return "", "", ErrPublicUploadDisabled
		}
		return Public, d, nil
	default:
		return "", "", ErrInvalidMeta
	}
}

// checkError maps a file-check refusal to ErrInvalidUpload, keeping its rule.
func (s *Service) checkError(ctx context.Context, err error) error {
	var fe *filecheck.Error
	if errors.As(err, &fe) {
		s.log.InfoContext(ctx, "upload refused", "rule", fe.Rule)
		return &ruleError{code: ErrInvalidUpload, rule: fe.Rule, sizeOnly: fe.SizeOnly(), limit: fe.Limit}
	}
	return s.internalError(ctx, ErrUploadFailed, "upload check failed", err)
}

func (s *Service) insertHidden(ctx context.Context, a access, c filecheck.Result, sp *spooled, vis Visibility, disp Disposition, u bufferUpload, extra json.RawMessage) (db.UploadedFile, error) {
	id := newFileID(ctx)
	key, err := objectkey.Key{Folder: s.cfg.Folder, Tenant: a.scope.TenantCode, Department: a.scope.DepartmentCode, ID: id, Ext: c.Extension, Public: vis == Public && !u.temporary}.String()
	if err != nil {
		return db.UploadedFile{}, ErrInvalidMeta // a tenant or department too long for a key
	}
	m := u.meta
	if m == nil {
		m = &Meta{}
	}
	tb, tf, ob, of := s.quotaDefaults()
	p := db.FileInsertHiddenParams{
		ID: id, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, UserID: a.scope.UserID,
		Key: key, CDN: s.persistedCDN(id, key, vis), OriginalName: c.Name, SizeBytes: sp.Size(), ContentType: c.ContentType,
		Visibility: string(vis), Disposition: string(disp), IsTemporary: u.temporary, Checksum: ptr(sp.checksum()),
		ExtraData: extra, Module: optional(m.Module), Entity: optional(m.Entity), EntityID: optional(m.EntityID), Type: optional(m.Type),
		Width: pixels(c.Width), Height: pixels(c.Height), ActivationLease: ActivationLease, Now: s.now(),
		DefaultTenantBytes: tb, DefaultTenantFiles: tf, DefaultOwnerBytes: ob, DefaultOwnerFiles: of,
	}
	if k := uploadKeyFrom(ctx); k != nil {
		p.IdempotencyKey, p.IdempotencyFingerprint = &k.key, k.fingerprint(u, deref(a.scope.DepartmentCode), vis, disp, extra, sp.sum)
		return s.insertKeyed(ctx, a, k, p)
	}
	row, err := s.uploads.InsertHidden(ctx, p)
	if err != nil {
		return db.UploadedFile{}, s.insertError(ctx, a, sp.Size(), "insert hidden upload", err)
	}
	return db.UploadedFile(row), nil
}

// writeAndActivate writes the bytes and activates the row with the exact
// marker keeper holds once the write ends (rules 1-2); any failure goes to
// the settled cleanup (rules 3-5).
func (s *Service) writeAndActivate(ctx context.Context, a access, row db.UploadedFile, sp *spooled, vis Visibility, keeper *leaseKeeper) (db.UploadedFile, error) {
	oi, err := sp.Commit(ctx, row.Key, storage.PutOptions{
		ContentType: row.ContentType, Size: sp.Size(), SHA256: sp.sum, Public: vis == Public,
	})
	marker := keeper.stop()
	if err == nil {
		s.faults.wrote(ctx, s.log)
		var active db.FileActivateUploadRow
		active, err = s.uploads.ActivateUpload(ctx, db.FileActivateUploadParams{
			ID: row.ID, UploadMarker: marker, Checksum: ptr(sp.checksum()), ETag: optional(oi.ETag), Now: s.now(),
		})
		if err == nil {
			s.observeUpload(active.SizeBytes)
			return db.UploadedFile(active), nil
		}
	}
	// A store that failed for its own state (no space, read-only, an I/O
	// error) starts an episode the operator reads in the log and on
	// /readyz, as every other failed write does.
	s.faults.failed(ctx, s.log, err)
	s.log.WarnContext(ctx, "upload write or activation failed; cleaning up", "file_id", row.ID, "error", err.Error())
	return s.settleFailedUpload(ctx, a, row.ID, marker, "", err)
}

// settleFailedUpload is the settled cleanup of a buffer upload whose write
// or activation failed (or whose writer died: a retry under its key runs
// it for the writer, keyTaken). It claims the row for deletion with the exact
// upload marker before touching storage (rule 3); when that CAS misses it
// reads the current state: an activation that committed is a success
// (rule 4); a row maintenance took over is restored to hidden pending with
// this writer's claim, from its exact state (rule 5). Then the object is
// deleted and the claim settled, or released for the sweeps (rule 6).
//
// rule, when set, is why (its upload.failed event carries it); cause is
// the failure being settled: the answer is ErrUploadFailed, as the outage
// of its dependency when it was one (classifyFailure).
func (s *Service) settleFailedUpload(ctx context.Context, a access, id uuid.UUID, marker time.Time, rule string, cause error) (db.UploadedFile, error) {
	cctx, cancel := detached(ctx)
	defer cancel()
	failed := classifyFailure(ErrUploadFailed, cause)
	claimed, err := s.q.FileSettleFailedUpload(cctx, s.db, db.FileSettleFailedUploadParams{ID: id, UploadMarker: marker, DeletionLease: deletionLease, Rule: optional(rule), Now: s.now()})
	if err == nil {
		s.finishUnlessStoreDown(cctx, db.UploadedFile(claimed), failed)
		return db.UploadedFile{}, failed
	}
	if !isNoRows(err) {
		// The row keeps its upload marker: once the lease expires the
		// deletion-retry sweep removes it and its object.
		return db.UploadedFile{}, s.internalError(ctx, ErrUploadFailed, "settle failed upload", err, "file_id", id)
	}
	for range 3 {
		st, err := s.q.FileGetUploadState(cctx, s.db, db.FileGetUploadStateParams{ID: id, Now: s.now()})
		if err != nil {
			return db.UploadedFile{}, failed
		}
		if st.Status == string(StatusReady) && st.UploadPendingAt == nil && st.DeletionPendingAt == nil && st.DeletedAt == nil {
			// The activation committed; only its response was lost.
			row, err := s.q.FileGetVisible(cctx, s.db, db.FileGetVisibleParams{ID: id, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, Now: s.now()})
			if err != nil {
				return db.UploadedFile{}, failed
			}
			return row.UploadedFile, nil
		}
		restored, err := s.q.FileRestoreUploadForCleanup(cctx, s.db, db.FileRestoreUploadForCleanupParams{
			ID: id, UploadMarker: st.UploadPendingAt, DeletionMarker: st.DeletionPendingAt, DeletedMarker: st.DeletedAt,
			DeletionLease: deletionLease, Now: s.now(),
		})
		if err == nil {
			s.finishUnlessStoreDown(cctx, db.UploadedFile(restored), failed)
			return db.UploadedFile{}, failed
		}
		if !isNoRows(err) {
			break
		}
	}
	return db.UploadedFile{}, failed
}

// finishUnlessStoreDown deletes a failed upload's object under the claim
// just taken, unless the failure was the store not answering: then the
// deletion would wait on the same store, and the answer with it, so the
// claim is left for the deletion sweep (its lease ends, the sweep takes
// it over) and the caller is answered at once.
func (s *Service) finishUnlessStoreDown(ctx context.Context, row db.UploadedFile, failed error) {
	if dep, down := Unavailable(failed); down && dep == DependencyStorage {
		s.log.InfoContext(ctx, "failed upload left to the deletion sweep: the store did not answer", "file_id", row.ID)
		return
	}
	s.finishDeletion(ctx, row)
}

// persistedCDN is the legacy cdn reference stored with the row: the public
// URL of a public file when a CDN base is configured (legacy callers read
// it as such); otherwise an opaque, stable reference, urn:uploadedfile:<id>,
// that exact-reference operations accept and no response ever carries.
func (s *Service) persistedCDN(id uuid.UUID, key string, vis Visibility) *string {
	if vis == Public && s.cfg.CDNBaseURL != "" {
		return ptr(s.cfg.CDNBaseURL + "/" + escapeKey(key))
	}
	return ptr("urn:uploadedfile:" + id.String())
}

// spoolBuffer is the write buffer of the spool.
const spoolBuffer = 256 << 10

// spoolWriters are the spool's write buffers, reused across uploads: a
// fresh 256 KiB buffer per upload was most of a small upload's allocations,
// and the garbage collections they caused a seventh of the server's CPU
// (pprof, 64 KiB uploads × 32). A writer is reset onto nothing before it is
// put back, so it holds no reference to a finished spool.
var spoolWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, spoolBuffer) }}

// spooled is an upload the store holds in a spool while it is checked: the
// checks read it at random offsets without holding it in memory, and
// writing it is a commit -- on the local driver a link, not a second copy.
type spooled struct {
	storage.Spool
	sum []byte // the spool's SHA256, taken once it is complete
}

func (sp *spooled) checksum() string { return "sha256:" + base64.StdEncoding.EncodeToString(sp.sum) }

// spool copies src into a new spool, reading at most max+1 bytes: a larger
// source is refused without reading the rest.
func (s *Service) spool(ctx context.Context, src io.Reader, max int64) (*spooled, error) {
	if src == nil {
		return nil, invalidUpload(filecheck.RuleSizeEmpty)
	}
	sp, err := storage.NewSpool(ctx, s.store, s.cfg.SpoolDir)
	if err != nil {
		return nil, s.internalError(ctx, ErrUploadFailed, "create spool", err)
	}
	// Sources such as a multipart part hand over a few KiB per read; a
	// buffer turns that into few large writes.
	bw := spoolWriters.Get().(*bufio.Writer)
	bw.Reset(sp)
	n, err := io.Copy(bw, io.LimitReader(src, max+1))
	if err == nil {
		err = bw.Flush()
	}
	bw.Reset(nil)
	spoolWriters.Put(bw)
	if err != nil {
		_ = sp.Close()
		if errors.Is(err, storage.ErrUnavailable) {
			return nil, s.internalError(ctx, ErrUploadFailed, "spool the upload", err) // the spool's disk, not the client
		}
		return nil, ErrUploadFailed
	}
	if n > max {
		_ = sp.Close()
		return nil, &ruleError{code: ErrInvalidUpload, rule: filecheck.RuleSizeTooLarge, sizeOnly: true, limit: max}
	}
	return &spooled{Spool: sp, sum: sp.SHA256()}, nil
}

func ptr[T any](v T) *T { return &v }

// pixels is a stored image dimension: nil for 0 (not an image, or its
// header unreadable).
func pixels(n int) *int32 {
	if n <= 0 || n > math.MaxInt32 {
		return nil
	}
	v := int32(n)
	return &v
}

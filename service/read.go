package service

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/filecheck"
	"github.com/uploadedfile/uploadedfile/internal/storage"
)

// Download is a file's bytes and what to serve them with.
type Download struct {
	// Body is the content; the caller closes it. On the local driver it is
	// also an io.ReadSeeker (for Range and conditional requests).
	Body        io.ReadCloser
	FileName    string
	ContentType string
	Disposition Disposition
	// Size is the content's length; when Body is an *os.File, that file's
	// size, read from its descriptor (storage.FileOpener).
	Size         int64
	ETag         string
	LastModified time.Time
}

// Find returns a visible file with a URL to read it. It reads the columns
// its result carries (FileGetDetail), not the row.
func (s *Service) Find(ctx context.Context, id string) (*Result, error) {
	uid, a, err := s.authorizeID(ctx, OpRead, id)
	if err != nil {
		return nil, err
	}
	row, err := s.q.FileGetDetail(ctx, s.db, db.FileGetDetailParams(s.visibleParams(uid, a)))
	if err := s.readError(ctx, err, row.Expired); err != nil {
		return nil, err
	}
	return s.result(ctx, detailFile(row), &row.DBNow)
}

// detailFile is the part of a file's row that FileGetDetail reads: what
// result and the URL it resolves use.
func detailFile(r db.FileGetDetailRow) db.UploadedFile {
	return db.UploadedFile{
		ID: r.ID, Key: r.Key, CDN: r.CDN, OriginalName: r.OriginalName, SizeBytes: r.SizeBytes,
		ContentType: r.ContentType, Visibility: r.Visibility, Status: r.Status,
		IsTemporary: r.IsTemporary, Disposition: r.Disposition, Checksum: r.Checksum, ETag: r.ETag, Width: r.Width, Height: r.Height,
		ExtraData: r.ExtraData, Module: r.Module, Entity: r.Entity, EntityID: r.EntityID, Type: r.Type,
		CreatedAt: r.CreatedAt, CompletedAt: r.CompletedAt, ExpiredAt: r.ExpiredAt,
	}
}

// ResultOf is the Result of a file a write of this service just returned
// (UploadLegacy, CloneFromURL, UploadTemporaryLegacy's File), with a URL
// to read it, without reading the file again: the answer to a write comes
// from the write.
func (s *Service) ResultOf(ctx context.Context, f *File[json.RawMessage]) (*Result, error) {
	return s.result(ctx, rowOf(f), nil)
}

// FindByID returns a visible file with its extra data decoded as T.
func FindByID[T any](ctx context.Context, s *Service, id string) (*File[T], error) {
	row, _, err := s.visible(ctx, OpRead, id)
	if err != nil {
		return nil, err
	}
	var extra T
	if err := json.Unmarshal(row.UploadedFile.ExtraData, &extra); err != nil {
		return nil, ErrInvalidMeta
	}
	return fileFromRow(row.UploadedFile, extra), nil
}

// ResolveURL returns a URL to read a visible file and the URL's expiry: a
// stable URL (nil expiry) for a public file, a freshly presigned GET for a
// private file (on S3 a presigned GET, on the local driver a granted
// download route; at most privateDownloadUrlTtlSeconds, never past a
// temporary file's expiry). The signed URL is neither persisted nor logged.
func (s *Service) ResolveURL(ctx context.Context, id string) (*URL, error) {
	row, _, err := s.visible(ctx, OpResolveURL, id)
	if err != nil {
		return nil, err
	}
	return s.urlFor(ctx, row.UploadedFile, row.DBNow)
}

// Download returns a visible file's bytes.
func (s *Service) Download(ctx context.Context, id string) (*Download, error) {
	uid, a, err := s.authorizeID(ctx, OpDownload, id)
	if err != nil {
		return nil, err
	}
	row, err := s.q.FileGetDownload(ctx, s.db, db.FileGetDownloadParams(s.visibleParams(uid, a)))
	if err := s.readError(ctx, err, row.Expired); err != nil {
		return nil, err
	}
	return s.openObject(ctx, uid, objectRef{key: row.Key, name: row.OriginalName, contentType: row.ContentType, etag: deref(row.ETag)}, row.Disposition)
}

// DownloadAttached returns the bytes of a file attached exactly to
// attachment. The attached-read policy must approve first (absent: denied;
// only exactly true approves); then the tenant (and department) scope and
// an exact match on the active, used attachment are enforced. The uploader
// is deliberately not part of the lookup.
func (s *Service) DownloadAttached(ctx context.Context, id string, att Attachment) (*Download, error) {
	uid, err := parseID(id)
	if err != nil {
		return nil, err
	}
	rc, ok := RequestContextFrom(ctx)
	if !ok {
		return nil, ErrNotFound
	}
	scope, err := s.resolveScope(rc)
	if err != nil || scope.TenantCode == "" {
		return nil, ErrNotFound
	}
	if att.Module == "" || att.Entity == "" || att.EntityID == "" || validMeta(&Meta{Module: att.Module, Entity: att.Entity, EntityID: att.EntityID}) != nil {
		return nil, ErrNotFound
	}
	if !s.approveAttachedRead(ctx, AttachedReadRequest{Context: rc, Scope: scope, ID: uid, Attachment: att}) {
		return nil, ErrNotFound
	}
	row, err := s.q.FileGetAttached(ctx, s.db, db.FileGetAttachedParams{
		ID: uid, TenantCode: scope.TenantCode, DepartmentCode: scope.DepartmentCode,
		Module: att.Module, Entity: att.Entity, EntityID: att.EntityID, Now: s.now(),
	})
	if err := s.readError(ctx, err, row.Expired); err != nil {
		return nil, err
	}
	f := row.UploadedFile
	return s.openObject(ctx, f.ID, objectRef{key: f.Key, name: f.OriginalName, contentType: f.ContentType, etag: deref(f.ETag)}, f.Disposition)
}

// GetContent is the allowlisted content type of a
// file name's extension and an attachment disposition, or empty values.
func (s *Service) GetContent(fileName string) filecheck.Content {
	return filecheck.GetContent(fileName)
}

// visible authorizes op on id and loads the visible file; an expired
// temporary file is ErrExpired.
func (s *Service) visible(ctx context.Context, op Operation, id string) (db.FileGetVisibleRow, access, error) {
	uid, a, err := s.authorizeID(ctx, op, id)
	if err != nil {
		return db.FileGetVisibleRow{}, access{}, err
	}
	row, err := s.q.FileGetVisible(ctx, s.db, s.visibleParams(uid, a))
	if err := s.readError(ctx, err, row.Expired); err != nil {
		return db.FileGetVisibleRow{}, access{}, err
	}
	return row, a, nil
}

// visibleParams are the parameters of a visible read of uid within a's
// scope. FileGetDetail and FileGetDownload take the same ones, field for
// field: db.FileGetDetailParams(s.visibleParams(uid, a)).
func (s *Service) visibleParams(uid uuid.UUID, a access) db.FileGetVisibleParams {
	return db.FileGetVisibleParams{ID: uid, TenantCode: a.scope.TenantCode, DepartmentCode: a.scope.DepartmentCode, OwnerUserID: a.ownerUserID(), Now: s.now()}
}

// authorizeID parses id and authorizes op on it.
func (s *Service) authorizeID(ctx context.Context, op Operation, id string) (uuid.UUID, access, error) {
	uid, err := parseID(id)
	if err != nil {
		return uuid.UUID{}, access{}, err
	}
	a, err := s.authorize(ctx, op, []uuid.UUID{uid}, nil)
	return uid, a, err
}

// readError answers the read of one visible file: its lookup's error
// (lookupError), ErrExpired for an expired temporary file, nil otherwise.
func (s *Service) readError(ctx context.Context, err error, expired bool) error {
	switch {
	case err != nil:
		return s.lookupError(ctx, err)
	case expired:
		return ErrExpired
	}
	return nil
}

// lookupError: zero rows is ErrNotFound; anything else is logged and
// reported as what it is -- a database that did not answer is
// ErrUnavailable, never "not found".
func (s *Service) lookupError(ctx context.Context, err error) error {
	if isNoRows(err) {
		return ErrNotFound
	}
	return s.internalError(ctx, ErrNotFound, "file lookup failed", err)
}

// openObject opens the object o (of file id) for a download served as its
// name, of its content type, with disposition; a failure is logged (the
// row names an object the store cannot give).
func (s *Service) openObject(ctx context.Context, id uuid.UUID, o objectRef, disposition string) (*Download, error) {
	d := &Download{FileName: o.name, ContentType: o.contentType, Disposition: Disposition(disposition)}
	if err := s.openStored(ctx, d, o.key, o.etag); err != nil {
		return nil, s.internalError(ctx, ErrNotFound, "open stored object", err, "file_id", id)
	}
	return d, nil
}

// openStored fills d's body, size, ETag and modification time from the
// object at key: an open file where the store has one (Range and sendfile),
// its stream otherwise. etag is the object's version when the caller knows
// it (the file's row, a grant; "" otherwise): the store's file opener then
// need not read it. The store's error is returned as it is.
func (s *Service) openStored(ctx context.Context, d *Download, key, etag string) error {
	if fo, ok := s.store.(storage.FileOpener); ok {
		f, oi, err := fo.OpenFile(key, etag)
		if !errors.Is(err, storage.ErrUnsupported) {
			if err == nil {
				d.Body, d.Size, d.ETag, d.LastModified = f, oi.Size, oi.ETag, oi.LastModified
			}
			return err
		}
	}
	oi, err := s.store.Stat(ctx, key)
	if err != nil {
		return err
	}
	body, err := s.store.Open(ctx, key, nil)
	if err != nil {
		return err
	}
	d.Body, d.Size, d.ETag, d.LastModified = body, oi.Size, oi.ETag, oi.LastModified
	return nil
}

// result builds the URL-aware result of a row; dbNow is the database time
// of the read (nil: the row's completion time, just written).
func (s *Service) result(ctx context.Context, row db.UploadedFile, dbNow *time.Time) (*Result, error) {
	now := s.clock()
	if dbNow != nil {
		now = *dbNow
	} else if row.CompletedAt != nil && row.CompletedAt.After(now) {
		now = *row.CompletedAt
	}
	u, err := s.urlFor(ctx, row, now)
	if err != nil {
		return nil, err
	}
	return resultFromRow(row, *u), nil
}

// urlFor resolves the URL of a ready row at database time now.
func (s *Service) urlFor(ctx context.Context, row db.UploadedFile, now time.Time) (*URL, error) {
	return s.objectURL(ctx, row, objectRef{key: row.Key, route: s.downloadURL(row.ID), name: row.OriginalName, contentType: row.ContentType, etag: deref(row.ETag)}, now)
}

// objectRef is an object of a file to resolve a URL for: the file itself
// or one of its variants.
type objectRef struct {
	key, route, name, contentType string
	preset                        string // "" for the file itself
	// etag is the object's version as its row records it ("" when the row
	// records none: a variant, a row older than the column).
	etag string
}

// objectURL resolves the URL of an object of a ready row at database time
// now: the CDN (or the download route) for a public file; for a private
// one a presigned GET on S3, a granted download route on the local driver
// (downloadgrant.go), each valid for privateDownloadUrlTtlSeconds and never
// past a temporary file's expiry.
func (s *Service) objectURL(ctx context.Context, row db.UploadedFile, o objectRef, now time.Time) (*URL, error) {
	if isPublic(row) {
		if s.cfg.CDNBaseURL != "" {
			return &URL{URL: s.cfg.CDNBaseURL + "/" + escapeKey(o.key)}, nil
		}
		return &URL{URL: o.route}, nil
	}
	ttl := s.cfg.privateDownloadTTL
	if row.ExpiredAt != nil && row.ExpiredAt.Sub(now) < ttl {
		ttl = row.ExpiredAt.Sub(now).Truncate(time.Second)
		if ttl < time.Second {
			return nil, ErrExpired
		}
	}
	exp := now.Add(ttl)
	inline := Disposition(row.Disposition) == DispositionInline
	if s.store.Kind() != storage.KindS3 {
		u, err := s.grantedURL(ctx, row.ID, o.preset, o, inline, exp)
		if err != nil {
			return nil, s.internalError(ctx, ErrNotFound, "grant download", err, "file_id", row.ID)
		}
		return &URL{URL: u, URLExpiredAt: &exp}, nil
	}
	p, err := s.store.PresignGet(ctx, o.key, storage.PresignGetOptions{Expires: ttl, ContentDisposition: filecheck.Disposition(o.name, inline), ContentType: o.contentType})
	if err != nil {
		return nil, s.internalError(ctx, ErrNotFound, "presign download", err, "file_id", row.ID)
	}
	return &URL{URL: p.URL, URLExpiredAt: &exp}, nil
}

// downloadURL is the authenticated download route of a file.
func (s *Service) downloadURL(id uuid.UUID) string { return s.fileRoute(id, "download") }

// fileRoute is the URL of one of a file's routes under the download path
// (download, variants/<preset>/download).
func (s *Service) fileRoute(id uuid.UUID, rest string) string {
	return s.cfg.Host + "/" + s.cfg.DownloadPath + "/" + id.String() + "/" + rest
}

// escapeKey escapes each segment of a key for a URL path.
func escapeKey(key string) string {
	segs := strings.Split(key, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return strings.Join(segs, "/")
}

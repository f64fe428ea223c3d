package service

import (
	"encoding/json"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/uploadedfile/uploadedfile/db"
)

// Status is a direct-lifecycle state.
type Status string

// The states.
const (
	StatusPending    Status = "pending"
	StatusCompleting Status = "completing"
	StatusReady      Status = "ready"
	StatusFailed     Status = "failed"
)

// Meta is optional provenance: not an authorization
// decision.
type Meta struct {
	Module   string
	Entity   string
	EntityID string
	Type     string
}

// UploadOptions narrow one upload.
type UploadOptions struct {
	// ContentType is the declared type; it must agree with the extension.
	ContentType string
	// AllowedMIMETypes narrows the configured allowlist (never widens).
	AllowedMIMETypes []string
	// MaxFileSizeBytes lowers the configured limit (never raises).
	MaxFileSizeBytes int64
	// Visibility: public needs allowPublicUploads; default the configured
	// defaultVisibility. Refused for temporary uploads.
	Visibility Visibility
	// Disposition of downloads; default attachment.
	Disposition Disposition
}

// TemporaryUploadOptions narrow a managed temporary upload:
// no visibility and no lifetime can
// be given -- a temporary file is always private and lives 24 hours.
type TemporaryUploadOptions struct {
	ContentType      string
	AllowedMIMETypes []string
	MaxFileSizeBytes int64
	Disposition      Disposition
}

// File is the stored entity (UploadedFile<TExtraData>), with its extra
// data typed as T.
type File[T any] struct {
	ID             uuid.UUID
	TenantCode     string
	DepartmentCode *string
	UserID         string
	// Key and CDN are the legacy storage references; never serialized in
	// end-user HTTP responses.
	Key          string
	CDN          *string
	PendingKey   *string
	OriginalName string
	SizeBytes    int64
	ContentType  string
	Visibility   Visibility
	Status       Status
	IsTemporary  bool
	Disposition  Disposition
	Checksum     *string
	ETag         *string
	// Width and Height: an image's size as shown (after its EXIF
	// orientation), read from its header at upload; nil for other types.
	Width, Height *int32
	ExtraData     T
	Module        *string
	Entity        *string
	EntityID      *string
	Type          *string
	UsedAt        *time.Time
	CompletedAt   *time.Time
	ExpiredAt     *time.Time
	CreatedAt     time.Time
	UpdatedAt     time.Time
}

// Result is the file plus a URL to read it and that
// URL's expiry (nil: stable). Key and CDN are kept for legacy Go callers;
// HTTPResult drops them.
type Result struct {
	ID           uuid.UUID
	Key          string
	CDN          *string
	OriginalName string
	SizeBytes    int64
	ContentType  string
	Visibility   Visibility
	Status       Status
	IsTemporary  bool
	Disposition  Disposition
	Checksum     *string
	// Width and Height: an image's size as shown; nil for other types.
	Width, Height *int32
	ExtraData     json.RawMessage
	Module        *string
	Entity        *string
	EntityID      *string
	Type          *string
	CreatedAt     time.Time
	CompletedAt   *time.Time
	ExpiredAt     *time.Time
	URL           string
	URLExpiredAt  *time.Time
}

// LegacyTemporaryResult is what the legacy uploadTemporary returns.
type LegacyTemporaryResult struct {
	Key string
	CDN string
	// ID is the stored file's id (not part of the legacy shape; for hosts
	// that read the file back).
	ID uuid.UUID
	// File is the stored file as the upload wrote it (not part of the
	// legacy shape; ResultOf turns it into a Result without a read).
	File *File[json.RawMessage]
}

// URL is what resolveUrl returns.
type URL struct {
	URL          string
	URLExpiredAt *time.Time
}

func fileFromRow[T any](r db.UploadedFile, extra T) *File[T] {
	return &File[T]{
		ID: r.ID, TenantCode: r.TenantCode, DepartmentCode: r.DepartmentCode, UserID: r.UserID,
		Key: r.Key, CDN: r.CDN, PendingKey: r.PendingKey, OriginalName: r.OriginalName, SizeBytes: r.SizeBytes,
		ContentType: r.ContentType, Visibility: Visibility(r.Visibility), Status: Status(r.Status),
		IsTemporary: r.IsTemporary, Disposition: Disposition(r.Disposition), Checksum: r.Checksum, ETag: r.ETag,
		Width: r.Width, Height: r.Height,
		ExtraData: extra, Module: r.Module, Entity: r.Entity, EntityID: r.EntityID, Type: r.Type, UsedAt: r.UsedAt,
		CompletedAt: r.CompletedAt, ExpiredAt: r.ExpiredAt, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt,
	}
}

func resultFromRow(r db.UploadedFile, u URL) *Result {
	return &Result{
		ID: r.ID, Key: r.Key, CDN: r.CDN, OriginalName: r.OriginalName, SizeBytes: r.SizeBytes,
		ContentType: r.ContentType, Visibility: Visibility(r.Visibility), Status: Status(r.Status),
		IsTemporary: r.IsTemporary, Disposition: Disposition(r.Disposition), Checksum: r.Checksum,
		Width: r.Width, Height: r.Height,
		ExtraData: r.ExtraData, Module: r.Module, Entity: r.Entity, EntityID: r.EntityID, Type: r.Type,
		CreatedAt: r.CreatedAt, CompletedAt: r.CompletedAt, ExpiredAt: r.ExpiredAt,
		URL: u.URL, URLExpiredAt: u.URLExpiredAt,
	}
}

// rowOf is the part of a file's row its Result is built from.
func rowOf(f *File[json.RawMessage]) db.UploadedFile {
	return db.UploadedFile{
		ID: f.ID, TenantCode: f.TenantCode, DepartmentCode: f.DepartmentCode, UserID: f.UserID,
		Key: f.Key, CDN: f.CDN, PendingKey: f.PendingKey, OriginalName: f.OriginalName, SizeBytes: f.SizeBytes,
		ContentType: f.ContentType, Visibility: string(f.Visibility), Status: string(f.Status),
		IsTemporary: f.IsTemporary, Disposition: string(f.Disposition), Checksum: f.Checksum, ETag: f.ETag,
		Width: f.Width, Height: f.Height,
		ExtraData: f.ExtraData, Module: f.Module, Entity: f.Entity, EntityID: f.EntityID, Type: f.Type, UsedAt: f.UsedAt,
		CompletedAt: f.CompletedAt, ExpiredAt: f.ExpiredAt, CreatedAt: f.CreatedAt, UpdatedAt: f.UpdatedAt,
	}
}

// validMeta checks provenance: each field at most 255 characters, no
// control characters.
func validMeta(m *Meta) error {
	if m == nil {
		return nil
	}
	for _, v := range []string{m.Module, m.Entity, m.EntityID, m.Type} {
		if len([]rune(v)) > maxMetaLength || strings.ContainsFunc(v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return ErrInvalidMeta
		}
	}
	return nil
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// MaxExtraDataBytes bounds a file's extra data as JSON: one patch, and
// the object the patches merge into on the row (ErrExtraDataTooLarge).
const MaxExtraDataBytes = 64 << 10

// extraDataJSON marshals caller data to a JSON object of bounded size; nil
// is the empty object. Anything else is ErrInvalidMeta.
func extraDataJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return json.RawMessage(`{}`), nil
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) > maxExtraDataBytes {
		return nil, ErrInvalidMeta
	}
	if string(b) == "null" {
		return json.RawMessage(`{}`), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(b, &obj); err != nil {
		return nil, ErrInvalidMeta
	}
	return b, nil
}

// changedRow is a row type of a transition query that also writes the
// transition's event (a data-modifying CTE): sqlc gives each its own type,
// with exactly the fields of db.UploadedFile.
type changedRow interface {
	db.FileActivateUploadRow | db.FileSettleFailedUploadRow | db.FileClaimAbortRow | db.FileClaimDeletionRow |
		db.FileClaimDeletionByReferencesRow | db.FileSettleDeletionRow | db.FileFailCompletionRow |
		db.FileFinalizeCompletionRow | db.DeletionClaimExpiredTombstonesRow | db.FileClaimExpiredDirectUploadsRow |
		db.FileClaimExpiredTemporaryRow | db.FileClaimUnusedBeforeRow | db.FileRestoreUploadForCleanupRow |
		db.FileRetireTombstoneRow | db.FileInsertHiddenRow | db.FileInsertPendingRow
}

// changedRows converts the rows of a transition query to the table's model.
func changedRows[R changedRow](rows []R) []db.UploadedFile {
	out := make([]db.UploadedFile, len(rows))
	for i, r := range rows {
		out[i] = db.UploadedFile(r)
	}
	return out
}

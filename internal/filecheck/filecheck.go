// Package filecheck validates an upload before it is stored: its name, its
// declared type against the MIME allowlist, its size, the agreement of
// extension, declared type and content (signatures, UTF-8, JSON), and the
// bounded structure of DOCX, XLSX and PPTX packages.
//
// These are input checks, not malware scanning: a file that passes is of
// the type it claims and within the limits, nothing more.
//
// Every refusal is an *Error with a stable Rule; all of them are the documented
// core.file.invalid-upload (Code), so the service reports them as one code
// while tests and logs can tell the rules apart.
package filecheck

import (
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/uploadedfile/uploadedfile/internal/imageheader"
)

// Size limits (bytes).
const (
	// AbsoluteMaxFileSize is the ceiling no configuration can raise (25 MiB).
	AbsoluteMaxFileSize int64 = 25 << 20
	// DefaultMaxFileSize is the default configured limit (10 MiB).
	DefaultMaxFileSize int64 = 10 << 20
)

// Code is the documented error code of every refusal here.
const Code = "core.file.invalid-upload"

// Rules: the stable identifiers of each refusal.
const (
	RuleNameEmpty         = "name.empty"
	RuleTypeUnknown       = "type.unknown-extension"
	RuleTypeNotAllowed    = "type.not-allowed"
	RuleTypeDeclared      = "type.declared-mismatch"
	RuleSizeEmpty         = "size.empty"
	RuleSizeTooLarge      = "size.too-large"
	RuleContentSignature  = "content.signature"
	RuleContentOtherType  = "content.other-type"
	RuleContentUTF8       = "content.utf8"
	RuleContentNUL        = "content.nul"
	RuleContentJSON       = "content.json"
	RuleZipNoEOCD         = "zip.no-end-record"
	RuleZipZip64          = "zip.zip64"
	RuleZipMultiDisk      = "zip.multi-disk"
	RuleZipTooManyEntries = "zip.too-many-entries"
	RuleZipDirectorySize  = "zip.directory-too-large"
	RuleZipOffsets        = "zip.bad-offsets"
	RuleZipOverlap        = "zip.overlap"
	RuleZipEncrypted      = "zip.encrypted"
	RuleZipMethod         = "zip.method"
	RuleZipUnsafePath     = "zip.unsafe-path"
	RuleZipDuplicatePath  = "zip.duplicate-path"
	RuleZipEntryTooLarge  = "zip.entry-too-large"
	RuleZipTotalTooLarge  = "zip.total-too-large"
	RuleZipRatio          = "zip.ratio"
	RuleZipSizes          = "zip.bad-sizes"
	RuleZipLocalMismatch  = "zip.local-header-mismatch"
	RuleZipExtraField     = "zip.bad-extra-field"
	RuleZipContentTypes   = "zip.missing-content-types"
	RuleZipMainPart       = "zip.missing-main-part"
)

// ErrInvalidUpload matches every refusal of this package with errors.Is.
var ErrInvalidUpload = errors.New(Code)

// Error is one refusal.
type Error struct {
	Rule   string
	Detail string
	// Limit is the bound a size refusal names (bytes), 0 otherwise.
	Limit int64
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s: %s", Code, e.Rule, e.Detail) }

// Is makes errors.Is(err, ErrInvalidUpload) true.
func (e *Error) Is(target error) bool { return target == ErrInvalidUpload }

// Code returns the documented error code.
func (e *Error) Code() string { return Code }

// SizeOnly reports a refusal for the size limit alone (HTTP 413).
func (e *Error) SizeOnly() bool { return e.Rule == RuleSizeTooLarge }

func invalid(rule, format string, args ...any) *Error {
	return &Error{Rule: rule, Detail: fmt.Sprintf(format, args...)}
}

// RuleOf returns the rule of a refusal, or "".
func RuleOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Rule
	}
	return ""
}

// Policy is what an upload is checked against: the configuration, possibly
// narrowed for one call.
type Policy struct {
	// AllowedMIMETypes lists the canonical types allowed.
	AllowedMIMETypes []string
	// MaxFileSizeBytes is the size limit, at most AbsoluteMaxFileSize.
	MaxFileSizeBytes int64
	// ValidateMagicBytes checks content signatures, UTF-8 and JSON. The
	// OOXML structure check runs whatever its value.
	ValidateMagicBytes bool
}

// DefaultPolicy is the documented default configuration.
func DefaultPolicy() Policy {
	return Policy{AllowedMIMETypes: DefaultAllowedMIMETypes(), MaxFileSizeBytes: DefaultMaxFileSize, ValidateMagicBytes: true}
}

// NewPolicy normalizes a configuration: types are canonicalized (an
// unknown type is an error naming it), the size limit defaults to 10 MiB
// and is clamped to the absolute 25 MiB ceiling.
func NewPolicy(allowed []string, maxSize int64, validateMagicBytes bool) (Policy, error) {
	p := Policy{MaxFileSizeBytes: maxSize, ValidateMagicBytes: validateMagicBytes}
	if allowed == nil {
		allowed = DefaultAllowedMIMETypes()
	}
	for _, a := range allowed {
		m, ok := CanonicalMIME(a)
		if !ok {
			return Policy{}, fmt.Errorf("allowedMimeTypes: %q is not a supported type", a)
		}
		if !slices.Contains(p.AllowedMIMETypes, m) {
			p.AllowedMIMETypes = append(p.AllowedMIMETypes, m)
		}
	}
	switch {
	case p.MaxFileSizeBytes < 0:
		return Policy{}, errors.New("maxFileSizeBytes: must be positive")
	case p.MaxFileSizeBytes == 0:
		p.MaxFileSizeBytes = DefaultMaxFileSize
	case p.MaxFileSizeBytes > AbsoluteMaxFileSize:
		p.MaxFileSizeBytes = AbsoluteMaxFileSize
	}
	return p, nil
}

// Narrow returns the policy for one call: its allowed types intersected
// with the call's (nil: unchanged; an unknown type simply allows nothing),
// its size limit lowered to the call's when that is lower (0: unchanged).
// A call can narrow, never widen.
func (p Policy) Narrow(allowed []string, maxSize int64) Policy {
	out := p
	if allowed != nil {
		out.AllowedMIMETypes = nil
		for _, a := range allowed {
			if m, ok := CanonicalMIME(a); ok && slices.Contains(p.AllowedMIMETypes, m) && !slices.Contains(out.AllowedMIMETypes, m) {
				out.AllowedMIMETypes = append(out.AllowedMIMETypes, m)
			}
		}
	}
	if maxSize > 0 && maxSize < out.MaxFileSizeBytes {
		out.MaxFileSizeBytes = maxSize
	}
	return out
}

// Meta is what is known about an upload before its bytes are read.
type Meta struct {
	Name         string // as the client gave it
	DeclaredType string // optional Content-Type the client declared
	Size         int64
}

// Result is an upload's checked identity.
type Result struct {
	Name        string // sanitized
	ContentType string // canonical
	Extension   string // lowercase, without the dot
	// Width and Height are an image's size as shown (after its EXIF
	// orientation), read from its header by Check and CheckStored (at most
	// imageheader.MaxHeader bytes, never a decode); 0 for other types and
	// for an image whose header cannot be read.
	Width, Height int
}

// CheckMeta checks everything that needs no bytes: the name, the type its
// extension names against the allowlist and the declared type, the size.
// Direct uploads run it at initiation.
func (p Policy) CheckMeta(m Meta) (Result, error) {
	name, err := SanitizeName(m.Name)
	if err != nil {
		return Result{}, err
	}
	ext := extensionOf(name)
	t, ok := typeByExtension(ext)
	if !ok {
		return Result{}, invalid(RuleTypeUnknown, "extension %q is not a supported type", ext)
	}
	if !slices.Contains(p.AllowedMIMETypes, t.mime) {
		return Result{}, invalid(RuleTypeNotAllowed, "%s is not allowed", t.mime)
	}
	if m.DeclaredType != "" {
		if d, ok := CanonicalMIME(m.DeclaredType); !ok || d != t.mime {
			return Result{}, invalid(RuleTypeDeclared, "declared type does not match the .%s extension", ext)
		}
	}
	switch {
	case m.Size <= 0:
		return Result{}, invalid(RuleSizeEmpty, "the file is empty")
	case m.Size > p.MaxFileSizeBytes:
		e := invalid(RuleSizeTooLarge, "%d bytes exceed the %d byte limit", m.Size, p.MaxFileSizeBytes)
		e.Limit = p.MaxFileSizeBytes
		return Result{}, e
	}
	return Result{Name: name, ContentType: t.mime, Extension: ext}, nil
}

// Check runs CheckMeta, then checks the content (size bytes readable at
// content): the signature of binary types, UTF-8 (and JSON syntax) of text
// types, and the OOXML structure. It returns how many content bytes it read.
func (p Policy) Check(m Meta, content io.ReaderAt) (Result, int64, error) {
	r, err := p.CheckMeta(m)
	if err != nil {
		return Result{}, 0, err
	}
	cr := &CountingReaderAt{R: content}
	if err = p.checkContent(r, m.Size, cr, false); err == nil {
		r.Width, r.Height = Dimensions(r.ContentType, cr, m.Size)
	}
	return r, cr.N, err
}

// CheckStored is Check for an object already in storage, read through
// ranged reads: the same rules, but text, CSV and JSON are checked on their
// leading bytes only (UTF-8, no NUL, a JSON value's first character), so
// the bytes read stay bounded whatever the size. Binary signatures always
// needed only the leading bytes, and the OOXML check reads the central
// directory and local headers.
func (p Policy) CheckStored(m Meta, content io.ReaderAt) (Result, int64, error) {
	r, err := p.CheckMeta(m)
	if err != nil {
		return Result{}, 0, err
	}
	cr := &CountingReaderAt{R: content}
	if err = p.checkContent(r, m.Size, cr, true); err == nil {
		r.Width, r.Height = Dimensions(r.ContentType, cr, m.Size)
	}
	return r, cr.N, err
}

// Dimensions is the upright size an image of type mime declares in its
// header, read with one read of at most imageheader.MaxHeader bytes (0, 0
// for other types, or when the header cannot be read).
func Dimensions(mime string, content io.ReaderAt, size int64) (width, height int) {
	switch mime {
	case TypePNG, TypeJPEG, TypeGIF, TypeWebP:
	default:
		return 0, 0
	}
	h, err := imageheader.ReadAt(content, size)
	if err != nil {
		return 0, 0
	}
	return h.Upright()
}

// CountingReaderAt counts the bytes read through it.
type CountingReaderAt struct {
	R io.ReaderAt
	N int64
}

// ReadAt implements io.ReaderAt.
func (c *CountingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.R.ReadAt(p, off)
	c.N += int64(n)
	return n, err
}

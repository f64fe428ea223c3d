package service

import "errors"

// Error is a service failure with one of the documented stable codes. Compare
// with errors.Is against the sentinels below; the message is the code and
// never carries storage, policy or database details (those are logged).
type Error struct {
	Code string
}

func (e *Error) Error() string { return e.Code }

// Is matches two errors with the same code.
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}

// The documented error codes.
var (
	// ErrNotFound: missing, malformed id, denied, cross-scope, hidden or
	// deleted -- deliberately indistinguishable.
	ErrNotFound = &Error{Code: "core.file.not-found"}
	// ErrInvalidUpload: the name, type, size or content is refused.
	ErrInvalidUpload = &Error{Code: "core.file.invalid-upload"}
	// ErrInvalidMeta: provenance, extra data, options or a batch are invalid.
	ErrInvalidMeta = &Error{Code: "core.file.invalid-meta"}
	// ErrRemoteDisabled: remote cloning is not enabled.
	ErrRemoteDisabled = &Error{Code: "core.file.remote-disabled"}
	// ErrRemoteFetchFailed: the remote URL could not be fetched safely.
	ErrRemoteFetchFailed = &Error{Code: "core.file.remote-fetch-failed"}
	// ErrUploadExpired: the direct upload target has expired.
	ErrUploadExpired = &Error{Code: "core.file.upload-expired"}
	// ErrUploadCompleting: another instance holds a live completion lease.
	ErrUploadCompleting = &Error{Code: "core.file.upload-completing"}
	// ErrUploadVerificationFailed: the uploaded object is not what was declared.
	ErrUploadVerificationFailed = &Error{Code: "core.file.upload-verification-failed"}
	// ErrPublicUploadDisabled: a public upload without allowPublicUploads.
	ErrPublicUploadDisabled = &Error{Code: "core.file.public-upload-disabled"}
	// ErrExpired: a temporary file read at or after its expiry.
	ErrExpired = &Error{Code: "core.file.expired"}
	// ErrUploadFailed: storing the bytes or the metadata failed.
	ErrUploadFailed = &Error{Code: "core.file.upload-failed"}
	// ErrDeleteFailed: the deletion could not be recorded.
	ErrDeleteFailed = &Error{Code: "core.file.delete-failed"}
	// ErrCleanupFailed: a maintenance sweep failed.
	ErrCleanupFailed = &Error{Code: "core.file.cleanup-failed"}
	// ErrUploadTargetInvalid: a request to a signed local upload target
	// whose signature is wrong or whose signed headers (content type,
	// length, checksum) differ (HTTP 403, like S3's SignatureDoesNotMatch).
	ErrUploadTargetInvalid = &Error{Code: "core.file.upload-target-invalid"}
	// ErrDownloadURLInvalid: a granted download URL (the local driver's
	// signed GET) that is wrong, tampered with, moved to another file or
	// past its expiry (HTTP 403, as S3 answers a presigned GET that is).
	ErrDownloadURLInvalid = &Error{Code: "core.file.download-url-invalid"}
	// ErrIdempotencyKeyReused: the Idempotency-Key was used for another
	// request -- another route, or another body (HTTP 422).
	ErrIdempotencyKeyReused = &Error{Code: "core.idempotency.key-reused"}
	// ErrIdempotencyInFlight: a request with the Idempotency-Key is still
	// running (HTTP 409 with Retry-After; *KeyInFlightError says how long).
	ErrIdempotencyInFlight = &Error{Code: "core.idempotency.in-flight"}
	// ErrExtraDataTooLarge: merging the patch would make the file's extra
	// data longer than MaxExtraDataBytes as JSON (HTTP 413). Nothing was
	// changed.
	ErrExtraDataTooLarge = &Error{Code: "core.file.extra-data-too-large"}
	// ErrConflict: the operation's transaction met a concurrent one that
	// touched the same rows (a deadlock PostgreSQL broke, or a
	// serialization failure) and still did after the service ran it again
	// a few times. Nothing was applied; the database is up and the same
	// call can succeed (HTTP 409 with Retry-After). Never an outage.
	ErrConflict = &Error{Code: "core.database.conflict"}
)

// Rules of a direct upload's content, beside the file-check rules
// (filecheck.Rule*): what a client did or can still do about its own
// upload, never anything about another scope's files.
const (
	// RuleContentMissing: complete found no bytes at the upload target yet
	// (retryable: send them, then complete again).
	RuleContentMissing = "content.missing"
	// RuleContentWritten: the one staging object was already written.
	RuleContentWritten = "content.already-written"
	// RuleContentMismatch: the bytes sent are not the declared size or
	// checksum.
	RuleContentMismatch = "content.mismatch"
	// RuleContentChanged: the uploaded object changed while it was verified.
	RuleContentChanged = "content.changed"
	// RuleTypeMismatch: the object was stored with another content type
	// than declared.
	RuleTypeMismatch = "type.declared-mismatch"
)

// ruleError is one of the documented codes with the rule the upload broke (a
// file-check rule, or one of the Rule* content rules): the message is the
// code alone, errors.Is matches the code, and Rule, Retryable and SizeOnly
// read the rest.
type ruleError struct {
	code *Error
	rule string
	// retryable: nothing is final (no bytes yet, or bytes refused while the
	// upload stays pending).
	retryable bool
	// sizeOnly: refused only for its size (HTTP 413).
	sizeOnly bool
	// limit: the bound a size refusal broke, in bytes (0: none to name).
	limit int64
}

func (e *ruleError) Error() string        { return e.code.Code }
func (e *ruleError) Is(target error) bool { return errors.Is(e.code, target) }

// Unwrap is the code, so errors.As finds the *Error of a refusal.
func (e *ruleError) Unwrap() error { return e.code }

// invalidUpload is ErrInvalidUpload for a file refused by rule.
func invalidUpload(rule string) error { return &ruleError{code: ErrInvalidUpload, rule: rule} }

// verificationFailed is ErrUploadVerificationFailed for an upload whose
// content broke rule; retryable says whether sending the bytes again can
// help (the upload itself did not fail).
func verificationFailed(rule string, retryable bool) error {
	return &ruleError{code: ErrUploadVerificationFailed, rule: rule, retryable: retryable}
}

// Limit returns the bound, in bytes, that a size refusal broke (the
// upload's size limit), or 0 when err names none.
func Limit(err error) int64 {
	var e *ruleError
	if errors.As(err, &e) {
		return e.limit
	}
	return 0
}

// Refused is an upload refused under rule before the service saw it -- by
// the HTTP layer reading its form (multipart.no-file, a body over the
// multipart ceiling); sizeOnly when only its size is over a limit (413).
// It is an ErrInvalidUpload whose Rule is rule.
func Refused(rule string, sizeOnly bool) error {
	return &ruleError{code: ErrInvalidUpload, rule: rule, sizeOnly: sizeOnly}
}

// Rule returns the rule an invalid or failed upload broke (or, for an
// upload the scanner could not judge, RuleScanUnavailable), or "".
func Rule(err error) string {
	var e *ruleError
	if errors.As(err, &e) {
		return e.rule
	}
	var u *UnavailableError
	if errors.As(err, &u) {
		return u.Rule()
	}
	return ""
}

// Retryable reports whether the same call can succeed later without the
// upload being started again: another instance is completing it, a
// dependency failed (ErrUnavailable), or a verification refused bytes that
// can still be sent again. A failed upload, an expired target or a refused
// file is final.
func Retryable(err error) bool {
	if errors.Is(err, ErrUnavailable) {
		return true
	}
	var e *ruleError
	if errors.As(err, &e) {
		return e.retryable
	}
	for _, code := range []*Error{ErrConflict, ErrIdempotencyInFlight, ErrUploadCompleting, ErrUploadFailed, ErrDeleteFailed, ErrCleanupFailed, ErrVariantFailed} {
		if errors.Is(err, code) {
			return true
		}
	}
	return false
}

// SizeOnly reports an invalid upload refused only for its size (HTTP 413).
func SizeOnly(err error) bool {
	var e *ruleError
	return errors.As(err, &e) && e.sizeOnly
}

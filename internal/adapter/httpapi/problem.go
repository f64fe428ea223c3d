package httpapi

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/uploadedfile/uploadedfile/gen/api"
	"github.com/uploadedfile/uploadedfile/service"
)

// ProblemContentType is RFC 9457's media type.
const ProblemContentType = "application/problem+json"

// problem is an RFC 9457 body: a type URI, a title, the status and the
// stable code -- nothing about storage, policy or the database.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Code   string `json:"code"`
	// Rule names what an invalid or failed upload broke (for a UI to show);
	// only ever about the caller's own upload.
	Rule string `json:"rule,omitempty"`
	// Detail is the rule in words a person reads, with the limit it broke
	// where there is one (ruleSentences).
	Detail string `json:"detail,omitempty"`
	// Retryable says whether the same call can succeed later; absent on
	// codes where the question does not arise (not-found, credentials).
	Retryable *bool `json:"retryable,omitempty"`
	// RequestID is the id of the request the problem answers, the one its
	// log lines carry (request_id) and the X-Request-Id header repeats: a
	// person who reports a refusal can be found in the logs. It differs by
	// request, never by resource: a missing file and another tenant's are
	// answered alike but for it.
	RequestID string `json:"requestId,omitempty"`
}

// statusOf maps a service code to its HTTP status (the table in docs/http.md, "Errors").
var statusOf = map[string]int{
	service.ErrNotFound.Code:                 http.StatusNotFound,
	service.ErrInvalidUpload.Code:            http.StatusUnprocessableEntity,
	service.ErrInvalidMeta.Code:              http.StatusBadRequest,
	service.ErrRemoteDisabled.Code:           http.StatusForbidden,
	service.ErrRemoteFetchFailed.Code:        http.StatusBadGateway,
	service.ErrUploadExpired.Code:            http.StatusGone,
	service.ErrUploadCompleting.Code:         http.StatusConflict,
	service.ErrUploadVerificationFailed.Code: http.StatusUnprocessableEntity,
	service.ErrPublicUploadDisabled.Code:     http.StatusForbidden,
	service.ErrExpired.Code:                  http.StatusGone,
	service.ErrUploadFailed.Code:             http.StatusServiceUnavailable,
	service.ErrDeleteFailed.Code:             http.StatusServiceUnavailable,
	service.ErrCleanupFailed.Code:            http.StatusServiceUnavailable,
	service.ErrUploadTargetInvalid.Code:      http.StatusForbidden,
	service.ErrDownloadURLInvalid.Code:       http.StatusForbidden,
	service.ErrQuotaExceeded.Code:            http.StatusRequestEntityTooLarge,
	service.ErrVariantRefused.Code:           http.StatusUnprocessableEntity,
	service.ErrVariantFailed.Code:            http.StatusServiceUnavailable,
	service.ErrIdempotencyKeyReused.Code:     http.StatusUnprocessableEntity,
	service.ErrIdempotencyInFlight.Code:      http.StatusConflict,
	service.ErrConflict.Code:                 http.StatusConflict,
	service.ErrExtraDataTooLarge.Code:        http.StatusRequestEntityTooLarge,
	service.ErrUploadOffsetMismatch.Code:     http.StatusConflict,
	service.ErrUploadLocked.Code:             http.StatusLocked,
	service.ErrChunkChecksumMismatch.Code:    statusChecksumMismatch,
	service.ErrTooManyChunks.Code:            http.StatusBadRequest,
	service.ErrChunkIncomplete.Code:          http.StatusBadRequest,
}

// statusChecksumMismatch is the tus checksum extension's status for a
// chunk whose bytes miss their declared digest.
const statusChecksumMismatch = 460

// retryAfter is d as a Retry-After header: whole seconds, at least one.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(d.Round(time.Second)/time.Second)))
}

// unavailableRetryAfter is the Retry-After of every 503: a dependency's
// outage or a failed write, worth another try in a few seconds.
const unavailableRetryAfter = "2"

// Codes of the HTTP layer itself.
const (
	codeUnauthorized = "core.auth.unauthorized"
	// codeInvalidClaims: the token verified, but its tenant, user or
	// department claim is out of bounds (over 255 characters, blank,
	// control characters such as NUL, not a string).
	codeInvalidClaims = "core.auth.invalid-claims"
	// codeTokenTooLarge: the bearer token is longer than MaxTokenBytes.
	codeTokenTooLarge = "core.auth.token-too-large"
	// codeKeysUnavailable: no key set could be loaded from the JWKS URL
	// (503, retryable): a token cannot be judged, good or bad.
	codeKeysUnavailable = "core.keys.unavailable"
	codeInternal        = "core.internal"
)

func writeProblem(w http.ResponseWriter, r *http.Request, status int, code string) {
	writeDetailedProblem(w, r, problem{Status: status, Code: code})
}

// writeDetailedProblem writes p, filling in its type, its title and the
// request's id (in the body and in X-Request-Id).
func writeDetailedProblem(w http.ResponseWriter, r *http.Request, p problem) {
	status, code := p.Status, p.Code
	h := w.Header()
	h.Set("Content-Type", ProblemContentType)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	switch code {
	case service.ErrUploadCompleting.Code:
		h.Set("Retry-After", "5")
	case service.ErrUploadLocked.Code:
		h.Set("Retry-After", "2")
	case service.ErrConflict.Code:
		h.Set("Retry-After", "1")
	}
	if status == http.StatusServiceUnavailable {
		h.Set("Retry-After", unavailableRetryAfter)
	}
	if p.RequestID = requestID(r); p.RequestID != "" {
		h.Set("X-Request-Id", p.RequestID)
	}
	w.WriteHeader(status)
	p.Type = "urn:uploadedfile:problem:" + strings.TrimPrefix(code, "core.")
	p.Title = http.StatusText(status)
	_ = json.NewEncoder(w).Encode(p)
}

// serviceProblem is the problem of a service error with its status: the
// rule of an invalid or failed upload, and whether retrying can help.
func serviceProblem(err error, status int, code string) problem {
	p := problem{Status: status, Code: code, Rule: service.Rule(err)}
	if p.Rule != "" {
		p.Detail = ruleSentence(p.Rule, err)
	}
	if code != service.ErrNotFound.Code {
		retryable := service.Retryable(err)
		p.Retryable = &retryable
	}
	return p
}

// errorWriter is the one place errors become responses: service codes map
// to their status, everything else is logged with the request id and
// answered with a generic 500 that says nothing.
type errorWriter struct{ log *slog.Logger }

func (e errorWriter) response(w http.ResponseWriter, r *http.Request, err error) {
	var se *service.Error
	var ue *service.UnavailableError
	var inFlight *service.KeyInFlightError
	var p problem
	switch {
	case errors.As(err, &inFlight):
		w.Header().Set("Retry-After", retryAfter(inFlight.RetryAfter))
		p = serviceProblem(err, http.StatusConflict, service.ErrIdempotencyInFlight.Code)
	case errors.As(err, &ue):
		p = serviceProblem(err, http.StatusServiceUnavailable, ue.Code())
	case service.SizeOnly(err):
		p = serviceProblem(err, http.StatusRequestEntityTooLarge, service.ErrInvalidUpload.Code)
	case errors.Is(err, service.ErrInvalidUpload):
		p = serviceProblem(err, http.StatusUnprocessableEntity, service.ErrInvalidUpload.Code)
	case errors.Is(err, service.ErrUploadVerificationFailed):
		p = serviceProblem(err, http.StatusUnprocessableEntity, service.ErrUploadVerificationFailed.Code)
	case errors.Is(err, service.ErrQuotaExceeded):
		p = serviceProblem(err, http.StatusRequestEntityTooLarge, service.ErrQuotaExceeded.Code)
	case errors.Is(err, service.ErrVariantRefused):
		p = serviceProblem(err, http.StatusUnprocessableEntity, service.ErrVariantRefused.Code)
	case errors.As(err, &se) && statusOf[se.Code] != 0:
		p = serviceProblem(err, statusOf[se.Code], se.Code)
	default:
		e.log.ErrorContext(r.Context(), "unexpected handler error", "route", r.Pattern, "error", err.Error())
		p = problem{Status: http.StatusInternalServerError, Code: codeInternal}
	}
	writeDetailedProblem(w, r, p)
}

// request answers a request the generated code could not decode (bad JSON,
// bad parameters): invalid meta, without echoing the parser's message. A
// path id that is not a UUID names no file: it answers as a missing file
// does, byte for byte.
func (e errorWriter) request(w http.ResponseWriter, r *http.Request, err error) {
	if pe := (*api.InvalidParamFormatError)(nil); errors.As(err, &pe) && pe.ParamName == "id" {
		writeProblem(w, r, http.StatusNotFound, service.ErrNotFound.Code)
		return
	}
	e.log.InfoContext(r.Context(), "bad request", "route", r.Pattern, "error", err.Error())
	writeProblem(w, r, http.StatusBadRequest, service.ErrInvalidMeta.Code)
}

package httpapi

import (
	"net/http"

	"github.com/rs/cors"
)

// Headers a browser may send on a call to the API, to a local upload
// target or to a resumable upload, and the response headers its script
// may read.
var (
	corsRequestHeaders = []string{"Authorization", "Content-Type", "X-Request-Id", "If-None-Match", "If-Match", "Range", "X-Checksum-Sha256", IdempotencyKeyHeader,
		"Tus-Resumable", "Upload-Length", "Upload-Offset", "Upload-Metadata", "Upload-Checksum", "Upload-Defer-Length", "X-HTTP-Method-Override"}
	corsExposedHeaders = []string{"ETag", "Location", "Retry-After", "X-Request-Id", "Content-Disposition", "Content-Length", "Idempotent-Replayed",
		"Tus-Resumable", "Tus-Version", "Tus-Extension", "Tus-Max-Size", "Tus-Checksum-Algorithm", "Upload-Offset", "Upload-Length", "Upload-Expires"}
	corsAllowedMethods  = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}
	corsPreflightMaxAge = 600 // seconds
)

// withCORS answers CORS for the origins allowed (none: no CORS at all, so a
// browser on another origin is refused by its own same-origin policy).
// Preflights are answered here, before the guard: they carry no token.
func withCORS(allowedOrigins []string, next http.Handler) http.Handler {
	if len(allowedOrigins) == 0 {
		return next
	}
	return cors.New(cors.Options{
		AllowedOrigins: allowedOrigins,
		AllowedMethods: corsAllowedMethods,
		AllowedHeaders: corsRequestHeaders,
		ExposedHeaders: corsExposedHeaders,
		MaxAge:         corsPreflightMaxAge,
	}).Handler(next)
}

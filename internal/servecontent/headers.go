package servecontent

import "net/http"

// ContentSecurityPolicy is the policy of every stored file served: a
// sandbox (an opaque origin: no script, no form, no access to the serving
// origin's storage or cookies, even if a browser renders the bytes as a
// document) that may load nothing.
const ContentSecurityPolicy = "sandbox; default-src 'none'"

// SandboxHeaders sets on h the headers that keep uploaded content from
// running in the serving origin: the sandboxing Content-Security-Policy,
// nosniff (the declared type is the only one a browser may use), and a
// Cross-Origin-Resource-Policy -- same-origin for an authenticated route,
// which browsers only reach with fetch, cross-origin for a signed URL,
// which is meant to be embedded by URL like an S3 presigned one.
func SandboxHeaders(h http.Header, crossOrigin bool) {
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	if crossOrigin {
		h.Set("Cross-Origin-Resource-Policy", "cross-origin")
	} else {
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
	}
}

// DownloadHeaders sets on h what a download of a stored file answers with
// besides its type and length: the sandbox (SandboxHeaders, crossOrigin
// for a signed URL), its Content-Disposition (built by the caller:
// attachment or the file's own inline), that no cache may keep it
// (private, no-store) and, when known (etag != ""), its ETag.
func DownloadHeaders(h http.Header, disposition, etag string, crossOrigin bool) {
	SandboxHeaders(h, crossOrigin)
	h.Set("Content-Disposition", disposition)
	h.Set("Cache-Control", "private, no-store")
	if etag != "" {
		h.Set("ETag", etag)
	}
}

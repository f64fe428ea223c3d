package servecontent

import "net/http"

// ContentSecurityPolicy is the policy of every stored file served: a
// sandbox (an opaque origin: no script, no form, no access to the serving
// origin's storage or cookies, even if a browser renders the bytes as a
// document) that may load nothing.
const ContentSecurityPolicy = "sandbox; default-src 'none'"

// The headers below are stored under their canonical keys directly: every
// download sets six of them, and Header.Set would check and canonicalize
// each constant key again on every request (about 5 % of a 64 KiB
// download's instructions; docs/performance-notes.md). The keys must stay
// what textproto.CanonicalMIMEHeaderKey makes of them -- "Etag", not
// "ETag" -- or Header.Get (and http.ServeContent's conditionals) would not
// find them; TestHeadersAreCanonical holds that.
const (
	keyCSP         = "Content-Security-Policy"
	keyNoSniff     = "X-Content-Type-Options"
	keyCORP        = "Cross-Origin-Resource-Policy"
	keyDisposition = "Content-Disposition"
	keyCache       = "Cache-Control"
	keyETag        = "Etag"
)

// SandboxHeaders sets on h the headers that keep uploaded content from
// running in the serving origin: the sandboxing Content-Security-Policy,
// nosniff (the declared type is the only one a browser may use), and a
// Cross-Origin-Resource-Policy -- same-origin for an authenticated route,
// which browsers only reach with fetch, cross-origin for a signed URL,
// which is meant to be embedded by URL like an S3 presigned one.
func SandboxHeaders(h http.Header, crossOrigin bool) {
	v := make([]string, 3)
	sandbox(h, v, crossOrigin)
}

// sandbox is SandboxHeaders with the values' backing array (three or
// more strings) given.
func sandbox(h http.Header, v []string, crossOrigin bool) {
	v[0], v[1], v[2] = ContentSecurityPolicy, "nosniff", "same-origin"
	if crossOrigin {
		v[2] = "cross-origin"
	}
	h[keyCSP], h[keyNoSniff], h[keyCORP] = v[0:1:1], v[1:2:2], v[2:3:3]
}

// DownloadHeaders sets on h what a download of a stored file answers with
// besides its type and length: the sandbox (SandboxHeaders, crossOrigin
// for a signed URL), its Content-Disposition (built by the caller:
// attachment or the file's own inline), that no cache may keep it
// (private, no-store) and, when known (etag != ""), its ETag. The values
// share one allocation; each is capped, so that an Add to one reallocates
// instead of writing over the next.
func DownloadHeaders(h http.Header, disposition, etag string, crossOrigin bool) {
	v := make([]string, 6)
	sandbox(h, v, crossOrigin)
	v[3], v[4] = disposition, "private, no-store"
	h[keyDisposition], h[keyCache] = v[3:4:4], v[4:5:5]
	if etag != "" {
		v[5] = etag
		h[keyETag] = v[5:6:6]
	}
}

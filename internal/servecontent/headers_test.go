package servecontent

import (
	"net/http"
	"net/textproto"
	"testing"
)

// TestHeadersAreCanonical holds the keys DownloadHeaders stores directly
// to their canonical form, so that Header.Get, http.ServeContent's
// conditionals and the wire see them as Header.Set would have stored them,
// and each value to its own capacity, so that adding to one header leaves
// the others as they were.
func TestHeadersAreCanonical(t *testing.T) {
	for _, crossOrigin := range []bool{false, true} {
		got := http.Header{}
		DownloadHeaders(got, `attachment; filename="a.csv"`, `"e1"`, crossOrigin)
		want := http.Header{}
		want.Set("Content-Security-Policy", ContentSecurityPolicy)
		want.Set("X-Content-Type-Options", "nosniff")
		want.Set("Cross-Origin-Resource-Policy", map[bool]string{false: "same-origin", true: "cross-origin"}[crossOrigin])
		want.Set("Content-Disposition", `attachment; filename="a.csv"`)
		want.Set("Cache-Control", "private, no-store")
		want.Set("ETag", `"e1"`)
		if len(got) != len(want) {
			t.Fatalf("crossOrigin %v: %d headers, want %d: %q", crossOrigin, len(got), len(want), got)
		}
		for k, v := range got {
			if c := textproto.CanonicalMIMEHeaderKey(k); c != k {
				t.Errorf("key %q stored, canonical %q", k, c)
			}
			if w := want.Values(k); len(v) != 1 || len(w) != 1 || v[0] != w[0] {
				t.Errorf("%s: %q, want %q", k, v, w)
			}
		}
		// An Add to any one of them leaves every other as it was.
		for added := range want {
			h := http.Header{}
			DownloadHeaders(h, `attachment; filename="a.csv"`, `"e1"`, crossOrigin)
			h.Add(added, "more")
			for k := range want {
				if v := h.Values(k); k != added && (len(v) != 1 || v[0] != want.Get(k)) {
					t.Errorf("after an Add to %s: %s %q", added, k, v)
				}
			}
		}
	}
	none := http.Header{}
	DownloadHeaders(none, "inline", "", false)
	if _, ok := none["Etag"]; ok {
		t.Errorf("no etag given, Etag set: %q", none.Values("Etag"))
	}
	sandboxed := http.Header{}
	SandboxHeaders(sandboxed, false)
	if len(sandboxed) != 3 || sandboxed.Get("Cross-Origin-Resource-Policy") != "same-origin" {
		t.Errorf("SandboxHeaders: %q", sandboxed)
	}
}

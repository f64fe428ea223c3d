package httpapi

import (
	"net/http"
	"strings"

	"github.com/uploadedfile/uploadedfile/service"
)

// A granted download -- the local driver's signed URL, a download route
// with `expires` and `grant` (service/downloadgrant.go) -- carries its own
// authorization and names the object it reads: it needs neither the bearer
// token nor the generated router's parameter binding, so it is answered
// here, inside the access log, metrics, CORS and body limits and before
// the guard. The route stays in api/openapi.yaml (downloadFile and
// downloadFileVariant with their optional expires and grant) for clients.

// grantedRoute is the file id and preset ("" for the file) a granted
// download's path names; ok is false for any other request.
func grantedRoute(r *http.Request) (id, preset string, ok bool) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return "", "", false
	}
	rest, found := strings.CutPrefix(r.URL.Path, "/uploaded-file/")
	if !found || !strings.HasSuffix(rest, "/download") || !strings.Contains(r.URL.RawQuery, "grant=") {
		return "", "", false
	}
	id, tail, _ := strings.Cut(rest, "/")
	switch {
	case id == "":
		return "", "", false
	case tail == "download":
		return id, "", true
	}
	preset, found = strings.CutPrefix(tail, "variants/")
	preset, _ = strings.CutSuffix(preset, "/download")
	if !found || preset == "" || strings.Contains(preset, "/") {
		return "", "", false
	}
	return id, preset, true
}

// grantedPattern names a granted download's route as the generated router
// registers it, for the metrics and the access line: the file's (preset
// "") or its variant's.
func grantedPattern(preset string) string {
	if preset == "" {
		return http.MethodGet + " /uploaded-file/{id}/download"
	}
	return http.MethodGet + " /uploaded-file/{id}/variants/{preset}/download"
}

// withGrantedDownloads answers granted downloads (grantedRoute) with the
// same response writer as the authenticated route, and passes every other
// request to next.
func withGrantedDownloads(svc *service.Service, ew errorWriter, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, preset, ok := grantedRoute(r)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		g, ok := service.GrantOf(r.URL.RawQuery)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		handled(r, grantedPattern(preset))
		d, err := svc.DownloadGranted(r.Context(), id, preset, g)
		if err != nil {
			ew.response(w, r, err)
			return
		}
		_ = bytesResponse{ctx: r.Context(), d: d, granted: true}.visit(w)
	})
}

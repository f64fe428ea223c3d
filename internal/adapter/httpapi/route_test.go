package httpapi

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/uploadedfile/uploadedfile/gen/api"
)

// TestGrantedPatternIsTheRouters: a granted download is answered before
// the router and names its route itself (grantedPattern); the name must be
// the pattern the generated router registers for the path, so that the
// metrics and the access line count it with the authenticated downloads
// of the same route.
func TestGrantedPatternIsTheRouters(t *testing.T) {
	mux := http.NewServeMux()
	api.HandlerWithOptions(api.NewStrictHandler(&Server{}, nil), api.StdHTTPServerOptions{BaseRouter: mux})
	for path, preset := range map[string]string{
		"/uploaded-file/0b7e1d6a-52c6-4d0e-9d7c-2f1c8b0e6f11/download":                "",
		"/uploaded-file/0b7e1d6a-52c6-4d0e-9d7c-2f1c8b0e6f11/variants/thumb/download": "thumb",
	} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			r := httptest.NewRequest(method, path+"?expires=1&grant=x", nil)
			id, gotPreset, ok := grantedRoute(r)
			if !ok || id == "" || gotPreset != preset {
				t.Fatalf("%s %s: grantedRoute %q %q %v", method, path, id, gotPreset, ok)
			}
			if _, pattern := mux.Handler(r); pattern != grantedPattern(preset) {
				t.Errorf("%s %s: router's pattern %q, grantedPattern %q", method, path, pattern, grantedPattern(preset))
			}
		}
	}
}

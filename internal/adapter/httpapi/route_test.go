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

// TestIdempotentRoutesAreTheContracts: the routes that run a write at most
// once per Idempotency-Key are exactly the operations of api/openapi.yaml
// that declare the header -- a route added to the contract with the key
// is not silently run twice, and no route takes a key its contract does
// not name.
func TestIdempotentRoutesAreTheContracts(t *testing.T) {
	doc, err := api.GetSpec()
	if err != nil {
		t.Fatal(err)
	}
	declared := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for _, p := range append(item.Parameters, op.Parameters...) {
				if p.Value != nil && p.Value.In == "header" && http.CanonicalHeaderKey(p.Value.Name) == IdempotencyKeyHeader {
					declared[method+" "+path] = true
				}
			}
		}
	}
	if len(declared) < 5 {
		t.Fatalf("the contract declares the key on %d operations: %v", len(declared), declared)
	}
	for route := range declared {
		if _, ok := idempotentRoutes[route]; !ok {
			t.Errorf("%s declares Idempotency-Key in api/openapi.yaml but is not in idempotentRoutes", route)
		}
	}
	for route := range idempotentRoutes {
		if !declared[route] {
			t.Errorf("idempotentRoutes holds %s, whose operation in api/openapi.yaml does not declare Idempotency-Key", route)
		}
	}
}

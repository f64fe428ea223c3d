package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/httpapi"
	"github.com/uploadedfile/uploadedfile/service"
)

func preflight(t *testing.T, s *server, origin, path string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodOptions, s.url+path, nil)
	require.NoError(t, err)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", http.MethodPost)
	req.Header.Set("Access-Control-Request-Headers", "authorization, content-type")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp
}

// TestCORS: an allowed origin's preflight is answered before the guard
// (it carries no token) and its calls expose ETag, Location, Retry-After
// and the request id; another origin gets no CORS headers, and without
// configured origins there is no CORS at all.
func TestCORS(t *testing.T) {
	t.Parallel()
	const app = "https://app.example.test"
	s := startWith(t, service.DriverLocal, func(o *httpapi.Options) { o.CORSAllowedOrigins = []string{app} })

	resp := preflight(t, s, app, "/uploaded-file/initiate")
	require.Less(t, resp.StatusCode, 300, "a preflight is not a 401")
	require.Equal(t, app, resp.Header.Get("Access-Control-Allow-Origin"))
	require.Contains(t, strings.ToLower(resp.Header.Get("Access-Control-Allow-Headers")), "authorization")
	require.Contains(t, resp.Header.Get("Access-Control-Allow-Methods"), http.MethodPost)

	req, err := http.NewRequest(http.MethodGet, s.url+"/uploaded-file/00000000-0000-4000-8000-000000000000", nil)
	require.NoError(t, err)
	req.Header.Set("Origin", app)
	req.Header.Set("Authorization", "Bearer "+s.token("acme", "alice", nil))
	got, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	got.Body.Close()
	require.Equal(t, http.StatusNotFound, got.StatusCode)
	require.Equal(t, app, got.Header.Get("Access-Control-Allow-Origin"))
	exposed := got.Header.Get("Access-Control-Expose-Headers")
	for _, h := range []string{"Etag", "Location", "Retry-After", "X-Request-Id"} {
		require.Contains(t, exposed, h)
	}

	other := preflight(t, s, "https://evil.example.test", "/uploaded-file/initiate")
	require.Empty(t, other.Header.Get("Access-Control-Allow-Origin"), "an origin not allowed gets no CORS")

	closed := start(t, service.DriverLocal)
	none := preflight(t, closed, app, "/uploaded-file/initiate")
	require.Equal(t, http.StatusUnauthorized, none.StatusCode, "no origins configured: no CORS")
	require.Empty(t, none.Header.Get("Access-Control-Allow-Origin"))
}

package httpapi_test

import (
	"bytes"
	"context"
	"errors"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/service"
)

type pinger func(context.Context) error

func (p pinger) Ping(ctx context.Context) error { return p(ctx) }

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(rec.Body)
	return rec.Code, string(body)
}

func TestHealth(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	var dbErr error
	httpapi.Health{Dependencies: map[string]httpapi.Pinger{
		"database": pinger(func(context.Context) error { return dbErr }),
	}}.Register(mux)

	code, body := get(t, mux, "/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
	code, body = get(t, mux, "/readyz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ready\n", body)

	dbErr = errors.New("dial tcp 10.0.0.7:5432: password authentication failed for user app")
	code, body = get(t, mux, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "database not ready: did not answer\n", body, "the dependency is named, its error text is not")
	code, _ = get(t, mux, "/healthz")
	require.Equal(t, http.StatusOK, code, "liveness does not depend on the database")

	dbErr = &httpapi.NotReady{Cause: "the database schema is at version 1, behind this binary's 2", Err: errors.New("detail for the log")}
	code, body = get(t, mux, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "database not ready: the database schema is at version 1, behind this binary's 2\n", body, "a named cause is shown, its detail is not")

	// Facts follow the verdict, ready or not.
	withFacts := http.NewServeMux()
	httpapi.Health{Dependencies: map[string]httpapi.Pinger{
		"database": pinger(func(context.Context) error { return dbErr }),
	}, Facts: []string{"image engine: go"}}.Register(withFacts)
	_, body = get(t, withFacts, "/readyz")
	require.Equal(t, "database not ready: the database schema is at version 1, behind this binary's 2\nimage engine: go\n", body)
	dbErr = nil
	_, body = get(t, withFacts, "/readyz")
	require.Equal(t, "ready\nimage engine: go\n", body)
}

// TestFavicon: /favicon.ico answers an icon without a token (not a 401
// problem in every page's console).
func TestFavicon(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	resp, err := http.Get(s.url + "/favicon.ico")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, "image/x-icon", resp.Header.Get("Content-Type"))
	require.Equal(t, []byte{0, 0, 1, 0, 1, 0}, body[:6], "an ICO header with one image")
	require.Equal(t, "\x89PNG", string(body[22:26]), "holding a PNG")
	_, err = png.Decode(bytes.NewReader(body[22:]))
	require.NoError(t, err)
}

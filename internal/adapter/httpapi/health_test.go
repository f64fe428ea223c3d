package httpapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

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
	var schemaErr error
	(&httpapi.Health{Gates: map[string]httpapi.Pinger{
		"schema": pinger(func(context.Context) error { return schemaErr }),
	}}).Register(mux)

	code, body := get(t, mux, "/healthz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)
	code, body = get(t, mux, "/readyz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ready\n", body)

	schemaErr = errors.New("dial tcp 10.0.0.7:5432: password authentication failed for user app")
	code, body = get(t, mux, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "schema not ready: did not answer\n", body, "the gate is named, its error text is not")
	code, _ = get(t, mux, "/healthz")
	require.Equal(t, http.StatusOK, code, "liveness does not depend on the gates")

	schemaErr = &httpapi.NotReady{Cause: "the database schema is at version 1, behind this binary's 2", Err: errors.New("detail for the log")}
	code, body = get(t, mux, "/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Equal(t, "schema not ready: the database schema is at version 1, behind this binary's 2\n", body, "a named cause is shown, its detail is not")

	// Facts follow the verdict, ready or not.
	withFacts := http.NewServeMux()
	(&httpapi.Health{Gates: map[string]httpapi.Pinger{
		"schema": pinger(func(context.Context) error { return schemaErr }),
	}, Facts: []string{"image engine: go"}}).Register(withFacts)
	_, body = get(t, withFacts, "/readyz")
	require.Equal(t, "schema not ready: the database schema is at version 1, behind this binary's 2\nimage engine: go\n", body)
	schemaErr = nil
	_, body = get(t, withFacts, "/readyz")
	require.Equal(t, "ready\nimage engine: go\n", body)
}

// A dependency every replica shares never makes a replica unready: with
// it down, every replica would leave the balancer at once. It is reported
// on /readyz and /dependencies; a hanging one is named within the check's
// own deadline, and never blamed on another check.
func TestSharedDependenciesDoNotGateReadiness(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	var storeErr error
	(&httpapi.Health{
		Gates: map[string]httpapi.Pinger{"schema": pinger(func(context.Context) error { return nil })},
		Dependencies: map[string]httpapi.Pinger{
			"database": pinger(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }), // black-holed
			"storage":  pinger(func(context.Context) error { return storeErr }),
		},
	}).Register(mux)
	start := time.Now()
	code, body := get(t, mux, "/readyz")
	require.Less(t, time.Since(start), 3*time.Second, "answered within the checks' deadline")
	require.Equal(t, http.StatusOK, code, "a shared outage does not take the replica out")
	require.Equal(t, "ready\ndatabase unavailable: did not answer\n", body, "the hanging dependency is the one named")

	storeErr = &httpapi.NotReady{Cause: "the object store did not answer"}
	_, body = get(t, mux, "/readyz")
	require.Equal(t, "ready\ndatabase unavailable: did not answer\nstorage unavailable: the object store did not answer\n", body)

	code, body = get(t, mux, "/dependencies")
	require.Equal(t, http.StatusOK, code)
	var deps struct {
		Dependencies []struct {
			Name, Kind, Cause string
			OK                bool
		}
	}
	require.NoError(t, json.Unmarshal([]byte(body), &deps))
	require.Len(t, deps.Dependencies, 3)
	got := map[string]string{}
	for _, d := range deps.Dependencies {
		got[d.Name] = fmt.Sprintf("%s %v %s", d.Kind, d.OK, d.Cause)
	}
	require.Equal(t, map[string]string{
		"database": "shared false did not answer",
		"schema":   "gate true ",
		"storage":  "shared false the object store did not answer",
	}, got)
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

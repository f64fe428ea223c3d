package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/faultproxy"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// A database that stops answering without closing its connections -- a
// paused relay, a black-holed route -- costs a request database.callTimeout,
// never the server: each request is answered 503 core.database.unavailable
// with Retry-After within the bound, readiness stays (a shared
// dependency) and names the database, and once the database answers again
// the same process serves again.
func TestBlackHoledDatabaseIsAnsweredWithinTheBound(t *testing.T) {
	t.Parallel()
	server, err := url.Parse(pgtest.ServerURL())
	require.NoError(t, err)
	proxy := faultproxy.Start(t, server.Host)
	dbURL, err := url.Parse(pgtest.NewDatabase(t))
	require.NoError(t, err)
	dbURL.Host = proxy.Addr
	const callTimeout = 2 * time.Second
	d := startDevOn(t, dbURL.String(), "database:\n  callTimeout: 2s\n  statementTimeout: 1s\n")

	list := func() (int, http.Header, string, time.Duration) {
		req, err := http.NewRequest(http.MethodGet, d.base+"/uploaded-file?limit=1", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+d.token)
		start := time.Now()
		resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
		require.NoError(t, err, "answered, not hung")
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(body), time.Since(start)
	}
	status, _, body, _ := list()
	require.Equal(t, http.StatusOK, status, body)

	proxy.Set(faultproxy.BlackHole)
	for range 3 {
		status, h, body, took := list()
		require.Equal(t, http.StatusServiceUnavailable, status, body)
		require.Less(t, took, callTimeout+2*time.Second, "answered within the call timeout")
		require.NotEmpty(t, h.Get("Retry-After"))
		var p struct{ Code string }
		require.NoError(t, json.Unmarshal([]byte(body), &p))
		require.Equal(t, "core.database.unavailable", p.Code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+"/readyz", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	ready, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "a shared outage does not take the replica out")
	require.Contains(t, string(ready), "database unavailable: did not answer")

	proxy.Set(faultproxy.Pass)
	require.Eventually(t, func() bool { s, _, _, _ := list(); return s == http.StatusOK }, 20*time.Second, 200*time.Millisecond, "serves again without a restart")
}

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/faultproxy"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
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
	// A resumable upload begun before the database hangs: its offset and a
	// chunk are answered within the bound too.
	resumable := d.tusCreate(t)

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
	for _, r := range []struct {
		method string
		h      map[string]string
		chunk  []byte
	}{
		{http.MethodHead, nil, nil},
		{http.MethodPatch, map[string]string{"Content-Type": "application/offset+octet-stream", "Upload-Offset": "0"}, []byte("id,n\n")},
	} {
		status, h, body, took := d.tus(t, r.method, resumable, r.h, r.chunk)
		require.Equal(t, http.StatusServiceUnavailable, status, "%s: %s", r.method, body)
		require.Less(t, took, callTimeout+2*time.Second, "%s answered within the call timeout", r.method)
		require.NotEmpty(t, h.Get("Retry-After"), r.method)
	}
	requireReadyNaming(t, d.base, "database unavailable: did not answer")

	proxy.Set(faultproxy.Pass)
	require.Eventually(t, func() bool { s, _, _, _ := list(); return s == http.StatusOK }, 20*time.Second, 200*time.Millisecond, "serves again without a restart")
}

// A store that stops answering without closing its connections costs a
// request storageTimeout per attempt of the S3 client, never the server:
// an upload is answered 503 core.storage.unavailable with Retry-After
// within the bound, a list (which needs no bytes) answers 200 throughout,
// readiness stays and names the store, and once the store answers again
// the same process uploads again.
func TestBlackHoledStoreIsAnsweredWithinTheBound(t *testing.T) {
	t.Parallel()
	srv, err := s3test.StartKind(s3test.Selected())
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	c := srv.NewBucket(t)
	endpoint, err := url.Parse(c.Endpoint)
	require.NoError(t, err)
	proxy := faultproxy.Start(t, endpoint.Host)
	const storageTimeout = 2 * time.Second
	d := startDevOn(t, pgtest.NewDatabase(t), fmt.Sprintf("driver: s3\nbucket: %s\nregion: %s\nendpoint: http://%s\nforcePathStyle: true\naccessId: %s\naccessKey: %s\nstorageTimeout: 2s\n",
		c.Bucket, c.Region, proxy.Addr, c.AccessID, c.AccessKey))

	call := func(method, path string, body io.Reader, contentType string) (int, http.Header, string, time.Duration) {
		req, err := http.NewRequest(method, d.base+path, body)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+d.token)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		start := time.Now()
		resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
		require.NoError(t, err, "answered, not hung")
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b), time.Since(start)
	}
	upload := func() (int, http.Header, string, time.Duration) {
		var form bytes.Buffer
		w := multipart.NewWriter(&form)
		part, err := w.CreateFormFile("file", "slow.txt")
		require.NoError(t, err)
		_, _ = part.Write([]byte("a store that hangs"))
		require.NoError(t, w.Close())
		return call(http.MethodPost, "/uploaded-file", &form, w.FormDataContentType())
	}
	status, _, body, _ := upload()
	require.Equal(t, http.StatusCreated, status, body)
	// A resumable upload begun before the store hangs: its chunk must be
	// answered within the bound too.
	resumable := d.tusCreate(t)

	proxy.Set(faultproxy.BlackHole)
	status, h, body, took := d.tus(t, http.MethodPatch, resumable, map[string]string{
		"Content-Type": "application/offset+octet-stream", "Upload-Offset": "0"}, []byte("id,n\n"))
	require.Equal(t, http.StatusServiceUnavailable, status, body)
	require.Less(t, took, 3*storageTimeout+3*time.Second, "a chunk is answered within the storage bound")
	require.NotEmpty(t, h.Get("Retry-After"))
	require.Contains(t, body, "core.storage.unavailable")
	// The bound: each of the client's three attempts waits storageTimeout
	// for an answer, with its backoff between them.
	bound := 3*storageTimeout + 3*time.Second
	for range 2 {
		status, h, body, took := upload()
		require.Equal(t, http.StatusServiceUnavailable, status, body)
		require.Less(t, took, bound, "answered within the storage bound")
		require.NotEmpty(t, h.Get("Retry-After"))
		require.Contains(t, body, "core.storage.unavailable")
	}
	status, _, body, took = call(http.MethodGet, "/uploaded-file?limit=1", nil, "")
	require.Equal(t, http.StatusOK, status, "a list needs no bytes: %s", body)
	require.Less(t, took, storageTimeout)
	requireReadyNaming(t, d.base, "storage unavailable")

	proxy.Set(faultproxy.Pass)
	require.Eventually(t, func() bool { s, _, _, _ := upload(); return s == http.StatusCreated }, 30*time.Second, 500*time.Millisecond, "uploads again without a restart")
}

// requireReadyNaming: the replica at base answers /readyz 200 within 5 s --
// a shared outage does not take it out of the balancer -- and its body
// names the dependency (line).
func requireReadyNaming(t *testing.T, base, line string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	ready, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, "a shared outage does not take the replica out: %s", ready)
	require.Contains(t, string(ready), line)
}

// tus sends one request of the resumable protocol with the development
// token and returns the answer and how long it took (a client that gives
// up after two minutes: an answer, not a hang, is what is checked).
func (d *devServer) tus(t *testing.T, method, path string, h map[string]string, chunk []byte) (int, http.Header, string, time.Duration) {
	t.Helper()
	req, err := http.NewRequest(method, d.base+path, bytes.NewReader(chunk))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Tus-Resumable", "1.0.0")
	for k, v := range h {
		req.Header.Set(k, v)
	}
	start := time.Now()
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	require.NoError(t, err, "answered, not hung")
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b), time.Since(start)
}

// tusCreate begins a resumable upload of a 100-byte CSV and returns its
// URL path.
func (d *devServer) tusCreate(t *testing.T) string {
	t.Helper()
	status, h, body, _ := d.tus(t, http.MethodPost, "/uploaded-file/tus/", map[string]string{
		"Upload-Length": "100", "Upload-Metadata": "filename c2xvdy5jc3Y=,filetype dGV4dC9jc3Y=", // slow.csv, text/csv
	}, nil)
	require.Equal(t, http.StatusCreated, status, body)
	return strings.TrimPrefix(h.Get("Location"), d.base)
}

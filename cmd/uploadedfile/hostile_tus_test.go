package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// tusCreate creates a resumable upload of size bytes (a CSV) and returns
// its path.
func (s *hostileServer) tusCreate(t *testing.T, size int) string {
	t.Helper()
	resp, body := s.do(t, "POST", "/uploaded-file/tus/", s.token, map[string]string{
		"Tus-Resumable": "1.0.0", "Upload-Length": strconv.Itoa(size),
		"Upload-Metadata": "filename " + base64.StdEncoding.EncodeToString([]byte("rows.csv")) + ",filetype " + base64.StdEncoding.EncodeToString([]byte("text/csv")),
	}, nil)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	return strings.TrimPrefix(resp.Header.Get("Location"), s.base)
}

// tusPatch sends chunk at offset to the upload at path.
func (s *hostileServer) tusPatch(t *testing.T, path string, offset int, chunk []byte) (*http.Response, []byte) {
	t.Helper()
	return s.do(t, "PATCH", path, s.token, map[string]string{
		"Tus-Resumable": "1.0.0", "Content-Type": "application/offset+octet-stream", "Upload-Offset": strconv.Itoa(offset),
	}, chunk)
}

// tusOffset is the upload's offset, as HEAD answers it.
func (s *hostileServer) tusOffset(t *testing.T, path string) string {
	t.Helper()
	resp, _ := s.do(t, "HEAD", path, s.token, map[string]string{"Tus-Resumable": "1.0.0"}, nil)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	return resp.Header.Get("Upload-Offset")
}

// hostileTus is the suite's attacks on the resumable route: stalled chunk
// bodies, a second writer, a crowd of tiny chunks, lengths over the limit
// or deferred.
func hostileTus(t *testing.T, s *hostileServer, record func(attack, answer string)) {
	// Stalled chunks: each declares 1 MiB, sends 10 bytes and stops. The
	// body bound cuts it; nothing of the chunk is kept, and the upload's
	// write lease is given back.
	uploads := make([]string, 50)
	var wg sync.WaitGroup
	for i := range uploads {
		uploads[i] = s.tusCreate(t, 2<<20)
		c := s.rawConn(t)
		_, err := fmt.Fprintf(c, "PATCH %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nTus-Resumable: 1.0.0\r\nContent-Type: application/offset+octet-stream\r\nUpload-Offset: 0\r\nContent-Length: 1048576\r\n\r\n0123456789", uploads[i], s.token)
		require.NoError(t, err)
		wg.Go(func() {
			_ = c.SetReadDeadline(time.Now().Add(4 * hostileIdleTimeout))
			_, _ = io.Copy(io.Discard, c)
		})
	}
	wg.Wait()
	for _, u := range uploads {
		require.Equal(t, "0", s.tusOffset(t, u), "nothing of a stalled chunk is kept")
	}
	resp, body := s.tusPatch(t, uploads[0], 0, []byte("id,n\n1,2\n"))
	require.Equal(t, http.StatusNoContent, resp.StatusCode, "the lease came back: %s", body)
	record("50 stalled tus chunks", fmt.Sprintf("cut within %s, nothing kept", hostileIdleTimeout))

	// A second writer while one is writing: it waits out the lease, then 423.
	u := s.tusCreate(t, 2<<20)
	c := s.rawConn(t)
	_, err := fmt.Fprintf(c, "PATCH %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nTus-Resumable: 1.0.0\r\nContent-Type: application/offset+octet-stream\r\nUpload-Offset: 0\r\nContent-Length: 1048576\r\n\r\n", u, s.token)
	require.NoError(t, err)
	stop := make(chan struct{})
	trickled := make(chan struct{})
	go func() { // a byte every 500 ms: under the idle bound, the writer stays
		defer close(trickled)
		for {
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
				_, _ = c.Write([]byte("x"))
			}
		}
	}()
	time.Sleep(time.Second)
	started := time.Now()
	resp, body = s.tusPatch(t, u, 0, []byte("id,n\n"))
	waited := time.Since(started)
	close(stop)
	<-trickled
	require.Equal(t, http.StatusLocked, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"code":"core.file.upload-locked"`)
	require.NotEmpty(t, resp.Header.Get("Retry-After"))
	record("a second writer of one upload", fmt.Sprintf("423 after %s", waited.Round(100*time.Millisecond)))

	// A crowd of one-byte chunks: the 1,001st is refused.
	u = s.tusCreate(t, 2000)
	started = time.Now()
	for i := range 1000 {
		resp, body := s.tusPatch(t, u, i, []byte("a"))
		require.Equal(t, http.StatusNoContent, resp.StatusCode, "chunk %d: %s", i, body)
	}
	resp, body = s.tusPatch(t, u, 1000, []byte("a"))
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"code":"core.file.too-many-chunks"`)
	record("1,001 one-byte chunks", fmt.Sprintf("400 too-many-chunks (%s)", time.Since(started).Round(100*time.Millisecond)))

	// Lengths the route does not take.
	for name, h := range map[string]map[string]string{
		"over the limit": {"Upload-Length": strconv.Itoa(1 << 30)},
		"deferred":       {"Upload-Defer-Length": "1"},
		"negative":       {"Upload-Length": "-1"},
	} {
		h["Tus-Resumable"] = "1.0.0"
		h["Upload-Metadata"] = "filename " + base64.StdEncoding.EncodeToString([]byte("r.csv")) + ",filetype " + base64.StdEncoding.EncodeToString([]byte("text/csv"))
		resp, body := s.do(t, "POST", "/uploaded-file/tus/", s.token, h, nil)
		require.GreaterOrEqual(t, resp.StatusCode, 400, name)
		require.Less(t, resp.StatusCode, 500, name)
		require.Contains(t, resp.Header.Get("Content-Type"), "application/problem+json", name)
		record("tus length "+name, strconv.Itoa(resp.StatusCode)+" "+problemCodeOf(body))
	}
}

// problemCodeOf is the code of a problem body ("" for another body).
func problemCodeOf(body []byte) string {
	_, rest, ok := strings.Cut(string(body), `"code":"`)
	if !ok {
		return ""
	}
	code, _, _ := strings.Cut(rest, `"`)
	return code
}

package main

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestAccessLinesWaitButAreNotLost: serve gathers its access lines and
// writes them together (internal/logsink), yet on a quiet server a
// request's line is out within the sink's delay, the output keeps the
// order things happened in, and a stop loses none: a download that ends
// while the stop drains it is logged after the stop's own line, by the
// sink's Close.
func TestAccessLinesWaitButAreNotLost(t *testing.T) {
	t.Parallel()
	d := startDev(t, "maxFileSizeBytes: 25165824\n")
	do := func(method, path string, body io.Reader, header map[string]string) *http.Response {
		req, err := http.NewRequest(method, d.base+path, body)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+d.token)
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		return resp
	}
	lookup := func() {
		resp := do(http.MethodGet, "/uploaded-file/"+uuid.NewString(), nil, nil)
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusNotFound, resp.StatusCode)
	}

	lookup()
	require.Eventually(t, func() bool { return len(accessLines(t, d.log.String())) == 1 },
		10*time.Second, 10*time.Millisecond, "a quiet server's access line is out after the sink's delay")

	const more = 300 // about 90 KiB of lines: batches at the sink's limit, then some waiting
	for range more {
		lookup()
	}

	// A download larger than the loopback's socket buffers: its handler is
	// still writing when the stop begins.
	var form bytes.Buffer
	mw := multipart.NewWriter(&form)
	part, err := mw.CreateFormFile("file", "big.txt")
	require.NoError(t, err)
	_, _ = part.Write(bytes.Repeat([]byte("access lines\n"), 24<<20/13))
	require.NoError(t, mw.Close())
	resp := do(http.MethodPost, "/uploaded-file", &form, map[string]string{"Content-Type": mw.FormDataContentType()})
	created, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(created))
	var file struct{ ID string }
	require.NoError(t, json.Unmarshal(created, &file))
	download := do(http.MethodGet, "/uploaded-file/"+file.ID+"/download", nil, nil)
	require.Equal(t, http.StatusOK, download.StatusCode)
	stopped := make(chan error, 1)
	go func() { stopped <- d.stop() }()
	require.Eventually(t, func() bool { return strings.Contains(d.log.String(), `"msg":"shutting down"`) },
		10*time.Second, 10*time.Millisecond)
	n, err := io.Copy(io.Discard, download.Body)
	require.NoError(t, err, "the stop drains the download")
	download.Body.Close()
	require.NoError(t, <-stopped)

	out := d.log.String()
	lines := accessLines(t, out)
	require.Equal(t, 1+more+2, len(lines), "every line, those the stop found waiting among them")
	for _, l := range lines[:1+more] {
		require.Equal(t, "GET /uploaded-file/{id}", l["route"])
		require.EqualValues(t, http.StatusNotFound, l["status"])
	}
	last := lines[len(lines)-1]
	require.Equal(t, "GET /uploaded-file/{id}/download", last["route"])
	require.EqualValues(t, n, last["bytes_out"])
	shutdown := strings.Index(out, `"msg":"shutting down"`)
	upload := strings.Index(out, `"route":"POST /uploaded-file"`)
	require.True(t, upload > 0 && upload < shutdown, "what was logged before the stop is out before its line")
	require.Greater(t, strings.LastIndex(out, `"msg":"request"`), shutdown, "the drained download after it")
}

// accessLines are the access lines of a JSON log, each decoded.
func accessLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for l := range strings.Lines(log) {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &rec), "every line is whole JSON: %q", l)
		if rec["msg"] == "request" {
			lines = append(lines, rec)
		}
	}
	return lines
}

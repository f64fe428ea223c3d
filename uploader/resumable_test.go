package uploader_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/uploader"
)

// countingTransport counts the body bytes it sends in PATCH requests and,
// on the PATCH numbered cut (from 1), sends only half the body and fails,
// as a connection that drops mid-chunk does.
type countingTransport struct {
	sent    atomic.Int64
	patches atomic.Int64
	cut     int64
}

var errDropped = errors.New("connection dropped")

func (t *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodPatch {
		return http.DefaultTransport.RoundTrip(r)
	}
	n := t.patches.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	if n == t.cut {
		t.sent.Add(int64(len(body) / 2))
		// The server receives half the declared length and then nothing:
		// the request is cut off.
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body[:len(body)/2]), failing{}))
		_, _ = http.DefaultTransport.RoundTrip(r2)
		return nil, errDropped
	}
	t.sent.Add(int64(len(body)))
	r2 := r.Clone(r.Context())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	return http.DefaultTransport.RoundTrip(r2)
}

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errDropped }

func textOf(n int) []byte {
	return []byte(strings.Repeat("the quick brown fox jumps over the lazy dog\n", n/44+1)[:n])
}

// TestResumableUploadResumesFromTheServersOffset: a chunk whose connection
// drops half way is sent again from the server's offset; the rest is sent
// once: the bytes sent are at most the file plus one chunk.
func TestResumableUploadResumesFromTheServersOffset(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	tr := &countingTransport{cut: 2}
	c, err := uploader.New(s.url, s.token, uploader.WithHTTPClient(&http.Client{Transport: tr}), uploader.WithRetries(4, 10e6))
	require.NoError(t, err)
	body := textOf(300 << 10)
	const chunk = 64 << 10
	f, err := c.ResumableUpload(context.Background(), uploader.ResumableFile{Name: "notes.txt", ContentType: "text/plain", Body: bytes.NewReader(body), Size: int64(len(body)), ChunkSize: chunk})
	require.NoError(t, err)
	require.EqualValues(t, "ready", f.Status)
	require.LessOrEqual(t, tr.sent.Load(), int64(len(body)+chunk), "at most the file plus one chunk")
	require.Greater(t, tr.sent.Load(), int64(len(body)), "the cut chunk was sent again")
	rc, err := c.Download(context.Background(), f.Id)
	require.NoError(t, err)
	got, err := io.ReadAll(rc)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	require.Equal(t, body, got)
}

// TestResumableUploadContinuesAfterTheClientStopped: a client that stopped
// after two chunks is continued by another, with the upload's URL: it
// sends only what the server does not have.
func TestResumableUploadContinuesAfterTheClientStopped(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	body := textOf(200 << 10)
	const chunk = 32 << 10
	ctx, cancel := context.WithCancel(context.Background())
	first := &countingTransport{}
	c1, err := uploader.New(s.url, s.token, uploader.WithHTTPClient(&http.Client{Transport: stopAfter{inner: first, n: 2, cancel: cancel}}))
	require.NoError(t, err)
	var url string
	_, err = c1.ResumableUpload(ctx, uploader.ResumableFile{Name: "notes.txt", ContentType: "text/plain", Body: bytes.NewReader(body), Size: int64(len(body)), ChunkSize: chunk,
		OnCreated: func(u string) { url = u }})
	require.ErrorIs(t, err, context.Canceled)
	require.NotEmpty(t, url)

	second := &countingTransport{}
	c2, err := uploader.New(s.url, s.token, uploader.WithHTTPClient(&http.Client{Transport: second}))
	require.NoError(t, err)
	f, err := c2.ResumableUpload(context.Background(), uploader.ResumableFile{Name: "notes.txt", ContentType: "text/plain", Body: bytes.NewReader(body), Size: int64(len(body)), ChunkSize: chunk, URL: url})
	require.NoError(t, err)
	require.EqualValues(t, "ready", f.Status)
	require.EqualValues(t, len(body)-2*chunk, second.sent.Load(), "only what the server did not have")
}

// stopAfter cancels the client's context once n PATCHes went through.
type stopAfter struct {
	inner  *countingTransport
	n      int64
	cancel context.CancelFunc
}

func (s stopAfter) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := s.inner.RoundTrip(r)
	if r.Method == http.MethodPatch && s.inner.patches.Load() == s.n {
		s.cancel()
	}
	return resp, err
}

package httpapi

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/uploadedfile/uploadedfile/internal/filecheck"
)

// limitBodies bounds request bodies before anything reads them: in size --
// multipart uploads at MultipartCeiling (and reads them in large chunks,
// bufferedBody), raw content and resumable chunks at the 25 MiB ceiling,
// JSON at 64 KiB -- and
// in time (bodyTimeouts).
func limitBodies(next http.Handler, t bodyTimeouts) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch ct := r.Header.Get("Content-Type"); {
		case r.Body == nil || r.Body == http.NoBody || r.Method == http.MethodGet || r.Method == http.MethodDelete:
		case len(ct) >= 19 && ct[:19] == "multipart/form-data":
			body, release := bufferedBody(t.bound(w, http.MaxBytesReader(w, r.Body, MultipartCeiling)))
			defer release()
			r.Body = body
		case r.Method == http.MethodPut, ct == tusChunkType:
			r.Body = t.bound(w, http.MaxBytesReader(w, r.Body, filecheck.AbsoluteMaxFileSize))
		default:
			r.Body = t.bound(w, http.MaxBytesReader(w, r.Body, jsonBodyLimit))
		}
		next.ServeHTTP(w, r)
	})
}

// bodyTimeouts bound the time a request body takes to arrive: in all
// (total, from the first read) and between two reads that return data
// (idle). The connection's read deadline enforces both, so a client that
// trickles a body or stops sending is cut off by the kernel's clock, not
// by a goroutine.
type bodyTimeouts struct{ total, idle time.Duration }

// bound returns body read under the deadlines.
func (t bodyTimeouts) bound(w http.ResponseWriter, body io.ReadCloser) io.ReadCloser {
	return &deadlineBody{ReadCloser: body, rc: http.NewResponseController(w), t: t}
}

type deadlineBody struct {
	io.ReadCloser
	rc  *http.ResponseController
	t   bodyTimeouts
	end time.Time // the total deadline, set at the first read
	set time.Time // the deadline the connection has now
}

func (d *deadlineBody) Read(p []byte) (int, error) {
	now := time.Now()
	if d.end.IsZero() {
		d.end = now.Add(d.t.total)
	}
	deadline := now.Add(d.t.idle)
	if deadline.After(d.end) {
		deadline = d.end
	}
	// Moving the deadline resets the connection's timer: a fast body does
	// it once per eighth of the idle time, not on every read. Where the
	// connection cannot take a deadline (tests' recorders), the body is
	// read as it is.
	if !deadline.Equal(d.set) && (d.set.IsZero() || deadline.Sub(d.set) >= d.t.idle/8 || deadline.Equal(d.end)) {
		_ = d.rc.SetReadDeadline(deadline)
		d.set = deadline
	}
	n, err := d.ReadCloser.Read(p)
	switch {
	case errors.Is(err, io.EOF):
		// The body is done: lift the deadline, or the server's own
		// background read of the idle connection would hit it and cancel
		// the request while the handler still works.
		_ = d.rc.SetReadDeadline(time.Time{})
	case err != nil:
		// Refused, stalled or cut: what is left of the body is never
		// waited for. net/http drains up to 256 KiB of an unread body
		// before it answers; with no deadline that drain waited forever
		// for a body that had stopped.
		_ = d.rc.SetReadDeadline(time.Now())
	}
	return n, err
}

// multipartReadBuffer is how much of a multipart body is read from the
// connection at once.
const multipartReadBuffer = 64 << 10

// bodyReaders are bufferedBody's buffers, reused across requests (a fresh
// 64 KiB per upload was a sixth of a small upload's allocations).
var bodyReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, multipartReadBuffer) }}

// bufferedBody reads body through a large buffer. The multipart reader asks
// for 4 KiB at a time, and the connection's own buffer is 4 KiB too, so
// without it a 1 MiB upload costs 256 read system calls; with it, about 16.
// release gives the buffer back once the handler has returned: every
// handler reads its body before it returns, none hands it to a goroutine.
func bufferedBody(body io.ReadCloser) (buffered io.ReadCloser, release func()) {
	br := bodyReaders.Get().(*bufio.Reader)
	br.Reset(body)
	release = func() {
		br.Reset(nil)
		bodyReaders.Put(br)
	}
	return struct {
		io.Reader
		io.Closer
	}{br, body}, release
}

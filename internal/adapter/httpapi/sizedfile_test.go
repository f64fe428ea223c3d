package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// sizedFileFixture writes n random bytes to a file and returns its path
// and content.
func sizedFileFixture(t *testing.T, n int) (string, []byte) {
	t.Helper()
	content := make([]byte, n)
	for i := range content {
		content[i] = byte(rand.IntN(256))
	}
	name := filepath.Join(t.TempDir(), "object")
	if err := os.WriteFile(name, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return name, content
}

func openSized(t *testing.T, name string, size int64) *sizedFile {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return newSizedFile(f, size)
}

// The two seeks ServeContent makes to learn the size are answered without
// moving the descriptor: after them it is still where open left it.
func TestSizedFileAnswersTheSizeSeeksWithoutTheDescriptor(t *testing.T) {
	name, content := sizedFileFixture(t, 70_000)
	s := openSized(t, name, int64(len(content)))
	if end, err := s.Seek(0, io.SeekEnd); err != nil || end != int64(len(content)) {
		t.Fatalf("Seek(0, end) = %d, %v; want %d", end, err, len(content))
	}
	if pos, err := s.File.Seek(0, io.SeekCurrent); err != nil || pos != 0 {
		t.Fatalf("the descriptor moved to %d (%v): the end seek was a system call", pos, err)
	}
	if start, err := s.Seek(0, io.SeekStart); err != nil || start != 0 {
		t.Fatalf("Seek(0, start) = %d, %v", start, err)
	}
	got, err := io.ReadAll(s)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("read %d bytes (%v), want the %d of the file", len(got), err, len(content))
	}
}

// Whatever the order of seeks, reads and copies, a sizedFile reads what
// the file itself reads: a random walk of operations applied to both.
func TestSizedFileBehavesAsTheFile(t *testing.T) {
	name, content := sizedFileFixture(t, 5_000)
	size := int64(len(content))
	for walk := range 2000 {
		s := openSized(t, name, size)
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		var trace []string
		for range 1 + rand.IntN(6) {
			op := pickOp(size)
			trace = append(trace, op.String())
			gotPos, gotData, gotErr := op.apply(s)
			wantPos, wantData, wantErr := op.apply(f)
			if gotPos != wantPos || !bytes.Equal(gotData, wantData) || (gotErr == nil) != (wantErr == nil) {
				t.Fatalf("walk %d, %s: sizedFile %d, %d bytes, %v; the file %d, %d bytes, %v",
					walk, strings.Join(trace, " → "), gotPos, len(gotData), gotErr, wantPos, len(wantData), wantErr)
			}
		}
		_ = f.Close()
	}
}

// fileOp is one operation of the random walk.
type fileOp struct {
	kind           string // "seek", "read", "copy" or "raw"
	offset         int64
	whence, length int
}

func pickOp(size int64) fileOp {
	switch rand.IntN(5) {
	case 0, 1:
		// The seeks ServeContent makes are the likeliest.
		offsets := []int64{0, 0, 0, 1, size / 2, size, size + 3, -1, -size}
		return fileOp{kind: "seek", offset: offsets[rand.IntN(len(offsets))], whence: rand.IntN(3)}
	case 2, 3:
		kind := "read"
		if rand.IntN(3) == 0 {
			kind = "raw" // as the connection's sendfile reads: the descriptor itself
		}
		return fileOp{kind: kind, length: rand.IntN(int(size) + 10)}
	default:
		return fileOp{kind: "copy"}
	}
}

func (o fileOp) String() string {
	switch o.kind {
	case "seek":
		return fmt.Sprintf("Seek(%d, %d)", o.offset, o.whence)
	case "read":
		return fmt.Sprintf("Read(%d)", o.length)
	case "raw":
		return fmt.Sprintf("read(fd, %d)", o.length)
	}
	return "io.Copy"
}

// apply runs the operation on r: the position a seek answers, the bytes
// a read or a copy returns, the error.
func (o fileOp) apply(r io.ReadSeeker) (int64, []byte, error) {
	switch o.kind {
	case "seek":
		pos, err := r.Seek(o.offset, o.whence)
		return pos, nil, err
	case "read":
		buf := make([]byte, o.length)
		n, err := io.ReadFull(r, buf)
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			err = nil
		}
		return 0, buf[:n], err
	case "raw":
		rc, err := r.(syscall.Conn).SyscallConn()
		if err != nil {
			return 0, nil, err
		}
		buf := make([]byte, o.length)
		var n int
		var rerr error
		if err := rc.Read(func(fd uintptr) bool {
			n, rerr = syscall.Read(int(fd), buf)
			return true
		}); err != nil {
			return 0, nil, err
		}
		return 0, buf[:max(n, 0)], rerr
	}
	var b bytes.Buffer
	_, err := io.Copy(&b, r)
	return 0, b.Bytes(), err
}

// http.ServeContent answers the same from a sizedFile as from the file:
// whole, ranges, conditional requests, HEAD.
func TestSizedFileServesAsTheFile(t *testing.T) {
	name, content := sizedFileFixture(t, 100_000)
	modified := time.Date(2026, 11, 25, 6, 0, 0, 0, time.UTC)
	const etag = `"0123456789abcdef"`
	serve := func(r *http.Request, sized bool) *httptest.ResponseRecorder {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		w := httptest.NewRecorder()
		w.Header().Set("Content-Type", "text/csv")
		w.Header().Set("ETag", etag)
		var rs io.ReadSeeker = f
		if sized {
			rs = newSizedFile(f, int64(len(content)))
		}
		http.ServeContent(w, r, "", modified, rs)
		return w
	}
	for _, tc := range []struct {
		name, method string
		header       map[string]string
	}{
		{"whole", http.MethodGet, nil},
		{"head", http.MethodHead, nil},
		{"one range", http.MethodGet, map[string]string{"Range": "bytes=100-4095"}},
		{"open range", http.MethodGet, map[string]string{"Range": "bytes=99000-"}},
		{"suffix range", http.MethodGet, map[string]string{"Range": "bytes=-300"}},
		{"ranges", http.MethodGet, map[string]string{"Range": "bytes=0-9,500-599,-20"}},
		{"unsatisfiable range", http.MethodGet, map[string]string{"Range": "bytes=200000-"}},
		{"if-none-match", http.MethodGet, map[string]string{"If-None-Match": etag}},
		{"if-range stale", http.MethodGet, map[string]string{"Range": "bytes=0-9", "If-Range": `"other"`}},
		{"if-modified-since", http.MethodGet, map[string]string{"If-Modified-Since": modified.Format(http.TimeFormat)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := func() *http.Request {
				r := httptest.NewRequest(tc.method, "/download", nil)
				for k, v := range tc.header {
					r.Header.Set(k, v)
				}
				return r
			}
			want, got := serve(req(), false), serve(req(), true)
			wantBody, gotBody := normalizeBoundary(t, want), normalizeBoundary(t, got)
			if got.Code != want.Code || !bytes.Equal(gotBody, wantBody) {
				t.Fatalf("sizedFile: %d, %d bytes; the file: %d, %d bytes", got.Code, len(gotBody), want.Code, len(wantBody))
			}
			for _, h := range []string{"Content-Length", "Content-Range", "Last-Modified", "Accept-Ranges", "ETag"} {
				if got.Header().Get(h) != want.Header().Get(h) {
					t.Fatalf("%s: %q, want %q", h, got.Header().Get(h), want.Header().Get(h))
				}
			}
			if tc.name == "whole" && !bytes.Equal(gotBody, content) {
				t.Fatal("the whole response is not the file")
			}
		})
	}
}

// normalizeBoundary is the recorder's body with a multipart response's
// random boundary replaced by a fixed one.
func normalizeBoundary(t *testing.T, w *httptest.ResponseRecorder) []byte {
	t.Helper()
	_, params, err := mime.ParseMediaType(w.Header().Get("Content-Type"))
	if err != nil || params["boundary"] == "" {
		return w.Body.Bytes()
	}
	return bytes.ReplaceAll(w.Body.Bytes(), []byte(params["boundary"]), []byte("BOUNDARY"))
}

// Over a real connection the body still leaves through the descriptor
// (sendfile reads it through syscall.Conn), whole and correct.
func TestSizedFileOverAConnection(t *testing.T) {
	name, content := sizedFileFixture(t, 3<<20)
	var sawConn bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, err := os.Open(name)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		s := newSizedFile(f, int64(len(content)))
		var rs io.ReadSeeker = s
		_, sawConn = rs.(syscall.Conn)
		http.ServeContent(w, r, "", time.Time{}, s)
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("got %d bytes (%v), want the file's %d", len(got), err, len(content))
	}
	if !sawConn {
		t.Fatal("sizedFile hides the descriptor from the connection: sendfile cannot be used")
	}
}

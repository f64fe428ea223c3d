package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// A download load that drains its bodies must still fail on a wrong
// answer: a short or long body (a truncated download read as a fast
// one), or a status other than 200 (an error page read as a download).
func TestDrainChecksStatusAndLength(t *testing.T) {
	body := bytes.Repeat([]byte("x"), 200<<10) // several of drain's 64 KiB reads
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/missing" {
			http.Error(w, "not found", http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}))
	defer srv.Close()

	if err := drainURL(srv.URL+"/file", len(body)); err != nil {
		t.Fatalf("the whole body: %v", err)
	}
	for _, size := range []int{len(body) - 1, len(body) + 1} {
		err := drainURL(srv.URL+"/file", size)
		if err == nil || !strings.Contains(err.Error(), "bytes, want "+strconv.Itoa(size)) {
			t.Errorf("a body of %d bytes drained as %d: %v", len(body), size, err)
		}
	}
	if err := drainURL(srv.URL+"/missing", len(body)); err == nil || !strings.Contains(err.Error(), ": 404 not found") {
		t.Errorf("a 404: %v", err)
	}
}

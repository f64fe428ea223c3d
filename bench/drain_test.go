package main

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
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

// Each load runs on connections of its own: a 1 MiB granted download that
// reused the idle connections the uploads before it had left read
// 0.62-0.68x of http.FileServer, and 0.89x on connections of its own.
func TestLoadOpensItsOwnConnections(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok"))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()

	for i := range 2 {
		before := opened.Load()
		if s := load(1, 20, func(int) error { return drainURL(srv.URL, 2) }); s.errors > 0 {
			t.Fatalf("load %d: %v", i, s.firstErr)
		}
		if n := opened.Load() - before; n != 1 {
			t.Errorf("load %d opened %d connections, want 1 (one client, keep-alive)", i, n)
		}
	}
}

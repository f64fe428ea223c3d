package main

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestBalancerResendsAnUploadCutWhileItArrives: docs/haproxy.cfg hands a
// request to a replica only once its body is here whole, so a replica that
// dies while a slow client's PUT still streams in loses nothing -- HAProxy
// sends the whole request to the other replica. Without it, HAProxy had
// passed on the first part of the body, cannot send the request again, and
// the client's call fails. The replicas are stand-ins behind the real
// HAProxy and the shipped configuration: one closes the connection with no
// answer on every PUT, as a killed process does, the other takes it.
func TestBalancerResendsAnUploadCutWhileItArrives(t *testing.T) {
	t.Parallel()
	needHAProxy(t)
	var mu sync.Mutex
	var cut int
	var taken []int64
	checked := map[string]bool{}
	dying := standIn(t, func(w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodPut {
			checked["dying"] = true
			return false
		}
		cut++
		return true
	})
	live := standIn(t, func(w http.ResponseWriter, r *http.Request) bool {
		n, _ := io.Copy(io.Discard, r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodPut {
			checked["live"] = true
			return false
		}
		taken = append(taken, n)
		return false
	})
	f := &fleet{t: t, ports: []int{dying, live}, lb: fmt.Sprintf("http://127.0.0.1:%d", freePort(t))}
	f.startBalancer()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return checked["dying"] && checked["live"]
	}, 10*time.Second, 20*time.Millisecond, "HAProxy checks both replicas")

	const size = 60 << 10
	hc := &http.Client{Timeout: 20 * time.Second}
	for i := range 4 {
		body, w := io.Pipe()
		go func() {
			b := bytes.Repeat([]byte("x"), size)
			_, _ = w.Write(b[:size/3])
			time.Sleep(300 * time.Millisecond) // the rest comes later
			_, _ = w.Write(b[size/3:])
			_ = w.Close()
		}()
		req, err := http.NewRequest(http.MethodPut, f.lb+"/files/target", body)
		require.NoError(t, err)
		req.ContentLength = size
		resp, err := hc.Do(req)
		require.NoError(t, err, "PUT %d", i)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "PUT %d", i)
	}
	mu.Lock()
	defer mu.Unlock()
	require.Positive(t, cut, "the dying replica was sent PUTs")
	require.Equal(t, []int64{size, size, size, size}, taken, "each PUT reached the live replica whole, once")
}

// standIn is a loopback HTTP server for the balancer's tests: handle says
// whether to cut the request's connection with no answer; otherwise it
// answers 200 (the checks' GET /readyz too).
func standIn(t *testing.T, handle func(http.ResponseWriter, *http.Request) bool) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !handle(w, r) {
			w.WriteHeader(http.StatusOK)
			return
		}
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/clamdtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
	"github.com/uploadedfile/uploadedfile/internal/testkit/syncbuf"
)

// devServer is a `serve --dev` running in this process.
type devServer struct {
	base, token string
	out         *syncBuffer
	log         *syncbuf.Buffer // what serve logged (stderr)
	stop        func() error    // stops serve as a signal would, returning its error
}

// syncBuffer is what serve printed, read while it runs.
type syncBuffer struct {
	ch  chan []byte
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.ch <- append([]byte(nil), p...)
	return len(p), nil
}

// startDev runs `serve --dev` on a fresh migrated database with config
// (YAML, localRoot added) and extra flags until t ends.
func startDev(t *testing.T, config string, args ...string) *devServer {
	t.Helper()
	return startDevOn(t, pgtest.NewDatabase(t), config, args...)
}

// startDevOn is startDev on the database at dbURL.
func startDevOn(t *testing.T, dbURL, config string, args ...string) *devServer {
	t.Helper()
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	if !strings.Contains(config, "localRoot:") {
		config = "localRoot: " + t.TempDir() + "\n" + config
	}
	require.NoError(t, os.WriteFile(cfgFile, []byte(config), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	out := &syncBuffer{ch: make(chan []byte, 64)}
	done := make(chan error, 1)
	logs := &syncbuf.Buffer{}
	go func() {
		cmd := newRootCommand(out, logs)
		cmd.SetArgs(append([]string{"--database-url", dbURL, "serve", "--dev", "--listen", "127.0.0.1:0", "--config", cfgFile, "--no-maintenance"}, args...))
		done <- cmd.ExecuteContext(ctx)
	}()
	errStuck := errors.New("serve did not stop")
	stop := sync.OnceValue(func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(30 * time.Second):
			return errStuck
		}
	})
	t.Cleanup(func() {
		if err := stop(); errors.Is(err, errStuck) {
			t.Error(err)
		}
	})
	deadline := time.After(30 * time.Second)
	for !strings.Contains(out.buf.String(), "DELETE") {
		select {
		case p := <-out.ch:
			out.buf.Write(p)
		case err := <-done:
			t.Fatalf("serve stopped: %v; output: %s", err, out.buf.String())
		case <-deadline:
			t.Fatalf("serve did not start; output: %s", out.buf.String())
		}
	}
	go func() {
		for range out.ch {
		}
	}()
	return &devServer{
		base:  regexp.MustCompile(`listening on (http://[0-9.:]+)`).FindStringSubmatch(out.buf.String())[1],
		token: regexp.MustCompile(`export TOKEN=(\S+)`).FindStringSubmatch(out.buf.String())[1],
		out:   out,
		log:   logs,
		stop:  stop,
	}
}

// dial opens a connection to the server and writes head (lines joined
// with CRLF, the blank line added) and body.
func (d *devServer) dial(t *testing.T, head, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(d.base, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = conn.Write([]byte(strings.ReplaceAll(head, "\n", "\r\n") + "\r\n\r\n" + body))
	require.NoError(t, err)
	return conn
}

// closedWithin reads what the server sends until it closes the connection
// and reports whether it did within limit.
func closedWithin(conn net.Conn, limit time.Duration) (string, bool) {
	_ = conn.SetReadDeadline(time.Now().Add(limit))
	var out bytes.Buffer
	_, err := io.Copy(&out, conn)
	return out.String(), err == nil || errors.Is(err, syscall.ECONNRESET)
}

// TestStalledBodiesAreCutOffOnEveryRoute: a request that declares a small
// body and never sends it is answered or cut off, and its connection
// closed, within bodyIdleTimeout -- on every route class: health, the API
// reference, the development page, an authenticated route that never reads
// a body, a multipart upload, a JSON body, the upload target. Before, net/http
// waited for the body of a route that did not read it (up to 256 KiB) with
// no deadline at all.
func TestStalledBodiesAreCutOffOnEveryRoute(t *testing.T) {
	t.Parallel()
	d := startDev(t, "bodyIdleTimeout: 1s\n")
	auth := "Authorization: Bearer " + d.token
	for name, req := range map[string]struct{ head, body string }{
		"health":           {head: "POST /healthz HTTP/1.1\nHost: x\nContent-Length: 100"},
		"api reference":    {head: "GET /docs/ HTTP/1.1\nHost: x\nContent-Length: 100"},
		"development page": {head: "GET / HTTP/1.1\nHost: x\nContent-Length: 100"},
		"detail":           {head: "GET /uploaded-file/0b0e7a36-3f7c-4d51-9a34-6c2b1c39a001 HTTP/1.1\nHost: x\n" + auth + "\nContent-Length: 100"},
		"multipart":        {head: "POST /uploaded-file HTTP/1.1\nHost: x\n" + auth + "\nContent-Type: multipart/form-data; boundary=b\nContent-Length: 1000", body: "--b\r\n"},
		"json":             {head: "POST /uploaded-file/initiate HTTP/1.1\nHost: x\n" + auth + "\nContent-Type: application/json\nContent-Length: 200", body: `{"originalName":`},
		"upload target":    {head: "PUT /uploaded-file/0b0e7a36-3f7c-4d51-9a34-6c2b1c39a001/content?expires=1&sig=x HTTP/1.1\nHost: x\nContent-Type: text/plain\nContent-Length: 100"},
		"chunked":          {head: "POST /healthz HTTP/1.1\nHost: x\nTransfer-Encoding: chunked", body: "5\r\nab"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			out, closed := closedWithin(d.dial(t, req.head, req.body), 15*time.Second)
			require.True(t, closed, "the connection must be closed; got %q", out)
			require.Less(t, time.Since(start), 10*time.Second)
		})
	}
}

// TestConnectionsPerClientAreLimited: past maxConnectionsPerClient open
// connections from one address, the next is closed at once; once one of
// them closes, a new one is served.
func TestConnectionsPerClientAreLimited(t *testing.T) {
	t.Parallel()
	d := startDev(t, "maxConnectionsPerClient: 4\n")
	addr := strings.TrimPrefix(d.base, "http://")
	held := make([]net.Conn, 4)
	for i := range held {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		held[i] = c
	}
	// Every held connection has been accepted once a request on the last
	// is answered.
	_, err := held[3].Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
	require.NoError(t, err)
	buf := make([]byte, 64)
	_ = held[3].SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := held[3].Read(buf)
	require.NoError(t, err)
	require.Contains(t, string(buf[:n]), "200 OK")

	over, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer over.Close()
	_, _ = over.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
	out, closed := closedWithin(over, 5*time.Second)
	require.True(t, closed)
	require.Empty(t, out, "the fifth connection is closed unanswered")

	held[0].Close()
	var served string
	for range 50 { // the server notices the close on its next read
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		_, _ = c.Write([]byte("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
		served, _ = closedWithin(c, 5*time.Second)
		c.Close()
		if strings.Contains(served, "200 OK") {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.Contains(t, served, "200 OK", fmt.Sprintf("a place came free: %q", served))
}

// TestDevIsForThisMachineOnly: --dev refuses a listener that is not
// loopback, and its token-carrying pages (the upload page, the API
// reference) answer only for the listener's own host names -- a
// DNS-rebinding page, whose Host is its own name, gets 421 and no token.
func TestDevIsForThisMachineOnly(t *testing.T) {
	t.Parallel()
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("localRoot: "+t.TempDir()+"\n"), 0o600))
	_, err := run(t, context.Background(), pgtest.NewDatabase(t), "serve", "--dev", "--listen", "0.0.0.0:0", "--config", cfgFile)
	require.ErrorContains(t, err, "not a loopback address")

	d := startDev(t, "")
	port := d.base[strings.LastIndex(d.base, ":")+1:]
	for _, path := range []string{"/", "/docs/", "/_dev/app.js"} {
		for host, ok := range map[string]bool{"rebound.example:" + port: false, "127.0.0.1.nip.example": false, "localhost:" + port: true, strings.TrimPrefix(d.base, "http://"): true} {
			req, err := http.NewRequest(http.MethodGet, d.base+path, nil)
			require.NoError(t, err)
			req.Host = host
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if ok {
				require.Equal(t, http.StatusOK, resp.StatusCode, "%s at %s", path, host)
			} else {
				require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode, "%s at %s", path, host)
				require.NotContains(t, string(body), d.token)
			}
		}
	}
}

// TestServeNamesBrokenStorage: serve against a bucket that does not exist,
// and against credentials the store refuses -- this replica's
// configuration, not a shared outage -- starts and says why it is not
// ready -- /readyz names the cause -- and hands out no upload target (503
// core.storage.unavailable) instead of targets that cannot work.
func TestServeNamesBrokenStorage(t *testing.T) {
	t.Parallel()
	srv, err := s3test.StartKind(s3test.VersityGW)
	require.NoError(t, err)
	t.Cleanup(srv.Stop)
	bucket := srv.NewBucket(t)
	for name, tc := range map[string]struct{ bucket, key, cause string }{
		"missing bucket":      {bucket: bucket.Bucket + "-missing", key: bucket.AccessKey, cause: "storage configuration not ready: the bucket does not exist"},
		"refused credentials": {bucket: bucket.Bucket, key: "wrong-" + bucket.AccessKey, cause: "storage configuration not ready: the storage credentials were refused"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := startDev(t, fmt.Sprintf("driver: s3\nendpoint: %s\nregion: %s\nforcePathStyle: true\nbucket: %s\naccessId: %s\naccessKey: %s\n",
				bucket.Endpoint, bucket.Region, tc.bucket, bucket.AccessID, tc.key))
			resp, err := http.Get(d.base + "/readyz")
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
			require.Contains(t, string(body), tc.cause)
			require.NotContains(t, string(body), tc.key, "never a credential")

			req, err := http.NewRequest(http.MethodPost, d.base+"/uploaded-file/initiate",
				strings.NewReader(`{"originalName":"a.txt","contentType":"text/plain","sizeBytes":1,"checksum":"sha256:ypeBEsobvcr6wjGzmiPcTaeG7/gUfE5yuYB3ha/uSLs="}`))
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+d.token)
			req.Header.Set("Content-Type", "application/json")
			resp, err = http.DefaultClient.Do(req)
			require.NoError(t, err)
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusServiceUnavailable, resp.StatusCode, string(body))
			require.Contains(t, string(body), `"code":"core.storage.unavailable"`)
		})
	}
}

// TestServeNamesAStoppedScanner: with the scan gate on, serve refuses to
// start while clamd does not answer (it cannot check clamd's stream limit
// against the largest file), naming scan.clamd; a clamd that stops while
// serve runs is a dependency every replica shares: /readyz stays ready
// (the balancer keeps the replica) and names the scanner as unavailable,
// until clamd answers again.
func TestServeNamesAStoppedScanner(t *testing.T) {
	t.Parallel()
	scanner := clamdtest.Start(t, 30)
	scanner.Kill()
	cfgFile := filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("localRoot: "+t.TempDir()+"\nscan:\n  mode: gate\n  clamd: "+scanner.Addr+"\n"), 0o600))
	_, err := run(t, context.Background(), pgtest.NewDatabase(t), "serve", "--dev", "--config", cfgFile, "--listen", "127.0.0.1:0")
	require.ErrorContains(t, err, "scan.clamd: clamd: unavailable")

	scanner.Restart()
	d := startDev(t, "scan:\n  mode: gate\n  clamd: "+scanner.Addr+"\n")
	readyz := func() (int, string) {
		resp, err := http.Get(d.base + "/readyz")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	status, body := readyz()
	require.Equal(t, http.StatusOK, status, body)
	scanner.Kill()
	require.Eventually(t, func() bool {
		status, body = readyz()
		return status == http.StatusOK && strings.Contains(body, "scanner unavailable: clamd did not answer")
	}, 20*time.Second, 100*time.Millisecond, "ready, naming the scanner as unavailable: %s", body)
	scanner.Restart()
	require.Eventually(t, func() bool { _, b := readyz(); return !strings.Contains(b, "unavailable") }, 20*time.Second, 100*time.Millisecond, "the scanner answers again")
}

// TestDevStartupTextNamesWhatItRunsOn: serve --dev says which store and
// which signing secret it runs with -- not "./upload" and "a random
// secret" when S3 and a secret are configured.
func TestDevStartupTextNamesWhatItRunsOn(t *testing.T) {
	t.Parallel()
	d := startDev(t, "")
	require.Regexp(t, `Development mode: files under /\S+, a random signing secret for this run\.`, d.out.buf.String())

	d = startDev(t, "driver: s3\nbucket: photos\nendpoint: http://127.0.0.1:1\nregion: us-east-1\nforcePathStyle: true\naccessId: id\naccessKey: "+
		strings.Repeat("k", 20)+"\nauth:\n  hmacSecret: "+strings.Repeat("s", 40)+"\n")
	out := d.out.buf.String()
	require.Contains(t, out, "Development mode: files in the S3 bucket photos at http://127.0.0.1:1, tokens signed with the configured secret (auth.hmacSecret).")
	require.NotContains(t, out, strings.Repeat("s", 40), "never the secret")
}

package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestDrainAnswersOnIdleConnections: a balancer keeps idle keep-alive
// connections to a replica and sends the next request on one of them.
// While serve drains (SIGTERM, --shutdown-delay) such a connection stays
// open: a request sent on it is answered, with Connection: close, instead
// of meeting a connection the replica closed under it (HAProxy answers
// that with its own 502). Before, the drain closed every idle connection
// the moment it began.
func TestDrainAnswersOnIdleConnections(t *testing.T) {
	t.Parallel()
	k := newKillFixture(t)
	s := startServeOn(t, k.dbURL, k.cfgFile, "127.0.0.1:0", "--shutdown-delay", "3s")
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	r := bufio.NewReader(conn)
	get := func(path string) (*http.Response, error) {
		if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.1\r\nHost: replica\r\n\r\n"); err != nil {
			return nil, err
		}
		require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			return nil, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp, err
	}
	resp, err := get("/healthz")
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.False(t, resp.Close, "a keep-alive connection before the drain")

	require.NoError(t, s.cmd.Process.Signal(syscall.SIGTERM))
	require.Eventually(t, func() bool {
		resp, err := http.Get(s.base + "/readyz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	}, 5*time.Second, 20*time.Millisecond, "the replica drains: not ready")

	resp, err = get("/healthz")
	require.NoError(t, err, "a request on the idle connection is answered during the drain")
	require.True(t, resp.Close, "the answer closes the connection (Connection: close)")
	_, err = get("/healthz")
	require.Error(t, err, "the replica closed the connection after that answer")
}

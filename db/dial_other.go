//go:build !linux

package db

import (
	"syscall"
	"time"
)

// tcpUserTimeout is a no-op where TCP_USER_TIMEOUT does not exist; the
// keepalives and CallTimeout still bound every wait.
func tcpUserTimeout(time.Duration) func(network, address string, c syscall.RawConn) error {
	return nil
}

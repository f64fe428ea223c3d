package db

import (
	"syscall"
	"time"
)

// tcpUserTimeoutOpt is TCP_USER_TIMEOUT (linux/tcp.h).
const tcpUserTimeoutOpt = 0x12

// tcpUserTimeout sets TCP_USER_TIMEOUT on a connection before it
// connects: data the peer has not acknowledged within d closes it, so a
// database that vanished mid-statement is noticed without waiting for the
// kernel's retransmissions (about 15 minutes).
func tcpUserTimeout(d time.Duration) func(network, address string, c syscall.RawConn) error {
	return func(network, _ string, c syscall.RawConn) error {
		if network != "tcp" && network != "tcp4" && network != "tcp6" {
			return nil // a Unix socket has no TCP options
		}
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, tcpUserTimeoutOpt, int(d.Milliseconds()))
		})
		if err != nil {
			return err
		}
		return serr
	}
}

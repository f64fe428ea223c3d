// Package clamd is a client of ClamAV's daemon: it streams bytes to clamd
// with the INSTREAM command and reads its verdict. It is small on purpose
// (no maintained Go client is served by the module proxy here; see
// docs/decisions.md) and fail-closed: only clamd's own "OK" is clean, a
// "FOUND" is infected, and everything else -- an ERROR reply, a size limit,
// a reply it cannot parse, a timeout, a connection that closes -- is an
// error, never a verdict.
//
// The protocol (clamd(8)): send "zINSTREAM\x00", then the bytes as chunks,
// each a 4-byte big-endian length and that many bytes, then a zero-length
// chunk; clamd answers one NUL-terminated line: "stream: OK",
// "stream: <signature> FOUND", or "<message> ERROR" (for instance
// "INSTREAM size limit exceeded. ERROR" past its StreamMaxLength).
package clamd

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ChunkSize is the size of the INSTREAM chunks sent.
const ChunkSize = 64 << 10

// maxReply bounds a reply read from clamd.
const maxReply = 4096

// Verdict is clamd's answer for one stream.
type Verdict struct {
	// Infected: a signature matched.
	Infected bool
	// Unscannable: clamd could not look at all of it -- an archive nested
	// past MaxRecursion, with more entries than MaxFiles, larger than
	// MaxFileSize or MaxScanSize, or encrypted. clamd reports these as
	// heuristic alerts (with AlertExceedsMax and AlertEncrypted on, which
	// the gate requires); without those settings the same streams come
	// back clean.
	Unscannable bool
	// Signature is the matching signature's name, or the alert's (for the
	// server log only).
	Signature string
}

// Alert name prefixes clamd gives to what it could not scan.
const (
	alertLimitsExceeded = "Heuristics.Limits.Exceeded"
	alertEncrypted      = "Heuristics.Encrypted"
)

// Errors of a scan that has no verdict.
var (
	// ErrSizeLimit: the stream is longer than clamd's StreamMaxLength.
	ErrSizeLimit = errors.New("clamd: stream longer than clamd's StreamMaxLength")
	// ErrUnavailable: clamd could not be reached, or did not answer in
	// time.
	ErrUnavailable = errors.New("clamd: unavailable")
	// ErrProtocol: clamd answered something this client does not parse,
	// or an ERROR.
	ErrProtocol = errors.New("clamd: unexpected reply")
)

// Client scans through one clamd.
type Client struct {
	network, address string
	timeout          time.Duration
}

// New returns a client of the clamd at addr, tcp://host:port or
// unix:///path; timeout bounds one whole scan (connecting, streaming and
// waiting for the verdict), default 30s.
func New(addr string, timeout time.Duration) (*Client, error) {
	u, err := url.Parse(addr)
	if err != nil {
		return nil, fmt.Errorf("clamd: address %q: want tcp://host:port or unix:///path", addr)
	}
	c := &Client{timeout: timeout}
	if c.timeout <= 0 {
		c.timeout = 30 * time.Second
	}
	switch {
	case u.Scheme == "tcp" && u.Host != "" && u.Port() != "":
		c.network, c.address = "tcp", u.Host
	case u.Scheme == "unix" && u.Path != "":
		c.network, c.address = "unix", u.Path
	default:
		return nil, fmt.Errorf("clamd: address %q: want tcp://host:port or unix:///path", addr)
	}
	return c, nil
}

// Scan streams r to clamd and returns its verdict. An error is never a
// verdict: the caller must treat it as "not scanned".
func (c *Client) Scan(ctx context.Context, r io.Reader) (Verdict, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	conn, err := c.dial(ctx)
	if err != nil {
		return Verdict{}, err
	}
	defer func() { _ = conn.Close() }()
	if err := stream(conn, r); err != nil {
		// clamd closes the connection past its limit; its reply, if it got
		// one out, says why.
		if reply, rerr := readReply(conn); rerr == nil {
			return parse(reply)
		}
		return Verdict{}, c.ioError(ctx, err)
	}
	reply, err := readReply(conn)
	if err != nil {
		return Verdict{}, c.ioError(ctx, err)
	}
	return parse(reply)
}

// Ping checks that clamd answers.
func (c *Client) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	conn, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.Write([]byte("zPING\x00")); err != nil {
		return c.ioError(ctx, err)
	}
	reply, err := readReply(conn)
	if err != nil {
		return c.ioError(ctx, err)
	}
	if reply != "PONG" {
		return fmt.Errorf("%w: %q to PING", ErrProtocol, reply)
	}
	return nil
}

// MaxThreads is how many scans clamd runs at once (its MaxThreads, read
// from the STATS command's THREADS line): how many streams a client that
// scans many files should keep open.
func (c *Client) MaxThreads(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	conn, err := c.dial(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.Write([]byte("zSTATS\x00")); err != nil {
		return 0, c.ioError(ctx, err)
	}
	reply, err := readReply(conn)
	if err != nil {
		return 0, c.ioError(ctx, err)
	}
	for _, line := range strings.Split(reply, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "THREADS:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		for i := 0; i+1 < len(fields); i++ {
			if fields[i] == "max" {
				if n, err := strconv.Atoi(fields[i+1]); err == nil && n > 0 {
					return n, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("%w: no THREADS max in STATS", ErrProtocol)
}

// CheckStreamLimit streams n bytes of zeros and reports ErrSizeLimit when
// clamd refuses them: a scan of a file of n bytes would not be a scan of
// all of it. Run it at start-up with the largest file the service accepts.
func (c *Client) CheckStreamLimit(ctx context.Context, n int64) error {
	v, err := c.Scan(ctx, io.LimitReader(zeros{}, n))
	if err != nil {
		return err
	}
	if v.Infected {
		return fmt.Errorf("%w: zeros matched %s", ErrProtocol, v.Signature)
	}
	return nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func (c *Client) dial(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, c.network, c.address)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err) //nolint:errorlint // the cause as text: callers match the sentinel, never the network error
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	return conn, nil
}

// ioError: a deadline is ErrUnavailable (clamd too slow), anything else
// too, with its cause.
func (c *Client) ioError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%w: no verdict within %s", ErrUnavailable, c.timeout)
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err) //nolint:errorlint // the cause as text: callers match the sentinel, never the network error
}

// stream sends the INSTREAM command, r in chunks, and the end chunk.
func stream(w io.Writer, r io.Reader) error {
	bw := bufio.NewWriterSize(w, ChunkSize+4)
	if _, err := bw.WriteString("zINSTREAM\x00"); err != nil {
		return err
	}
	buf := make([]byte, ChunkSize)
	var size [4]byte
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			binary.BigEndian.PutUint32(size[:], uint32(n))
			if _, err := bw.Write(size[:]); err != nil {
				return err
			}
			if _, err := bw.Write(buf[:n]); err != nil {
				return err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if _, err := bw.Write([]byte{0, 0, 0, 0}); err != nil {
		return err
	}
	return bw.Flush()
}

// readReply reads one reply: up to its NUL (or, from daemons that send
// none, the connection's end), at most maxReply bytes.
func readReply(r io.Reader) (string, error) {
	br := bufio.NewReader(io.LimitReader(r, maxReply))
	b, err := br.ReadBytes(0)
	if err != nil && (err != io.EOF || len(b) == 0) {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return "", err
	}
	reply := strings.TrimSpace(string(bytes.TrimSuffix(b, []byte{0})))
	if reply == "" {
		return "", io.ErrUnexpectedEOF
	}
	return reply, nil
}

// parse reads a verdict from a reply.
func parse(reply string) (Verdict, error) {
	switch {
	case reply == "stream: OK":
		return Verdict{}, nil
	case strings.HasPrefix(reply, "stream: ") && strings.HasSuffix(reply, " FOUND"):
		sig := strings.TrimSuffix(strings.TrimPrefix(reply, "stream: "), " FOUND")
		if sig == "" {
			return Verdict{}, fmt.Errorf("%w: %q", ErrProtocol, reply)
		}
		if strings.HasPrefix(sig, alertLimitsExceeded) || strings.HasPrefix(sig, alertEncrypted) {
			return Verdict{Unscannable: true, Signature: sig}, nil
		}
		return Verdict{Infected: true, Signature: sig}, nil
	case strings.Contains(reply, "size limit exceeded"):
		return Verdict{}, ErrSizeLimit
	default:
		return Verdict{}, fmt.Errorf("%w: %q", ErrProtocol, reply)
	}
}

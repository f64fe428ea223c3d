package clamd_test

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/clamd"
	"github.com/uploadedfile/uploadedfile/internal/testkit/clamdtest"
)

// TestScanOnTheRealDaemon: clean and infected streams, the signature
// across chunk boundaries and inside a ZIP (a DOCX is one), the stream
// limit, and a daemon that is killed or paused.
func TestScanOnTheRealDaemon(t *testing.T) {
	t.Parallel()
	d := clamdtest.Start(t, 1)
	c, err := clamd.New(d.Addr, 2*time.Second)
	require.NoError(t, err)
	ctx := context.Background()

	v, err := c.Scan(ctx, strings.NewReader("id,amount\n1,42\n"))
	require.NoError(t, err)
	require.False(t, v.Infected)

	threads, err := c.MaxThreads(ctx)
	require.NoError(t, err)
	require.Equal(t, 8, threads, "the daemon's MaxThreads (clamdtest's configuration)")

	v, err = c.Scan(ctx, strings.NewReader(clamdtest.EICAR))
	require.NoError(t, err)
	require.True(t, v.Infected)
	require.Equal(t, clamdtest.Signature, v.Signature)

	// The signature straddles two INSTREAM chunks.
	body := append(bytes.Repeat([]byte{'a'}, clamd.ChunkSize-10), clamdtest.EICAR...)
	v, err = c.Scan(ctx, bytes.NewReader(body))
	require.NoError(t, err)
	require.True(t, v.Infected, "found across a chunk boundary")

	var zbuf bytes.Buffer
	zw := zip.NewWriter(&zbuf)
	f, err := zw.Create("word/document.xml")
	require.NoError(t, err)
	_, _ = f.Write([]byte(clamdtest.EICAR))
	require.NoError(t, zw.Close())
	v, err = c.Scan(ctx, &zbuf)
	require.NoError(t, err)
	require.True(t, v.Infected, "found inside a compressed archive")

	require.NoError(t, c.CheckStreamLimit(ctx, 1<<20-1024))
	_, err = c.Scan(ctx, bytes.NewReader(make([]byte, 2<<20)))
	require.ErrorIs(t, err, clamd.ErrSizeLimit, "past StreamMaxLength is an error, never a verdict")
	require.ErrorIs(t, c.CheckStreamLimit(ctx, 2<<20), clamd.ErrSizeLimit)

	d.Pause()
	start := time.Now()
	_, err = c.Scan(ctx, strings.NewReader(clamdtest.EICAR))
	require.ErrorIs(t, err, clamd.ErrUnavailable, "a daemon slower than the timeout")
	require.Less(t, time.Since(start), 10*time.Second)
	d.Resume()

	d.Kill()
	_, err = c.Scan(ctx, strings.NewReader("a"))
	require.ErrorIs(t, err, clamd.ErrUnavailable, "a daemon that is gone")
	d.Restart()
	_, err = c.Scan(ctx, strings.NewReader("a"))
	require.NoError(t, err)
}

// TestRepliesAreParsedFailClosed: what a daemon could answer, served on
// loopback -- only "stream: OK" is clean; ERROR, an empty or cut reply and
// garbage are errors.
func TestRepliesAreParsedFailClosed(t *testing.T) {
	t.Parallel()
	for reply, want := range map[string]error{
		"stream: OK\x00":                          nil,
		"stream: Eicar-Test FOUND\x00":            nil,
		"INSTREAM size limit exceeded. ERROR\x00": clamd.ErrSizeLimit,
		"stream: Can't allocate memory ERROR\x00": clamd.ErrProtocol,
		"stream:  FOUND\x00":                      clamd.ErrProtocol,
		"UNKNOWN COMMAND\x00":                     clamd.ErrProtocol,
		"":                                        clamd.ErrUnavailable,
		"stream: OK and then some more words\x00": clamd.ErrProtocol,
	} {
		addr := serveOnce(t, reply)
		c, err := clamd.New(addr, time.Second)
		require.NoError(t, err)
		v, err := c.Scan(context.Background(), strings.NewReader("data"))
		if want == nil {
			require.NoError(t, err, "%q", reply)
			require.Equal(t, strings.Contains(reply, "FOUND"), v.Infected, "%q", reply)
			continue
		}
		require.True(t, errors.Is(err, want), "%q: %v", reply, err)
		require.False(t, v.Infected)
	}
	for _, bad := range []string{"", "clamd:3310", "http://127.0.0.1:3310", "tcp://127.0.0.1", "unix://"} {
		_, err := clamd.New(bad, 0)
		require.Error(t, err, bad)
	}
}

// serveOnce answers one INSTREAM on loopback with reply, after reading the
// whole stream (its chunks up to the zero-length one).
func serveOnce(t *testing.T, reply string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		buf := make([]byte, 64<<10)
		var got []byte
		for !bytes.HasSuffix(got, []byte{0, 0, 0, 0}) {
			n, err := conn.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				return
			}
		}
		_, _ = conn.Write([]byte(reply))
	}()
	return "tcp://" + ln.Addr().String()
}

// TestLimitsAreNeverClean: an archive nested past clamd's MaxRecursion, one
// with more entries than MaxFiles and an encrypted one -- each holding the
// test signature where clamd does not look -- are Unscannable with the
// settings the gate requires (clamdtest runs with them), never clean.
func TestLimitsAreNeverClean(t *testing.T) {
	t.Parallel()
	d := clamdtest.Start(t, 4)
	c, err := clamd.New(d.Addr, 10*time.Second)
	require.NoError(t, err)
	for name, b := range map[string][]byte{"nested": clamdtest.NestedZip, "crowded": clamdtest.CrowdedZip, "encrypted": clamdtest.EncryptedZip} {
		v, err := c.Scan(context.Background(), bytes.NewReader(b))
		require.NoError(t, err, name)
		require.True(t, v.Unscannable, "%s: %+v", name, v)
		require.False(t, v.Infected, name)
		require.True(t, strings.HasPrefix(v.Signature, "Heuristics."), v.Signature)
	}
}

// Package clamdtest starts Debian's clamd for tests: on a free loopback
// port, with a signature database the test writes (the EICAR test string
// as an .ndb signature; no public database is downloaded). A test that
// needs clamd fails, never skips, when /usr/sbin/clamd is missing
// (`.ci/run` installs clamav-daemon).
package clamdtest

import (
	"archive/zip"
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/clamd"
	"github.com/uploadedfile/uploadedfile/service"
)

// EICAR is the antivirus test string: harmless, detected by the database
// Start writes.
const EICAR = `X5O!P%@AP[4\PZX54(P^)7CC)7}$EICAR-STANDARD-ANTIVIRUS-TEST-FILE!$H+H*`

// The container limits the test daemon runs with (docs/operations.md gives
// the settings the scan gate requires; these are lower than clamd's
// defaults so that tests reach them with small files).
const (
	MaxRecursion = 6
	MaxFiles     = 200
)

// Signature is the name clamd reports for EICAR with that database.
const Signature = "UF.Test.EICAR.UNOFFICIAL"

// Binary is Debian's clamd.
const Binary = "/usr/sbin/clamd"

// Daemon is a running clamd.
type Daemon struct {
	// Addr is tcp://127.0.0.1:<port>.
	Addr string
	t    *testing.T
	dir  string
	port int
	maxM int
	cmd  *exec.Cmd
}

// Start runs clamd for t with StreamMaxLength streamMaxMiB MiB and stops it
// when t ends.
func Start(t *testing.T, streamMaxMiB int) *Daemon {
	t.Helper()
	_, err := os.Stat(Binary)
	require.NoError(t, err, "clamd is needed: apt-get install clamav-daemon (.ci/run does)")
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "db"), 0o750))
	sig := fmt.Sprintf("UF.Test.EICAR:0:*:%s\n", hex.EncodeToString([]byte(EICAR)))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "db", "uftest.ndb"), []byte(sig), 0o600))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	d := &Daemon{t: t, dir: dir, port: port, maxM: streamMaxMiB, Addr: fmt.Sprintf("tcp://127.0.0.1:%d", port)}
	d.Restart()
	t.Cleanup(d.Stop)
	return d
}

// Restart starts clamd again (after Kill) and waits until it answers.
func (d *Daemon) Restart() {
	d.t.Helper()
	conf := filepath.Join(d.dir, "clamd.conf")
	require.NoError(d.t, os.WriteFile(conf, []byte(fmt.Sprintf(`Foreground yes
DatabaseDirectory %s
TCPSocket %d
TCPAddr 127.0.0.1
LogFile %s
StreamMaxLength %dM
MaxThreads 8
SelfCheck 0
AlertExceedsMax yes
AlertEncrypted yes
ScanImageFuzzyHash no
MaxScanTime 25000
MaxRecursion %d
MaxFiles %d
`, filepath.Join(d.dir, "db"), d.port, filepath.Join(d.dir, "clamd.log"), d.maxM, MaxRecursion, MaxFiles)), 0o600))
	d.cmd = exec.Command(Binary, "-c", conf)
	require.NoError(d.t, d.cmd.Start())
	c, err := clamd.New(d.Addr, 2*time.Second)
	require.NoError(d.t, err)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if err := c.Ping(context.Background()); err == nil {
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(d.dir, "clamd.log"))
			d.t.Fatalf("clamd did not answer in 60s: %s", log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Scanner is a service scanner through this daemon, each scan bounded by
// timeout (as the server builds it from scan.clamd).
func (d *Daemon) Scanner(timeout time.Duration) service.Scanner {
	d.t.Helper()
	c, err := clamd.New(d.Addr, timeout)
	require.NoError(d.t, err)
	return func(ctx context.Context, r io.Reader) (service.ScanVerdict, error) {
		v, err := c.Scan(ctx, r)
		return service.ScanVerdict{Infected: v.Infected, Unscannable: v.Unscannable, Signature: v.Signature}, err
	}
}

// Kill SIGKILLs clamd.
func (d *Daemon) Kill() {
	if d.cmd != nil && d.cmd.Process != nil {
		_ = d.cmd.Process.Kill()
		_ = d.cmd.Wait()
	}
}

// Pause stops clamd (SIGSTOP): it accepts connections and answers nothing.
func (d *Daemon) Pause() { _ = d.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume continues a paused clamd.
func (d *Daemon) Resume() { _ = d.cmd.Process.Signal(syscall.SIGCONT) }

// Stop ends clamd.
func (d *Daemon) Stop() {
	d.Resume()
	d.Kill()
}

// Archives clamd cannot judge whole, each holding EICAR where only a scan
// past the daemon's limits would find it: with AlertExceedsMax and
// AlertEncrypted they are alerts, without them they came back clean.
var (
	// NestedZip nests EICAR MaxRecursion+2 ZIPs deep.
	NestedZip = func() []byte {
		b := []byte(EICAR)
		for i := range MaxRecursion + 2 {
			b = zipOf([]zipEntry{{fmt.Sprintf("level%d.zip", i), b}}, 0)
		}
		return b
	}()
	// CrowdedZip holds MaxFiles+50 harmless entries, then EICAR.
	CrowdedZip = func() []byte {
		var entries []zipEntry
		for i := range MaxFiles + 50 {
			entries = append(entries, zipEntry{fmt.Sprintf("f%05d.txt", i), []byte("x")})
		}
		return zipOf(append(entries, zipEntry{"last.txt", []byte(EICAR)}), 0)
	}()
	// EncryptedZip marks its one entry, EICAR, as encrypted (general
	// purpose flag bit 0): a scanner cannot read what it holds.
	EncryptedZip = zipOf([]zipEntry{{"secret.txt", []byte(EICAR)}}, 1)
)

type zipEntry struct {
	name    string
	content []byte
}

func zipOf(entries []zipEntry, flags uint16) []byte {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, e := range entries {
		f, err := zw.CreateHeader(&zip.FileHeader{Name: e.name, Method: zip.Deflate, Flags: flags})
		if err != nil {
			panic(err)
		}
		_, _ = f.Write(e.content)
	}
	if err := zw.Close(); err != nil {
		panic(err)
	}
	return b.Bytes()
}

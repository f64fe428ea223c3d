package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/png"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/imagevariant"
	"github.com/uploadedfile/uploadedfile/internal/servecontent"
	"github.com/uploadedfile/uploadedfile/internal/testkit/clamdtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
	"github.com/uploadedfile/uploadedfile/internal/testkit/procstat"
)

// The hostile suite's server: small limits, so that each attack reaches
// them quickly.
const (
	hostileMaxPixels   = 8_000_000
	hostileIdleTimeout = 2 * time.Second
	hostileMaxConns    = 64
)

// hostileServer is `uploadedfile serve --dev`, built without the race
// detector (its memory is what is measured), in a process of its own.
type hostileServer struct {
	cmd    *exec.Cmd
	base   string
	secret []byte
	token  string // the development token
}

// TestHostileSuite (`make hostile`; `make test` runs it too) drives every
// attack of docs/security.md against a real serve and records, after each,
// the server's peak memory (VmHWM) and open descriptors: stalled bodies,
// a crowd of connections from one client, thousands of ranges, oversized
// and many large tokens, a foreign Host on the development pages, variants
// of a one-row and a one-column image at the pixel limit, archives past
// clamd's limits and an encrypted one, a ZIP whose extra field hides what
// follows, an HTML-looking file, and the resumable route's (hostileTus).
// Each must answer as documented; the peak
// must stay under the documented bound and the descriptors must come back.
func TestHostileSuite(t *testing.T) {
	t.Parallel()
	s := startHostile(t)
	base := s.stats(t)
	var summary []string
	record := func(attack, answer string) {
		st := s.stats(t)
		summary = append(summary, fmt.Sprintf("%-34s %-44s %6d MiB peak %5d fds", attack, answer, st.hwm>>20, st.fds))
	}

	// Stalled bodies: closed after bodyIdleTimeout, every descriptor back.
	conns := make([]net.Conn, 200)
	var wg sync.WaitGroup
	var closed sync.Map
	for i := range conns {
		c := s.rawConn(t)
		conns[i] = c
		_, err := fmt.Fprintf(c, "POST /uploaded-file HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n--b\r\n", s.token)
		require.NoError(t, err)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = c.SetReadDeadline(time.Now().Add(4 * hostileIdleTimeout))
			_, err := io.Copy(io.Discard, c)
			if err == nil || !isTimeout(err) {
				closed.Store(i, true)
			}
		}()
	}
	wg.Wait()
	n := 0
	closed.Range(func(any, any) bool { n++; return true })
	require.Equal(t, len(conns), n, "every stalled connection is closed by the server")
	require.Eventually(t, func() bool { return s.stats(t).fds <= base.fds+8 }, 10*time.Second, 100*time.Millisecond, "descriptors come back")
	record("200 stalled bodies", fmt.Sprintf("all closed within %s", hostileIdleTimeout))

	// A crowd from one client: past maxConnectionsPerClient, closed at once.
	var crowd []net.Conn
	for range hostileMaxConns + 40 {
		crowd = append(crowd, s.rawConn(t))
	}
	refused := 0
	for _, c := range crowd {
		_ = c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err != nil && !isTimeout(err) {
			refused++
		}
	}
	require.GreaterOrEqual(t, refused, 40)
	for _, c := range crowd {
		c.Close()
	}
	record(fmt.Sprintf("%d connections at once", hostileMaxConns+40), fmt.Sprintf("%d closed at once", refused))

	// Ranges: twenty thousand one-byte ranges.
	id := s.upload(t, "digits.txt", []byte(strings.Repeat("0123456789", 10)))
	ranges := make([]string, 8000) // under the 64 KiB of headers
	for i := range ranges {
		ranges[i] = fmt.Sprintf("%d-%d", i%100, i%100)
	}
	resp, body := s.do(t, "GET", "/uploaded-file/"+id+"/download", s.token, map[string]string{"Range": "bytes=" + strings.Join(ranges, ",")}, nil)
	require.Equal(t, http.StatusRequestedRangeNotSatisfiable, resp.StatusCode)
	require.Less(t, len(body), 200)
	require.Equal(t, servecontent.ContentSecurityPolicy, s.headerOf(t, "/uploaded-file/"+id+"/download").Get("Content-Security-Policy"), "an HTML-looking file is sandboxed")
	record("8,000 ranges", fmt.Sprintf("416, %d bytes", len(body)))

	// Tokens: oversized ones refused before decoding; many large valid ones
	// fill the verified-token cache only up to its bytes.
	for i := range 50 {
		resp, _ := s.do(t, "GET", "/uploaded-file/usage", s.sign(t, map[string]any{"pad": strings.Repeat("p", 32<<10), "n": i}), nil, nil)
		require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	}
	for i := range 50 {
		resp, _ := s.do(t, "GET", "/uploaded-file/usage", s.sign(t, map[string]any{"pad": strings.Repeat("p", 200<<10), "n": i}), nil, nil)
		require.Equal(t, http.StatusRequestHeaderFieldsTooLarge, resp.StatusCode)
	}
	for i := range 3000 {
		resp, _ := s.do(t, "GET", "/uploaded-file/usage", s.sign(t, map[string]any{"pad": strings.Repeat("p", 5<<10), "n": i}), nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode)
	}
	record("tokens: 32 KiB, 200 KiB, 3,000x 7 KiB", "401, 431, 200 (cache bounded in bytes)")

	// The development pages for a rebound Host.
	resp, body = s.do(t, "GET", "/", "", map[string]string{"Host": "rebound.example"}, nil)
	require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
	require.NotContains(t, string(body), s.token)
	record("dev page, foreign Host", "421, no token")

	// Variants of a one-row and a one-column image at the pixel limit.
	for name, size := range map[string]image.Point{"row": {hostileMaxPixels, 1}, "column": {1, hostileMaxPixels}} {
		var b bytes.Buffer
		require.NoError(t, png.Encode(&b, image.NewGray(image.Rect(0, 0, size.X, size.Y))))
		id := s.upload(t, name+".png", b.Bytes())
		resp, body := s.do(t, "GET", "/uploaded-file/"+id+"/variants/thumb", s.token, nil, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		record("variant of a "+strconv.Itoa(size.X)+"x"+strconv.Itoa(size.Y)+" PNG", "200")
	}

	// Archives clamd cannot judge, and a ZIP whose extra field overruns.
	for name, archive := range map[string][]byte{"nested": clamdtest.NestedZip, "crowded": clamdtest.CrowdedZip, "encrypted": clamdtest.EncryptedZip} {
		resp, body := s.multipart(t, name+".zip", archive)
		require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, string(body))
		require.Contains(t, string(body), `"rule":"content.unscannable"`)
		record(name+" archive (scan gate)", "422 content.unscannable")
	}
	resp, body = s.multipart(t, "plan.docx", overrunningDOCX(t))
	require.Equal(t, http.StatusUnprocessableEntity, resp.StatusCode, string(body))
	require.Contains(t, string(body), `"rule":"zip.bad-extra-field"`)
	record("ZIP extra field overrun", "422 zip.bad-extra-field")

	hostileTus(t, s, record)

	final := s.stats(t)
	bound := base.hwm + 2*imagevariant.PerSlotBytes(hostileMaxPixels, 64*48) + 16<<20 /* token cache */ + 128<<20
	t.Logf("hostile suite (baseline %d MiB, %d fds; bound %d MiB):\n%s", base.hwm>>20, base.fds, bound>>20, strings.Join(summary, "\n"))
	require.Less(t, final.hwm, bound, "peak memory within the documented bound")
	require.LessOrEqual(t, final.fds-final.sockets, base.fds-base.sockets+8, "no file held after the attacks")
	require.LessOrEqual(t, final.sockets, base.sockets+8+int(db.RequestLimits.MaxConns), "no connection held after the attacks but the pools' own")
}

// startHostile builds the binary without -race and starts serve --dev
// with the suite's limits, clamd's gate and a variant preset.
func startHostile(t *testing.T) *hostileServer {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "uploadedfile")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	require.NoError(t, err, "build the server without -race: %s", out)
	d := clamdtest.Start(t, 30)
	secret := []byte(strings.Repeat("h", 40))
	cfg := filepath.Join(dir, "config.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte(fmt.Sprintf(`localRoot: %s
auth:
  hmacSecret: %s
bodyIdleTimeout: %s
maxConnectionsPerClient: %d
variants:
  maxPixels: %d
  concurrency: 2
  presets:
    thumb: {width: 64, height: 48, fit: inside, format: jpeg}
scan:
  mode: gate
  clamd: %s
`, filepath.Join(dir, "files"), secret, hostileIdleTimeout, hostileMaxConns, hostileMaxPixels, d.Addr)), 0o600))
	cmd := exec.Command(bin, "--database-url", pgtest.NewDatabase(t), "serve", "--dev", "--listen", "127.0.0.1:0", "--config", cfg, "--no-maintenance")
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	s := &hostileServer{cmd: cmd, secret: secret}
	lines := bufio.NewScanner(stdout)
	for lines.Scan() && (s.base == "" || s.token == "") {
		if m := regexp.MustCompile(`listening on (http://[0-9.:]+)`).FindStringSubmatch(lines.Text()); m != nil {
			s.base = m[1]
		}
		if m := regexp.MustCompile(`export TOKEN=(\S+)`).FindStringSubmatch(lines.Text()); m != nil {
			s.token = m[1]
		}
	}
	require.NotEmpty(t, s.token, "serve --dev printed its token")
	go io.Copy(io.Discard, stdout)
	return s
}

type procStats struct {
	hwm int64
	fds int
	// sockets counts the descriptors that are sockets: the listener, the
	// clients' connections, and the database pools' connections, which a
	// burst of concurrent requests grows (to db.RequestLimits.MaxConns)
	// and which stay open, idle, by design.
	sockets int
}

// stats reads the server's peak resident memory and its open descriptors.
func (s *hostileServer) stats(t *testing.T) procStats {
	t.Helper()
	pid := strconv.Itoa(s.cmd.Process.Pid)
	var st procStats
	hwm, err := procstat.VmHWM(pid)
	require.NoError(t, err)
	st.hwm = hwm
	fds, err := os.ReadDir("/proc/" + pid + "/fd")
	require.NoError(t, err)
	st.fds = len(fds)
	for _, f := range fds {
		if target, err := os.Readlink("/proc/" + pid + "/fd/" + f.Name()); err == nil && strings.HasPrefix(target, "socket:") {
			st.sockets++
		}
	}
	return st
}

func (s *hostileServer) rawConn(t *testing.T) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.base, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

// sign is a token of the development user with extra claims.
func (s *hostileServer) sign(t *testing.T, extra map[string]any) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": "dev-user", "tenant": "dev", "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range extra {
		claims[k] = v
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(s.secret)
	require.NoError(t, err)
	return tok
}

// do sends a request (a fresh connection each: the suite's own
// connections never count against the per-client limit for long).
func (s *hostileServer) do(t *testing.T, method, path, token string, headers map[string]string, body []byte) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, s.base+path, bytes.NewReader(body))
	require.NoError(t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	req.Close = true
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, b
}

func (s *hostileServer) headerOf(t *testing.T, path string) http.Header {
	t.Helper()
	resp, _ := s.do(t, "GET", path, s.token, nil, nil)
	return resp.Header
}

func (s *hostileServer) multipart(t *testing.T, name string, content []byte) (*http.Response, []byte) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	part, err := w.CreateFormFile("file", name)
	require.NoError(t, err)
	_, _ = part.Write(content)
	require.NoError(t, w.Close())
	return s.do(t, "POST", "/uploaded-file", s.token, map[string]string{"Content-Type": w.FormDataContentType()}, b.Bytes())
}

// upload stores content as name and returns the file's id.
func (s *hostileServer) upload(t *testing.T, name string, content []byte) string {
	t.Helper()
	resp, body := s.multipart(t, name, content)
	require.Equal(t, http.StatusCreated, resp.StatusCode, string(body))
	var f struct{ ID string }
	require.NoError(t, json.Unmarshal(body, &f))
	return f.ID
}

// overrunningDOCX is a DOCX whose document part's extra field holds a
// block that declares more bytes than the field has (a ZIP64 record
// follows it for a reader that trusts the block).
func overrunningDOCX(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	w := zip.NewWriter(&b)
	for _, p := range []struct {
		name, body string
		extra      []byte
	}{
		{"[Content_Types].xml", `<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types"/>`, nil},
		{"word/document.xml", `<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"/>`, []byte{0x55, 0x54, 0x20, 0x00, 0x01, 0x00, 0x08, 0x00, 1}},
	} {
		f, err := w.CreateHeader(&zip.FileHeader{Name: p.name, Method: zip.Deflate, Extra: p.extra})
		require.NoError(t, err)
		_, _ = f.Write([]byte(p.body))
	}
	require.NoError(t, w.Close())
	return b.Bytes()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

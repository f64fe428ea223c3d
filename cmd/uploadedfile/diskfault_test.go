package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/eiofs"
	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// A local root that is full answers the upload that needs room 503
// core.storage.unavailable with the rule storage.no-space (retryable) and
// leaves no row behind it; the operator sees one log line for the episode,
// the failures counted under outcome no_space, and a readiness body that
// says the store has no space -- while the replica stays ready (every
// replica shares the disk). The root is a 1 MiB tmpfs mounted for the test
// (the tests run as root, as CI does).
func TestFullDiskIsNamed(t *testing.T) {
	t.Parallel()
	root := mountTmpfs(t, "1m")
	dbURL := pgtest.NewDatabase(t)
	d := startDevOn(t, dbURL, "localRoot: "+root+"\n")

	upload := func(size int) (int, string) {
		return d.bufferUpload(t, "rows.txt", bytes.Repeat([]byte("a full disk says so\n"), size/20))
	}
	status, body := upload(600 << 10) // takes most of the room
	require.Equal(t, http.StatusCreated, status, body)
	requireRefusedFor(t, func() (int, string) { return upload(600 << 10) }, "storage.no-space")

	awaitReadyNaming(t, d.base, "storage unavailable: no space left")

	requireStorageOutcome(t, d, "no_space")

	require.Equal(t, 1, strings.Count(d.log.String(), "storage: no space left"), "one log line for the episode:\n%s", d.log.String())

	require.Equal(t, 1, fileRows(t, dbURL), "the refused uploads left no row")
}

// TestReadOnlyDiskIsNamed: a local root remounted read-only refuses every
// upload with 503 core.storage.unavailable, rule storage.read-only,
// retryable, and nothing left behind; the operator reads "read-only" in
// the readiness body and one log line for the episode; the replica stays
// ready. (The tests run as root, as CI does.)
func TestReadOnlyDiskIsNamed(t *testing.T) {
	t.Parallel()
	root := mountTmpfs(t, "4m")
	dbURL := pgtest.NewDatabase(t)
	d := startDevOn(t, dbURL, "localRoot: "+root+"\n")

	upload := func() (int, string) {
		return d.bufferUpload(t, "rows.txt", []byte("a read-only disk says so\n"))
	}
	status, body := upload()
	require.Equal(t, http.StatusCreated, status, body)
	out, err := exec.Command("mount", "-o", "remount,ro", root).CombinedOutput()
	require.NoError(t, err, "remount read-only: %s", out)
	requireRefusedFor(t, upload, "storage.read-only")
	awaitReadyNaming(t, d.base, "storage unavailable: read-only")
	require.Equal(t, 1, strings.Count(d.log.String(), "storage: the store is read-only"), "one log line for the episode:\n%s", d.log.String())

	require.Equal(t, 1, fileRows(t, dbURL), "the refused uploads left no row")
}

// TestIOErrorIsNamed: a local root whose disk answers writes with EIO (a
// FUSE loopback switched to fail, internal/testkit/eiofs) refuses every
// upload with 503 core.storage.unavailable, rule storage.io-error,
// retryable, and nothing left behind; the operator reads "I/O error" in
// the readiness body, one log line for the episode and the failures
// counted under outcome io_error; reads of the files already stored go on;
// once the disk writes again, so do uploads.
func TestIOErrorIsNamed(t *testing.T) {
	t.Parallel()
	backing, root := t.TempDir(), t.TempDir()
	disk := eiofs.Mount(t, backing, root)
	dbURL := pgtest.NewDatabase(t)
	d := startDevOn(t, dbURL, "localRoot: "+root+"\n")

	upload := func() (int, string) {
		return d.bufferUpload(t, "rows.txt", []byte("a failing disk says so\n"))
	}
	status, body := upload()
	require.Equal(t, http.StatusCreated, status, "%s\n%s", body, d.log.String())
	stored := regexp.MustCompile(`"id":"([0-9a-f-]{36})"`).FindStringSubmatch(body)
	require.NotNil(t, stored, body)

	disk.Fail(true)
	requireRefusedFor(t, upload, "storage.io-error")
	awaitReadyNaming(t, d.base, "storage unavailable: I/O error")
	requireStorageOutcome(t, d, "io_error")
	require.Equal(t, 1, strings.Count(d.log.String(), "storage: the store reported an I/O error"), "one log line for the episode:\n%s", d.log.String())
	// The refused uploads' rows are inserted before the write, so they
	// stay as deletion claims (invisible) until the deletion sweep removes
	// whatever the failing disk kept of them.
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	var visible, claimed int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FILTER (WHERE deletion_pending_at IS NULL AND upload_pending_at IS NULL AND deleted_at IS NULL),
		count(*) FILTER (WHERE deletion_pending_at IS NOT NULL) FROM uploaded_file`).Scan(&visible, &claimed))
	require.Equal(t, 1, visible, "no refused upload is visible")
	require.Equal(t, 2, claimed, "each refused upload is left to the deletion sweep")
	content := d.download(t, stored[1])
	require.Equal(t, "a failing disk says so\n", content, "reads go on")

	disk.Fail(false)
	require.Eventually(t, func() bool { s, _ := upload(); return s == http.StatusCreated }, 10*time.Second, 200*time.Millisecond, "uploads again once the disk writes")
}

// mountTmpfs mounts a tmpfs of size (mount's size=) for the test and
// returns its directory (the disk tests need root, as CI has).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	out, err := exec.Command("mkdir", "-p", root).CombinedOutput()
	require.NoError(t, err, "%s", out)
	out, err = exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", root).CombinedOutput()
	require.NoError(t, err, "mount a %s tmpfs (the disk tests need root): %s", size, out)
	t.Cleanup(func() { _ = exec.Command("umount", "-l", root).Run() })
	return root
}

// requireRefusedFor: upload, twice, is refused 503
// core.storage.unavailable with rule, retryable.
func requireRefusedFor(t *testing.T, upload func() (int, string), rule string) {
	t.Helper()
	for range 2 {
		status, body := upload()
		require.Equal(t, http.StatusServiceUnavailable, status, body)
		require.Contains(t, body, `"code":"core.storage.unavailable"`)
		require.Contains(t, body, `"rule":"`+rule+`"`)
		require.Contains(t, body, `"retryable":true`)
	}
}

// requireStorageOutcome: the dev server's metrics count failed storage
// calls under outcome.
func requireStorageOutcome(t *testing.T, d *devServer, outcome string) {
	t.Helper()
	metricsURL := regexp.MustCompile(`metrics: +(http://127\.0\.0\.1:\d+/metrics)`).FindStringSubmatch(d.out.buf.String())
	require.NotNil(t, metricsURL, "the dev help names the metrics")
	resp, err := http.Get(metricsURL[1])
	require.NoError(t, err)
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Regexp(t, `uploadedfile_storage_requests_total\{op="[a-z_]+",outcome="`+outcome+`"\} [1-9]`, string(metrics))
}

// bufferUpload sends content as name through the multipart route with the
// development token and returns the answer's status and body.
func (d *devServer) bufferUpload(t *testing.T, name string, content []byte) (int, string) {
	t.Helper()
	var form bytes.Buffer
	w := multipart.NewWriter(&form)
	part, err := w.CreateFormFile("file", name)
	require.NoError(t, err)
	_, _ = part.Write(content)
	require.NoError(t, w.Close())
	req, err := http.NewRequest(http.MethodPost, d.base+"/uploaded-file", &form)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+d.token)
	req.Header.Set("Content-Type", w.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// awaitReadyNaming: readiness stays 200 (a shared disk does not take the
// replica out) and, once a fresh probe answers -- one is reused for a
// quarter of a second -- its body says line.
func awaitReadyNaming(t *testing.T, base, line string) {
	t.Helper()
	var ready string
	require.Eventually(t, func() bool {
		resp, err := http.Get(base + "/readyz")
		require.NoError(t, err)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, "a shared disk does not take the replica out: %s", b)
		ready = string(b)
		return strings.Contains(ready, "storage unavailable")
	}, 5*time.Second, 100*time.Millisecond, "readiness names the store")
	require.Contains(t, ready, line)
}

// fileRows counts the file rows of the database at dbURL.
func fileRows(t *testing.T, dbURL string) int {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), dbURL)
	require.NoError(t, err)
	defer pool.Close()
	var rows int
	require.NoError(t, pool.QueryRow(context.Background(), "SELECT count(*) FROM uploaded_file").Scan(&rows))
	return rows
}

// download reads file id's bytes through its detail's URL with the
// development token.
func (d *devServer) download(t *testing.T, id string) string {
	t.Helper()
	get := func(u string) []byte {
		req, err := http.NewRequest(http.MethodGet, u, nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+d.token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", u, b)
		return b
	}
	var detail struct{ URL string }
	require.NoError(t, json.Unmarshal(get(d.base+"/uploaded-file/"+id), &detail))
	require.NotEmpty(t, detail.URL)
	if strings.HasPrefix(detail.URL, "/") {
		detail.URL = d.base + detail.URL
	}
	return string(get(detail.URL))
}

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/testkit/pgtest"
)

// serveProcess is `uploadedfile serve` in a process of its own (the test
// binary as the real command line).
type serveProcess struct {
	cmd  *exec.Cmd
	base string
}

// startServe starts serve on dbURL with cfgFile and waits until it listens.
func startServe(t *testing.T, dbURL, cfgFile string) *serveProcess {
	t.Helper()
	return startServeOn(t, dbURL, cfgFile, "127.0.0.1:0")
}

// startServeOn is startServe listening on addr (a restart on the same
// address, for clients that hold URLs of the first).
func startServeOn(t *testing.T, dbURL, cfgFile, addr string, flags ...string) *serveProcess {
	t.Helper()
	args := append([]string{"-test.run=^$", "--", "--database-url", dbURL, "serve", "--config", cfgFile, "--listen", addr, "--no-maintenance"}, flags...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "UF_RUN_MAIN=1")
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = io.Discard
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	re := regexp.MustCompile(`listening on (http://[0-9.:]+)`)
	for lines.Scan() {
		if m := re.FindStringSubmatch(lines.Text()); m != nil {
			go io.Copy(io.Discard, out)
			return &serveProcess{cmd: cmd, base: m[1]}
		}
	}
	t.Fatal("serve did not start")
	return nil
}

// killContent is the file the kill tests upload.
var killContent = []byte("%PDF-1.4\n1 0 obj<</Type/Catalog>>endobj\ntrailer<</Root 1 0 R>>\n%%EOF\n")

// killFixture is what the kill tests share: a database, serve's
// configuration (local store at root), alice's token, a connection to
// look at the rows, and the upload's form.
type killFixture struct {
	dbURL, cfgFile, root, token string
	conn                        *pgx.Conn
	t                           *testing.T
}

func newKillFixture(t *testing.T) *killFixture {
	t.Helper()
	k := &killFixture{t: t, dbURL: pgtest.NewDatabase(t), root: t.TempDir()}
	secret := strings.Repeat("k", 40)
	k.cfgFile = filepath.Join(t.TempDir(), "config.yaml")
	require.NoError(t, os.WriteFile(k.cfgFile, []byte("localRoot: "+k.root+"\nauth:\n  hmacSecret: "+secret+"\n"), 0o600))
	var err error
	k.token, err = jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "alice", "tenant": "acme", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	require.NoError(t, err)
	k.conn, err = pgx.Connect(context.Background(), k.dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { k.conn.Close(context.Background()) })
	return k
}

// count is the single number sql answers.
func (k *killFixture) count(sql string) int {
	var n int
	require.NoError(k.t, k.conn.QueryRow(context.Background(), sql).Scan(&n))
	return n
}

// form is the upload's multipart body, built anew for each try (its own
// boundary), and its content type.
func (k *killFixture) form() (string, []byte) {
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	part, err := w.CreateFormFile("file", "r.pdf")
	require.NoError(k.t, err)
	_, _ = part.Write(killContent)
	require.NoError(k.t, w.Close())
	return w.FormDataContentType(), b.Bytes()
}

// TestIdempotentRetryAfterKill: a buffer upload and an initiate whose
// server is SIGKILLed after the write committed and before the client read
// the answer: the retry under the same Idempotency-Key, to a new server,
// answers with the original file -- one row, quota counted once -- and the
// initiate's retry hands out the same upload again.
func TestIdempotentRetryAfterKill(t *testing.T) {
	t.Parallel()
	k := newKillFixture(t)
	dbURL, cfgFile, tok, conn, count, form, content := k.dbURL, k.cfgFile, k.token, k.conn, k.count, k.form, killContent
	initiate := []byte(fmt.Sprintf(`{"originalName":"p.pdf","contentType":"application/pdf","sizeBytes":%d,"checksum":"sha256:z6MYHB7jbovOXjn4SVn0VY6nujLA5FOairPIzoxxbsY="}`, len(content)))

	// The first tries: sent, committed, and the server killed before the
	// answer is read.
	first := startServe(t, dbURL, cfgFile)
	ct, body := form()
	sendUnread(t, first.base, "/uploaded-file", ct, "upload-1", tok, body)
	require.Eventually(t, func() bool {
		return count("SELECT count(*) FROM uploaded_file WHERE status = 'ready' AND upload_pending_at IS NULL") == 1
	},
		10*time.Second, 20*time.Millisecond, "the upload committed")
	sendUnread(t, first.base, "/uploaded-file/initiate", "application/json", "initiate-1", tok, initiate)
	require.Eventually(t, func() bool { return count("SELECT count(*) FROM uploaded_file WHERE status = 'pending'") == 1 },
		10*time.Second, 20*time.Millisecond, "the initiate committed")
	require.NoError(t, first.cmd.Process.Kill())
	_ = first.cmd.Wait()

	// The retries, to a new server.
	second := startServe(t, dbURL, cfgFile)
	ct, body = form()
	status, answer := post(t, second.base, "/uploaded-file", ct, "upload-1", tok, body)
	require.Equal(t, http.StatusCreated, status, answer)
	var f struct{ ID, Status string }
	require.NoError(t, json.Unmarshal(answer, &f))
	var stored string
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT id::text FROM uploaded_file WHERE status = 'ready'").Scan(&stored))
	require.Equal(t, stored, f.ID, "the original file")
	require.Equal(t, "ready", f.Status)
	require.Equal(t, 1, count("SELECT count(*) FROM uploaded_file WHERE status = 'ready'"), "one row")

	status, answer = post(t, second.base, "/uploaded-file/initiate", "application/json", "initiate-1", tok, initiate)
	require.Equal(t, http.StatusCreated, status, answer)
	var init struct {
		ID     string
		Upload struct{ URL string }
	}
	require.NoError(t, json.Unmarshal(answer, &init))
	var pending string
	require.NoError(t, conn.QueryRow(context.Background(), "SELECT id::text FROM uploaded_file WHERE status = 'pending'").Scan(&pending))
	require.Equal(t, pending, init.ID, "the same upload again")
	require.Contains(t, init.Upload.URL, init.ID)
	require.Equal(t, 1, count("SELECT count(*) FROM uploaded_file WHERE status = 'pending'"))
	require.Equal(t, 2, count("SELECT files::int FROM uploaded_file_usage WHERE tenant_code = 'acme' AND user_id = 'alice'"),
		"quota counts each once: the upload and the pending upload")
}

// sendUnread sends a POST with an Idempotency-Key on a connection of its
// own and never reads the answer.
func sendUnread(t *testing.T, base, path, contentType, key, token string, body []byte) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nIdempotency-Key: %s\r\nContent-Length: %d\r\n\r\n", path, token, contentType, key, len(body))
	require.NoError(t, err)
	_, err = c.Write(body)
	require.NoError(t, err)
}

// post sends a POST with an Idempotency-Key and returns the answer.
func post(t *testing.T, base, path, contentType, key, token string, body []byte) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+path, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// TestUploadKeyRecoversADeadUpload: a keyed buffer upload whose server is
// SIGKILLed between its insert and its activation (the test holds the
// activation by locking the event outbox it writes to) leaves a hidden
// row holding the key and its space. A retry under the key while the
// row's activation lease runs is 409; once it has run out -- within 30
// seconds, as nobody extends it --, the retry
// settles the dead row as its writer would have (its object goes, its row is deleted,
// its space comes back) and stores the file: one row, one object, quota
// counted once.
func TestUploadKeyRecoversADeadUpload(t *testing.T) {
	t.Parallel()
	k := newKillFixture(t)
	dbURL, cfgFile, root, tok, conn, count, form := k.dbURL, k.cfgFile, k.root, k.token, k.conn, k.count, k.form
	ctx := context.Background()

	first := startServe(t, dbURL, cfgFile)
	hold, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer hold.Close(ctx)
	_, err = hold.Exec(ctx, "BEGIN; LOCK TABLE uploaded_file_event IN SHARE ROW EXCLUSIVE MODE")
	require.NoError(t, err)
	ct, body := form()
	sendUnread(t, first.base, "/uploaded-file", ct, "upload-dead", tok, body)
	require.Eventually(t, func() bool {
		return count("SELECT count(*) FROM uploaded_file WHERE idempotency_key = 'upload-dead' AND upload_pending_at IS NOT NULL") == 1
	}, 10*time.Second, 20*time.Millisecond, "the upload inserted its row")
	var deadID, deadKey string
	require.NoError(t, conn.QueryRow(ctx, "SELECT id::text, key FROM uploaded_file WHERE idempotency_key = 'upload-dead'").Scan(&deadID, &deadKey))
	require.Eventually(t, func() bool { _, err := os.Stat(filepath.Join(root, deadKey)); return err == nil },
		10*time.Second, 20*time.Millisecond, "and wrote its object; its activation waits")
	require.NoError(t, first.cmd.Process.Kill())
	_ = first.cmd.Wait()
	_, err = hold.Exec(ctx, "ROLLBACK")
	require.NoError(t, err)
	require.Equal(t, 1, count("SELECT files::int FROM uploaded_file_usage WHERE tenant_code = 'acme' AND user_id = 'alice'"), "the dead upload holds its space")

	second := startServe(t, dbURL, cfgFile)
	ct, body = form()
	status, answer := post(t, second.base, "/uploaded-file", ct, "upload-dead", tok, body)
	require.Equal(t, http.StatusConflict, status, "its lease still runs: %s", answer)

	// Nobody extends the dead writer's lease: the key is free one lease
	// (30 s) after the kill, well within a client's patience for a key in
	// flight.
	killed := time.Now()
	for status == http.StatusConflict && time.Since(killed) < time.Minute {
		time.Sleep(time.Second)
		ct, body = form()
		status, answer = post(t, second.base, "/uploaded-file", ct, "upload-dead", tok, body)
	}
	require.Equal(t, http.StatusCreated, status, string(answer))
	require.Less(t, time.Since(killed), 45*time.Second, "free within the lease")
	var f struct{ ID string }
	require.NoError(t, json.Unmarshal(answer, &f))
	require.NotEqual(t, deadID, f.ID, "a new file")
	var key string
	require.NoError(t, conn.QueryRow(ctx, "SELECT key FROM uploaded_file WHERE id = $1 AND status = 'ready'", f.ID).Scan(&key))
	require.Equal(t, 0, count("SELECT count(*) FROM uploaded_file WHERE id = '"+deadID+"' AND deleted_at IS NULL"), "the dead row was deleted")
	_, err = os.Stat(filepath.Join(root, deadKey))
	require.True(t, os.IsNotExist(err), "and its object")
	_, err = os.Stat(filepath.Join(root, key))
	require.NoError(t, err, "the file's object is there")
	require.Equal(t, 1, count("SELECT files::int FROM uploaded_file_usage WHERE tenant_code = 'acme' AND user_id = 'alice'"), "counted once")

	status, again := post(t, second.base, "/uploaded-file", ct, "upload-dead", tok, body)
	require.Equal(t, http.StatusCreated, status)
	var a, b map[string]any
	require.NoError(t, json.Unmarshal(answer, &a))
	require.NoError(t, json.Unmarshal(again, &b))
	for _, m := range []map[string]any{a, b} { // each answer resolves its own url
		require.NotEmpty(t, m["url"])
		delete(m, "url")
		delete(m, "urlExpiredAt")
	}
	require.Equal(t, a, b, "and replayed from now on")
}

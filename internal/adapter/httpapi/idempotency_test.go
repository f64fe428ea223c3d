package httpapi_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/service"
)

// TestIdempotencyKeys: the same Idempotency-Key with the same request
// replays the first answer (the multipart form built again, with another
// boundary, is the same request) and makes one file, counted once; the
// key with another body or on another route is 422; a bad key is 400;
// initiates, deletes and host batches replay too; keys of two callers
// never meet.
func TestIdempotencyKeys(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	user := s.token("acme", "alice", nil)
	host := s.token("acme", "alice", jwt.MapClaims{"scope": httpapi.HostScope})
	withKey := func(key string, r outageRequest) outageRequest {
		r.headers = map[string]string{httpapi.IdempotencyKeyHeader: key}
		return r
	}
	upload := func(key, name, content string) outageResponse {
		ct, body := multipartBody(t, map[string][]byte{name: []byte(content)})
		return do(t, s, withKey(key, outageRequest{method: "POST", path: "/uploaded-file", contentType: ct, body: body.Bytes()}), user, host)
	}

	first := upload("k-1", "r.pdf", pdf)
	require.Equal(t, http.StatusCreated, first.status, first.body)
	again := upload("k-1", "r.pdf", pdf)
	require.Equal(t, http.StatusCreated, again.status, again.body)
	require.JSONEq(t, first.body, again.body, "the first answer, replayed")
	require.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
	var created struct{ Id string }
	require.NoError(t, json.Unmarshal([]byte(first.body), &created))
	require.Equal(t, "/uploaded-file/"+created.Id, first.header.Get("Location"), "a 201 names the created file")
	require.Equal(t, first.header.Get("Location"), again.header.Get("Location"), "and so does its replay")
	var n, files int
	require.NoError(t, s.pool.QueryRow(context.Background(), "SELECT count(*) FROM uploaded_file").Scan(&n))
	require.Equal(t, 1, n, "one file")
	require.NoError(t, s.pool.QueryRow(context.Background(), "SELECT files FROM uploaded_file_usage WHERE tenant_code = 'acme' AND user_id = 'alice'").Scan(&files))
	require.Equal(t, 1, files, "counted once")

	other := upload("k-1", "r.pdf", pdf+"%other\n")
	require.Equal(t, http.StatusUnprocessableEntity, other.status)
	require.Contains(t, other.body, `"code":"core.idempotency.key-reused"`)
	init := do(t, s, withKey("k-1", outageRequest{method: "POST", path: "/uploaded-file/initiate", contentType: "application/json",
		body: mustJSON(t, map[string]any{"originalName": "a.pdf", "contentType": "application/pdf", "sizeBytes": 10, "checksum": checksum([]byte("0123456789"))})}), user, host)
	require.Equal(t, http.StatusUnprocessableEntity, init.status, "the key was used on another route")

	for _, bad := range []string{strings.Repeat("k", 256), "naïve", "tab\there"} {
		resp := upload(bad, "r.pdf", pdf)
		require.Equal(t, http.StatusBadRequest, resp.status)
		require.Contains(t, resp.body, `"code":"core.idempotency.key-invalid"`)
	}

	// Another caller's key of the same name is another key.
	bob := s.token("acme", "bob", nil)
	ct, body := multipartBody(t, map[string][]byte{"b.pdf": []byte(pdf)})
	bobs := do(t, s, withKey("k-1", outageRequest{method: "POST", path: "/uploaded-file", contentType: ct, body: body.Bytes()}), bob, host)
	require.Equal(t, http.StatusCreated, bobs.status, bobs.body)
	require.NotEqual(t, first.body, bobs.body)

	// Initiate: the same id twice.
	initReq := withKey("k-2", outageRequest{method: "POST", path: "/uploaded-file/initiate", contentType: "application/json",
		body: mustJSON(t, map[string]any{"originalName": "a.pdf", "contentType": "application/pdf", "sizeBytes": len(pdf), "checksum": checksum([]byte(pdf))})})
	i1, i2 := do(t, s, initReq, user, host), do(t, s, initReq, user, host)
	require.Equal(t, http.StatusCreated, i1.status, i1.body)
	require.Equal(t, i1.body, i2.body)
	require.Regexp(t, `^/uploaded-file/[0-9a-f-]{36}$`, i1.header.Get("Location"))
	require.Equal(t, i1.header.Get("Location"), i2.header.Get("Location"))

	// Delete: 204, then 204 again (not a 404 for the file it deleted).
	var f struct{ Id string }
	require.NoError(t, json.Unmarshal([]byte(first.body), &f))
	del := withKey("k-3", outageRequest{method: "DELETE", path: "/uploaded-file/" + f.Id})
	d1, d2 := do(t, s, del, user, host), do(t, s, del, user, host)
	require.Equal(t, http.StatusNoContent, d1.status, d1.body)
	require.Equal(t, http.StatusNoContent, d2.status, d2.body)
	plain := do(t, s, outageRequest{method: "DELETE", path: "/uploaded-file/" + f.Id}, user, host)
	require.Equal(t, http.StatusNotFound, plain.status, "without the key the delete runs again")

	// Host batch routes take keys too.
	mark := withKey("k-4", outageRequest{method: "POST", path: "/internal/uploaded-file/mark-used", contentType: "application/json", host: true,
		body: mustJSON(t, map[string]any{"ids": []string{f.Id}, "module": "crm", "entity": "deal", "entityId": "d-1"})})
	m1, m2 := do(t, s, mark, user, host), do(t, s, mark, user, host)
	require.Equal(t, m1.status, m2.status)
	require.Equal(t, "true", m2.header.Get("Idempotent-Replayed"))
}

// TestDeleteRetriedAfterItsRequestDied: a delete whose request committed
// and died before recording its answer (its key still running, the lease
// run out) is answered 204 on the retry under the same key -- the file was
// deleted after the key was first claimed -- not 404; a key first claimed
// after the file was deleted, and another caller's key, still get 404.
func TestDeleteRetriedAfterItsRequestDied(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	user := s.token("acme", "alice", nil)
	ctx := context.Background()
	deleteWith := func(key, id, token string) outageResponse {
		return do(t, s, outageRequest{method: "DELETE", path: "/uploaded-file/" + id, headers: map[string]string{httpapi.IdempotencyKeyHeader: key}}, token, "")
	}
	died := func(key string) { // its answer was never recorded and its lease ran out
		_, err := s.pool.Exec(ctx, `UPDATE uploaded_file_idempotency
			SET state = 'running', lease_until = now() - interval '1 second', fingerprint = NULL, status = NULL, content_type = NULL, body = NULL
			WHERE key = $1`, key)
		require.NoError(t, err)
	}
	upload := func() string {
		ct, body := multipartBody(t, map[string][]byte{"r.pdf": []byte(pdf)})
		resp := do(t, s, outageRequest{method: "POST", path: "/uploaded-file", contentType: ct, body: body.Bytes()}, user, "")
		require.Equal(t, http.StatusCreated, resp.status, resp.body)
		var f struct{ Id string }
		require.NoError(t, json.Unmarshal([]byte(resp.body), &f))
		return f.Id
	}

	id := upload()
	require.Equal(t, http.StatusNoContent, deleteWith("d-1", id, user).status)
	died("d-1")
	retry := deleteWith("d-1", id, user)
	require.Equal(t, http.StatusNoContent, retry.status, retry.body)
	require.Equal(t, "true", retry.header.Get("Idempotent-Replayed"))
	require.Equal(t, http.StatusNoContent, deleteWith("d-1", id, user).status, "and recorded")

	// A key first claimed after the deletion: the file was not deleted
	// under it.
	require.Equal(t, http.StatusNotFound, deleteWith("d-2", id, user).status)
	died("d-2")
	require.Equal(t, http.StatusNotFound, deleteWith("d-2", id, user).status)

	// Another caller, whose key took the same path: nothing of theirs.
	other := upload()
	bob := s.token("acme", "bob", nil)
	require.Equal(t, http.StatusNotFound, deleteWith("d-3", other, bob).status)
	require.Equal(t, http.StatusNoContent, deleteWith("d-4", other, user).status)
	_, err := s.pool.Exec(ctx, "UPDATE uploaded_file_idempotency SET created_at = now() - interval '1 hour' WHERE key = 'd-3'")
	require.NoError(t, err)
	died("d-3")
	require.Equal(t, http.StatusNotFound, deleteWith("d-3", other, bob).status, "bob never sees alice's deletion")
}

// TestIdempotencyKeyInFlight: a request with a key whose first request is
// still running is 409 with Retry-After; once the first is answered, the
// retry gets its answer.
func TestIdempotencyKeyInFlight(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	user := s.token("acme", "alice", nil)
	ct, body := multipartBody(t, map[string][]byte{"r.pdf": []byte(pdf)})
	raw := body.Bytes()
	// The first request sends its head and half its body, and waits.
	conn := rawRequest(t, s, "POST /uploaded-file HTTP/1.1\nHost: x\nAuthorization: Bearer "+user+"\nContent-Type: "+ct+
		"\nIdempotency-Key: k-slow\nContent-Length: "+itoa(len(raw))+"\n")
	_, err := conn.Write(raw[:len(raw)/2])
	require.NoError(t, err)
	require.Eventually(t, func() bool { // the first request holds the key
		var running int
		require.NoError(t, s.pool.QueryRow(context.Background(), "SELECT count(*) FROM uploaded_file_idempotency WHERE key = 'k-slow' AND state = 'running'").Scan(&running))
		return running == 1
	}, 10*time.Second, 20*time.Millisecond)
	second := do(t, s, outageRequest{method: "POST", path: "/uploaded-file", contentType: ct, body: raw,
		headers: map[string]string{httpapi.IdempotencyKeyHeader: "k-slow"}}, user, "")
	require.Equal(t, http.StatusConflict, second.status, second.body)
	require.Contains(t, second.body, `"code":"core.idempotency.in-flight"`)
	require.NotEmpty(t, second.header.Get("Retry-After"))

	_, err = conn.Write(raw[len(raw)/2:])
	require.NoError(t, err)
	out := readUntilClosedOrAnswered(t, conn)
	require.Contains(t, out, "201 Created")
	third := do(t, s, outageRequest{method: "POST", path: "/uploaded-file", contentType: ct, body: raw,
		headers: map[string]string{httpapi.IdempotencyKeyHeader: "k-slow"}}, user, "")
	require.Equal(t, http.StatusCreated, third.status, third.body)
	var n int
	require.NoError(t, s.pool.QueryRow(context.Background(), "SELECT count(*) FROM uploaded_file").Scan(&n))
	require.Equal(t, 1, n)
}

func itoa(n int) string { return strconv.Itoa(n) }

// readUntilClosedOrAnswered reads from conn until a status line arrived
// (and a little more), the server closes, or 10 seconds pass.
func readUntilClosedOrAnswered(t *testing.T, conn net.Conn) string {
	t.Helper()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	var out []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(out), "\r\n\r\n") {
		n, err := conn.Read(buf)
		out = append(out, buf[:n]...)
		if err != nil {
			break
		}
	}
	return string(out)
}

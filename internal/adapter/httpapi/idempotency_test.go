package httpapi_test

import (
	"context"
	"encoding/json"
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
	requireSameFile(t, first.body, again.body, "the first answer, replayed")
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

	for _, bad := range []string{"", strings.Repeat("k", 256), "naïve", "tab\there"} {
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
// retry gets its answer. An initiate claims its key before it runs: the
// test holds the first one after its claim by locking the usage table its
// reservation writes.
func TestIdempotencyKeyInFlight(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	user := s.token("acme", "alice", nil)
	ctx := context.Background()
	req := outageRequest{method: "POST", path: "/uploaded-file/initiate", contentType: "application/json",
		body:    mustJSON(t, map[string]any{"originalName": "a.pdf", "contentType": "application/pdf", "sizeBytes": len(pdf), "checksum": checksum([]byte(pdf))}),
		headers: map[string]string{httpapi.IdempotencyKeyHeader: "k-slow"}}
	release := holdWrites(t, s, "uploaded_file_usage")
	first := make(chan outageResponse, 1)
	go func() { first <- do(t, s, req, user, "") }()
	require.Eventually(t, func() bool { // the first request holds the key
		var running int
		require.NoError(t, s.pool.QueryRow(ctx, "SELECT count(*) FROM uploaded_file_idempotency WHERE key = 'k-slow' AND state = 'running'").Scan(&running))
		return running == 1
	}, 10*time.Second, 20*time.Millisecond)
	second := do(t, s, req, user, "")
	require.Equal(t, http.StatusConflict, second.status, second.body)
	require.Contains(t, second.body, `"code":"core.idempotency.in-flight"`)
	require.NotEmpty(t, second.header.Get("Retry-After"))

	release()
	f := <-first
	require.Equal(t, http.StatusCreated, f.status, f.body)
	third := do(t, s, req, user, "")
	require.Equal(t, http.StatusCreated, third.status, third.body)
	require.Equal(t, "true", third.header.Get("Idempotent-Replayed"))
	require.Equal(t, f.body, third.body)
	var n int
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT count(*) FROM uploaded_file").Scan(&n))
	require.Equal(t, 1, n)
}

// holdWrites holds every write to table until release is called (or the
// test ends): a transaction of the test's locks it against inserts and
// updates.
func holdWrites(t *testing.T, s *server, table string) (release func()) {
	t.Helper()
	ctx := context.Background()
	hold, err := s.pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = hold.Rollback(ctx) })
	_, err = hold.Exec(ctx, "LOCK TABLE "+table+" IN SHARE ROW EXCLUSIVE MODE")
	require.NoError(t, err)
	return func() { require.NoError(t, hold.Rollback(ctx)) }
}

// TestUploadKeyInFlight: a buffer upload's key lives on its file's row,
// claimed by the insert once the bytes are in. While the first request's
// row is hidden (its activation held: the test locks the event outbox the
// activation writes to), a retry is 409 with Retry-After and changes
// nothing; once the first is answered the retry replays it: one file,
// counted once. The same key on an initiate is another request (422).
func TestUploadKeyInFlight(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	user := s.token("acme", "alice", nil)
	ctx := context.Background()
	ct, body := multipartBody(t, map[string][]byte{"r.pdf": []byte(pdf)})
	req := outageRequest{method: "POST", path: "/uploaded-file", contentType: ct, body: body.Bytes(),
		headers: map[string]string{httpapi.IdempotencyKeyHeader: "k-upload"}}

	release := holdWrites(t, s, "uploaded_file_event")
	first := make(chan outageResponse, 1)
	go func() { first <- do(t, s, req, user, "") }()
	require.Eventually(t, func() bool { // inserted, hidden, its activation waiting
		var hidden int
		require.NoError(t, s.pool.QueryRow(ctx, "SELECT count(*) FROM uploaded_file WHERE idempotency_key = 'k-upload' AND upload_pending_at IS NOT NULL").Scan(&hidden))
		return hidden == 1
	}, 10*time.Second, 20*time.Millisecond)
	second := do(t, s, req, user, "")
	require.Equal(t, http.StatusConflict, second.status, second.body)
	require.Contains(t, second.body, `"code":"core.idempotency.in-flight"`)
	retryAfter, err := strconv.Atoi(second.header.Get("Retry-After"))
	require.NoError(t, err)
	require.Equal(t, 5, retryAfter, "soon: the first request is most likely storing its bytes")

	release()
	f := <-first
	require.Equal(t, http.StatusCreated, f.status, f.body)
	require.Empty(t, f.header.Get("Idempotent-Replayed"))
	third := do(t, s, req, user, "")
	require.Equal(t, http.StatusCreated, third.status, third.body)
	require.Equal(t, "true", third.header.Get("Idempotent-Replayed"))
	requireSameFile(t, f.body, third.body, "the first answer")
	require.Equal(t, f.header.Get("Location"), third.header.Get("Location"))
	var n, files int
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT count(*) FROM uploaded_file").Scan(&n))
	require.Equal(t, 1, n, "one file")
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT files FROM uploaded_file_usage WHERE tenant_code = 'acme' AND user_id = 'alice'").Scan(&files))
	require.Equal(t, 1, files, "counted once")

	initiate := do(t, s, outageRequest{method: "POST", path: "/uploaded-file/initiate", contentType: "application/json",
		body:    mustJSON(t, map[string]any{"originalName": "a.pdf", "contentType": "application/pdf", "sizeBytes": len(pdf), "checksum": checksum([]byte(pdf))}),
		headers: map[string]string{httpapi.IdempotencyKeyHeader: "k-upload"}}, user, "")
	require.Equal(t, http.StatusUnprocessableEntity, initiate.status, initiate.body)
	require.Contains(t, initiate.body, `"code":"core.idempotency.key-reused"`)

	// And the other way round: a key an initiate used is not an upload's.
	init := do(t, s, outageRequest{method: "POST", path: "/uploaded-file/initiate", contentType: "application/json",
		body:    mustJSON(t, map[string]any{"originalName": "a.pdf", "contentType": "application/pdf", "sizeBytes": len(pdf), "checksum": checksum([]byte(pdf))}),
		headers: map[string]string{httpapi.IdempotencyKeyHeader: "k-initiate"}}, user, "")
	require.Equal(t, http.StatusCreated, init.status, init.body)
	req.headers = map[string]string{httpapi.IdempotencyKeyHeader: "k-initiate"}
	reused := do(t, s, req, user, "")
	require.Equal(t, http.StatusUnprocessableEntity, reused.status, reused.body)
	require.Contains(t, reused.body, `"code":"core.idempotency.key-reused"`)
	require.NoError(t, s.pool.QueryRow(ctx, "SELECT files FROM uploaded_file_usage WHERE tenant_code = 'acme' AND user_id = 'alice'").Scan(&files))
	require.Equal(t, 2, files, "the refused upload reserved nothing (the file and the pending upload)")
}

// A key first sent under one department and again, with the same request,
// under another department of the same tenant and user is another request:
// 422 key-reused, never a replay whose answer names a file that caller's
// detail refuses. Both kinds of key: the buffer upload's (on its file) and
// an initiate's (a row of its own).
func TestReplayKeepsTheDepartmentScope(t *testing.T) {
	t.Parallel()
	s := start(t, service.DriverLocal)
	d1 := s.token("acme", "alice", jwt.MapClaims{"department": "d1"})
	d2 := s.token("acme", "alice", jwt.MapClaims{"department": "d2"})
	keyed := func(key string, r outageRequest) outageRequest {
		r.headers = map[string]string{httpapi.IdempotencyKeyHeader: key}
		return r
	}
	ct, body := multipartBody(t, map[string][]byte{"r.pdf": []byte(pdf)})
	upload := keyed("dept-upload", outageRequest{method: "POST", path: "/uploaded-file", contentType: ct, body: body.Bytes()})
	first := do(t, s, upload, d1, "")
	require.Equal(t, http.StatusCreated, first.status, first.body)
	again := do(t, s, upload, d1, "")
	require.Equal(t, http.StatusCreated, again.status, "the same department replays: %s", again.body)
	other := do(t, s, upload, d2, "")
	require.Equal(t, http.StatusUnprocessableEntity, other.status, other.body)
	require.Contains(t, other.body, `"code":"core.idempotency.key-reused"`)

	initiate := keyed("dept-initiate", outageRequest{method: "POST", path: "/uploaded-file/initiate", contentType: "application/json",
		body: mustJSON(t, map[string]any{"originalName": "a.pdf", "contentType": "application/pdf", "sizeBytes": 10, "checksum": checksum([]byte("0123456789"))})})
	first = do(t, s, initiate, d1, "")
	require.Equal(t, http.StatusCreated, first.status, first.body)
	again = do(t, s, initiate, d1, "")
	require.Equal(t, http.StatusCreated, again.status, again.body)
	other = do(t, s, initiate, d2, "")
	require.Equal(t, http.StatusUnprocessableEntity, other.status, other.body)
	require.Contains(t, other.body, `"code":"core.idempotency.key-reused"`)
}

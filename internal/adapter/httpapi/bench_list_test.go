package httpapi_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/bench/floor"
)

// listFixture is the list handler and its floor over one owner's 60
// files, and a request of the first page of 50 with their urls.
func listFixture(tb testing.TB) (route, same http.Handler, req func(path string) *http.Request) {
	tb.Helper()
	h, one, fx := benchFixture(tb, 4096, "/")
	listFixtureRows(tb, fx)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /list", floor.SameWorkList(fx.pool, []byte("benchmark-secret")))
	return h, mux, func(path string) *http.Request {
		r := one()
		if !strings.Contains(path, "?") {
			path += "?limit=50&withUrls=true"
		}
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header = r.Header
		return req
	}
}

// listFixtureRows adds the owner's 59 more files, every fifth attached to
// the record invoice inv-7 (eleven files).
func listFixtureRows(tb testing.TB, fx floorFixture) {
	tb.Helper()
	if _, err := fx.pool.Exec(context.Background(), `
INSERT INTO uploaded_file (id, tenant_code, user_id, key, original_name, size_bytes, content_type, status, completed_at, created_at, updated_at, etag,
    used_at, module, entity, entity_id)
SELECT gen_random_uuid(), 't1', 'u1', 'core/t1/list-' || i || '.csv', 'list-' || i || '.csv', 1000 + i, 'text/csv', 'ready',
    now(), now() - i * interval '1 second', now(), md5(i::text),
    CASE WHEN i % 5 = 0 THEN now() END, CASE WHEN i % 5 = 0 THEN 'crm' END,
    CASE WHEN i % 5 = 0 THEN 'invoice' END, CASE WHEN i % 5 = 0 THEN 'inv-7' END
FROM generate_series(1, 59) AS i`); err != nil {
		tb.Fatal(err)
	}
}

// BenchmarkList is GET /uploaded-file, the first page of 50 files with
// their urls, with a cached token.
func BenchmarkList(b *testing.B) {
	h, _, req := listFixture(b)
	runHandler(b, h, func() *http.Request { return req("/uploaded-file") })
}

// BenchmarkSameWorkList is the list's same-work floor of `make bench`
// over the same rows: the difference to BenchmarkList is what the
// service's own code adds to the work a page needs.
func BenchmarkSameWorkList(b *testing.B) {
	_, same, req := listFixture(b)
	runHandler(b, same, func() *http.Request { return req("/list") })
}

// listRecordQuery is a record's files (eleven of the owner's) with their
// urls.
const listRecordQuery = "?entity=invoice&entityId=inv-7&withUrls=true"

// BenchmarkListRecord is GET /uploaded-file, a record's eleven files with
// their urls, with a cached token.
func BenchmarkListRecord(b *testing.B) {
	h, _, req := listFixture(b)
	runHandler(b, h, func() *http.Request { return req("/uploaded-file" + listRecordQuery) })
}

// BenchmarkSameWorkListRecord is the same-work floor of
// BenchmarkListRecord.
func BenchmarkSameWorkListRecord(b *testing.B) {
	_, same, req := listFixture(b)
	runHandler(b, same, func() *http.Request { return req("/list" + listRecordQuery) })
}

// TestSameWorkListAnswersAsTheList holds the list's same-work floor to the
// route's answer: the same files in the same order, each with the same
// fields, a url each, and a next page's cursor.
func TestSameWorkListAnswersAsTheList(t *testing.T) {
	route, same, req := listFixture(t)
	type page struct {
		Items      []map[string]any
		NextCursor string
	}
	answer := func(h http.Handler, path string) page {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req(path))
		require.Equal(t, http.StatusOK, w.Code, w.Body.String())
		var p page
		require.NoError(t, json.Unmarshal(w.Body.Bytes(), &p))
		return p
	}
	ours, floors := answer(route, "/uploaded-file"), answer(same, "/list")
	require.Len(t, ours.Items, 50)
	require.Len(t, floors.Items, 50)
	require.NotEmpty(t, ours.NextCursor)
	require.NotEmpty(t, floors.NextCursor)
	for i := range ours.Items {
		a, b := ours.Items[i], floors.Items[i]
		require.Equal(t, a["id"], b["id"], "item %d", i)
		require.Equal(t, slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b)), "item %d's fields", i)
		require.NotEmpty(t, b["url"])
	}
}

package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	api "github.com/uploadedfile/uploadedfile/gen/api"
	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/service"
)

// TestEveryRouteKeepsItsScope walks every operation of api/openapi.yaml
// that names a file (outageRequests holds a request for each, and fails
// for a new operation without one) and the resumable route's requests,
// with callers that differ from the files' owner in owner, department,
// tenant and role, each through the user routes and as a host. A caller
// whose own detail of the file is 404 gets from every route exactly what
// the same request naming a file that does not exist gets (status,
// headers, body but the request id) and changes nothing; its lists do not
// hold the file. A caller whose detail shows the file (an auditor of its
// department; a host of its tenant) reads it through every read route. A
// record's file (the attached read) is the attached-read policy's to allow,
// within the tenant and department.
func TestEveryRouteKeepsItsScope(t *testing.T) {
	t.Parallel()
	s := startServer(t, service.DriverLocal, nil, []service.Option{service.WithFetcher(pdfFetcher{})}, variantPresets, func(c *service.Config) {
		c.RemoteClone.Enabled = true
		c.AttachedReadPolicy = func(context.Context, service.AttachedReadRequest) (bool, error) { return true, nil }
		c.AuthorizationPolicy = func(_ context.Context, req service.AuthorizationRequest) (service.AccessDecision, error) {
			if slices.Contains(req.Context.Roles, "auditor") {
				return service.DecisionTenant, nil
			}
			return service.DecisionOwner, nil
		}
	})
	as := func(tenant, user, department string, extra jwt.MapClaims) (string, string) {
		claims := jwt.MapClaims{"department": department}
		for k, v := range extra {
			claims[k] = v
		}
		host := jwt.MapClaims{"scope": httpapi.HostScope}
		for k, v := range claims {
			host[k] = v
		}
		return s.token(tenant, user, claims), s.token(tenant, user, host)
	}
	owner, ownerHost := as("acme", "alice", "d1", nil)
	f := outageSetup(t, s, owner, ownerHost)
	before := rowsOf(t, s)

	doc, err := api.GetSpec()
	require.NoError(t, err)
	requests := outageRequests(t, f)
	var reqs []outageRequest
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			name := strings.ToLower(op.OperationID[:1]) + op.OperationID[1:]
			rs, ok := requests[name]
			require.True(t, ok, "operation %s has no request in outageRequests", op.OperationID)
			reqs = append(reqs, rs...)
		}
	}
	reqs = append(reqs, tusOutageRequests(f)...)
	sort.Slice(reqs, func(i, j int) bool { return reqs[i].method+reqs[i].path < reqs[j].method+reqs[j].path })

	walked := 0
	for _, c := range []struct{ name, tenant, user, department, role string }{
		{"another owner", "acme", "bob", "d1", ""},
		{"the owner in another department", "acme", "alice", "d2", ""},
		{"the owner's id in another tenant", "globex", "alice", "d1", ""},
		{"an auditor of the department", "acme", "carol", "d1", "auditor"},
		{"an auditor of another department", "acme", "carol", "d2", "auditor"},
		{"an auditor of another tenant", "globex", "carol", "d1", "auditor"},
	} {
		var extra jwt.MapClaims
		if c.role != "" {
			extra = jwt.MapClaims{"roles": []string{c.role}}
		}
		user, host := as(c.tenant, c.user, c.department, extra)
		// Every fixture file is the owner's: a caller's scope covers all
		// of them or none, and a pending upload has no detail of its own,
		// so the ready file's detail tells for each -- read once per kind
		// of route.
		view := map[bool]bool{false: sees(t, s, false, f.ready, user, host), true: sees(t, s, true, f.ready, user, host)}
		for _, r := range reqs {
			missing := f.ghost(r)
			if missing == nil || r.anonymous {
				continue
			}
			sees := view[r.host]
			if strings.Contains(r.path, "/attached") {
				// A read of a record's file: the attached-read policy
				// (which approves every read here) decides, within the
				// tenant and department, whoever uploaded it.
				sees = c.tenant == "acme" && c.department == "d1"
			}
			label := fmt.Sprintf("%s (sees %v): %s %s", c.name, sees, r.method, r.path)
			read := r.method == http.MethodGet || r.method == http.MethodHead
			if r.path == "/uploaded-file" || r.path == "/internal/uploaded-file" || (sees && !read) {
				// A list or an upload (below), or a write by a caller who
				// may make it: not the walk's concern, and it would change
				// the fixture.
				continue
			}
			got := do(t, s, r, user, host)
			if sees {
				require.NotEqual(t, http.StatusNotFound, got.status, "%s: the caller sees the file: %s", label, got.body)
			} else {
				want := do(t, s, missing(r), user, host)
				gotH, gotB := scrubbed(got)
				wantH, wantB := scrubbed(want)
				require.Equal(t, want.status, got.status, "%s: as a missing file: %s", label, got.body)
				require.Equal(t, wantB, gotB, label)
				require.Equal(t, wantH, gotH, label)
			}
			walked++
		}
		for _, list := range []outageRequest{{method: "GET", path: "/uploaded-file"}, {method: "GET", path: "/internal/uploaded-file", host: true}} {
			got := do(t, s, list, user, host)
			require.Equal(t, http.StatusOK, got.status, got.body)
			require.Equal(t, view[list.host], strings.Contains(got.body, f.ready),
				"%s: %s holds the file exactly when the caller's detail shows it", c.name, list.path)
		}
	}
	require.Equal(t, before, rowsOf(t, s), "nothing the walk sent changed a file")
	t.Logf("scope walk: %d answers of %d requests checked against each caller's own detail", walked, len(reqs))
}

// ghost is how to make request r name a file that does not exist instead
// of the fixture file it names (nil: it names none).
func (f outageFiles) ghost(r outageRequest) func(outageRequest) outageRequest {
	for _, ref := range []string{f.ready, f.image, f.attached, f.pending, f.key, strings.TrimPrefix(f.resumable, "/uploaded-file/tus/")} {
		if ref == "" || !strings.Contains(r.path+string(r.body), ref) {
			continue
		}
		ghost := "0b0e7a36-3f7c-4d51-9a34-6c2b1c39a0ff"
		if ref == f.key {
			ghost = strings.Replace(f.key, f.ready, ghost, 1)
		}
		return func(r outageRequest) outageRequest {
			r.path = strings.ReplaceAll(r.path, ref, ghost)
			r.body = []byte(strings.ReplaceAll(string(r.body), ref, ghost))
			return r
		}
	}
	return nil
}

// sees reports whether the caller's own detail of file shows it: through
// the host route for a host request, the user route otherwise.
func sees(t *testing.T, s *server, host bool, file, user, hostToken string) bool {
	t.Helper()
	path := "/uploaded-file/" + file
	if host {
		path = "/internal/uploaded-file/" + file
	}
	got := do(t, s, outageRequest{method: "GET", path: path, host: host}, user, hostToken)
	require.Contains(t, []int{http.StatusOK, http.StatusNotFound}, got.status, got.body)
	return got.status == http.StatusOK
}

// rowsOf is every file row's state (what a write would change), read
// from the database.
func rowsOf(t *testing.T, s *server) []string {
	t.Helper()
	rows, err := s.pool.Query(context.Background(), `SELECT concat_ws(' ', id, status, upload_pending_at, deletion_pending_at, deleted_at,
		resumable_offset, extra_data, used_at, module, entity, entity_id, updated_at) FROM uploaded_file ORDER BY id`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

var requestIDs = regexp.MustCompile(`"requestId":"[^"]*"`)

// scrubbed is an answer without what differs between two requests: the
// request id (header and body) and the date.
func scrubbed(r outageResponse) (http.Header, string) {
	h := r.header.Clone()
	h.Del("X-Request-Id")
	h.Del("Date")
	return h, requestIDs.ReplaceAllString(r.body, "")
}

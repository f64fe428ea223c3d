package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// listRows is how many files the listing owner has: the deep page is the
// one after all of them but a page.
const listRows = 100_000

// listRecord is the record whose files the record rows list: seven of the
// listing owner's files are attached to it.
const listRecord = "entity=invoice&entityId=inv-7"

// benchList measures the list route: its first page and a page after
// 100,000 rows (the cursor walked there first), both 50 files with their
// signed URLs, the owner's files of one record, and the tenant's first
// page (a second server on the same database and files, whose policy
// gives the admin role the tenant's list), each against its
// same-work floor (floor.SameWorkList: the page's SELECT, the same JSON,
// the URLs and the cursor signed) and as p50 ratios to the HTTP lookup
// floor and to each other, in interleaved rounds.
func benchList(ctx context.Context, e *env, rep *report, bin, tmp, secret string) error {
	if _, err := e.pool.Exec(ctx, `
INSERT INTO uploaded_file (id, tenant_code, user_id, key, original_name, size_bytes, content_type, status, completed_at, created_at, updated_at,
    used_at, module, entity, entity_id)
SELECT gen_random_uuid(), 'bench', 'lister', 'core/bench/list/' || i || '.csv', 'data-' || i || '.csv', 1000 + i, 'text/csv', 'ready',
    now(), now() - i * interval '1 second', now(),
    CASE WHEN i % 10000 = 7 THEN now() END, CASE WHEN i % 10000 = 7 THEN 'crm' END,
    CASE WHEN i % 10000 = 7 THEN 'invoice' END, CASE WHEN i % 10000 = 7 THEN 'inv-7' END
FROM generate_series(1, $1::integer) AS i`, listRows+50); err != nil {
		return err
	}
	if _, err := e.pool.Exec(ctx, "ANALYZE uploaded_file"); err != nil {
		return err
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "lister", "tenant": "bench", "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	if err != nil {
		return err
	}
	route, floor := lister{base: e.uf.url + "/uploaded-file?", token: token}, lister{base: e.raw.url + "/list?", token: token}
	tenantRoute, tenantFloor, stop, err := tenantListers(e, bin, tmp, secret)
	if err != nil {
		return err
	}
	defer stop()
	routeDeep, err := route.deep()
	if err != nil {
		return err
	}
	floorDeep, err := floor.deep()
	if err != nil {
		return err
	}
	for _, l := range []lister{route, floor} {
		if n, _, err := l.page(listRecord); err != nil || n != 11 {
			return fmt.Errorf("list bench: the record has %d files at %s: %w", n, l.base, err)
		}
	}
	_, key, err := e.uploadKeyed(payload(4096))
	if err != nil {
		return err
	}
	rawURL := e.raw.url + "/lookup?key=" + url.QueryEscape(key)
	const n = 2000
	for _, c := range []int{1, 8} {
		call := func(l lister, q string) func() stats {
			return func() stats {
				return load(c, n, func(int) error { _, _, err := l.page(q); return err })
			}
		}
		rs, m, err := measure("list bench",
			call(route, "limit=50&withUrls=true"), call(route, routeDeep),
			call(floor, "limit=50&withUrls=true"), call(floor, floorDeep),
			call(route, listRecord+"&withUrls=true"), call(floor, listRecord+"&withUrls=true"),
			func() stats { return load(c, n, func(int) error { return get(rawURL) }) },
			call(tenantRoute, "limit=50&withUrls=true"), call(tenantFloor, "limit=50&withUrls=true"),
		)
		if err != nil {
			return err
		}
		reportList(rep, clientsLabel(c), rs, m)
	}
	return nil
}

// reportList adds the list rows of one client count: m holds the route's
// first page, deep page, the floor's two, the route's and the floor's
// record page, the HTTP lookup floor, and the route's and the floor's
// tenant page.
func reportList(rep *report, clients string, rs [][]stats, m []stats) {
	const lookupAt = 6
	label := fmt.Sprintf("list GET /uploaded-file, 50 files with their urls, %s", clients)
	for _, row := range []struct {
		what         string
		route, floor int
	}{{"the owner's first page", 0, 2}, {"the owner's page after 100k rows", 1, 3}, {"a record's files (11)", 4, 5}, {"the tenant's first page", 7, 8}} {
		r := ratioOf(rs, row.route, row.floor)
		rep.add(fmt.Sprintf("%s: %s vs its same-work floor (cached token, the page's SELECT, signed urls and cursor, the same JSON)", label, row.what),
			fmt.Sprintf("%s (%.0f vs %.0f req/s; p50 %s vs %s)", r, m[row.route].rps(), m[row.floor].rps(),
				m[row.route].p50.Round(time.Microsecond), m[row.floor].p50.Round(time.Microsecond)), "≥ 0.85×", r.median >= 0.85)
	}
	first, deep, lookup := m[0], m[1], m[lookupAt]
	rep.add(label+": first page p50 vs HTTP lookup floor", fmt.Sprintf("%s (p50 %s vs %s)", p50RatioOf(rs, 0, lookupAt),
		first.p50.Round(time.Microsecond), lookup.p50.Round(time.Microsecond)), "", true)
	r := p50RatioOf(rs, 1, 0)
	rep.add(label+": page after 100k rows vs first page", fmt.Sprintf("%s (p50 %s vs %s)", r,
		deep.p50.Round(time.Microsecond), first.p50.Round(time.Microsecond)), "≤ 1.5×", r.median <= 1.5)
}

// tenantListers are the route's and the floor's lister of the tenant's
// files: a second server on the bench's database and files whose policy
// decides the tenant's list for the admin role, and the floor, both with
// a token of that role; stop ends the server.
func tenantListers(e *env, bin, tmp, secret string) (route, floor lister, stop func(), err error) {
	cfg := filepath.Join(tmp, "list-tenant.yaml")
	if err := writeConfig(cfg, secret, "localRoot: "+e.localRoot+"\n"+`authorizationPolicy: '"admin" in context.roles ? "tenant" : "owner"'`+"\n"); err != nil {
		return lister{}, lister{}, nil, err
	}
	srv, err := startUploadedfile(bin, e.dsn, cfg)
	if err != nil {
		return lister{}, lister{}, nil, err
	}
	token, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": "lister", "tenant": "bench", "roles": []string{"admin"},
		"exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte(secret))
	if err != nil {
		srv.stop()
		return lister{}, lister{}, nil, err
	}
	route, floor = lister{base: srv.url + "/uploaded-file?", token: token}, lister{base: e.raw.url + "/list?", token: token}
	for _, l := range []lister{route, floor} {
		if n, _, err := l.page("limit=50"); err != nil || n != 50 {
			srv.stop()
			return lister{}, lister{}, nil, fmt.Errorf("list bench: the tenant's page has %d files at %s: %w", n, l.base, err)
		}
	}
	return route, floor, srv.stop, nil
}

// lister calls one list endpoint (the route's or its floor's) as the
// listing owner.
type lister struct{ base, token string }

// page gets one page for query q: its files and the next cursor.
func (l lister) page(q string) (files int, next string, err error) {
	req, _ := http.NewRequest(http.MethodGet, l.base+q, nil)
	req.Header.Set("Authorization", "Bearer "+l.token)
	b, err := do(req, http.StatusOK)
	if err != nil {
		return 0, "", err
	}
	var p struct {
		Items      []json.RawMessage
		NextCursor string
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return 0, "", err
	}
	return len(p.Items), p.NextCursor, nil
}

// deep walks listRows files, 200 a page, and is the query of the 50 files
// after them (with their urls).
func (l lister) deep() (string, error) {
	cursor, walked := "", 0
	for walked < listRows {
		n, next, err := l.page("limit=200&cursor=" + url.QueryEscape(cursor))
		if err != nil {
			return "", err
		}
		walked += n
		cursor = next
	}
	q := "limit=50&withUrls=true&cursor=" + url.QueryEscape(cursor)
	if n, _, err := l.page(q); err != nil || n != 50 {
		return "", fmt.Errorf("list bench: the deep page of %s has %d files: %w", l.base, n, err)
	}
	return q, nil
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// listRows is how many files the listing owner has: the deep page is the
// one after all of them but a page.
const listRows = 100_000

// benchList measures the list route: its first page and a page after
// 100,000 rows (the cursor walked there first), both 50 files, as p50
// ratios to the HTTP lookup floor and to each other, in interleaved rounds.
func benchList(ctx context.Context, e *env, rep *report, secret string) error {
	if _, err := e.pool.Exec(ctx, `
INSERT INTO uploaded_file (id, tenant_code, user_id, key, original_name, size_bytes, content_type, status, completed_at, created_at, updated_at)
SELECT gen_random_uuid(), 'bench', 'lister', 'core/bench/list/' || i || '.csv', 'data-' || i || '.csv', 1000 + i, 'text/csv', 'ready',
    now(), now() - i * interval '1 second', now()
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
	page := func(q string) (files int, next string, err error) {
		req, _ := http.NewRequest(http.MethodGet, e.uf.url+"/uploaded-file?"+q, nil)
		req.Header.Set("Authorization", "Bearer "+token)
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
	// Walk to the deep cursor, 200 rows a page.
	cursor, walked := "", 0
	for walked < listRows {
		n, next, err := page("limit=200&cursor=" + url.QueryEscape(cursor))
		if err != nil {
			return err
		}
		walked += n
		cursor = next
	}
	deepQuery := "limit=50&cursor=" + url.QueryEscape(cursor)
	if n, _, err := page(deepQuery); err != nil || n != 50 {
		return fmt.Errorf("list bench: the deep page has %d files: %w", n, err)
	}
	_, key, err := e.uploadKeyed(payload(4096))
	if err != nil {
		return err
	}
	rawURL := e.raw.url + "/lookup?key=" + url.QueryEscape(key)
	const n = 2000
	for _, c := range []int{1, 8} {
		rs, m, err := measure("list bench",
			func() stats { return load(c, n, func(int) error { _, _, err := page("limit=50"); return err }) },
			func() stats { return load(c, n, func(int) error { _, _, err := page(deepQuery); return err }) },
			func() stats { return load(c, n, func(int) error { return get(rawURL) }) },
		)
		if err != nil {
			return err
		}
		first, deep, floor := m[0], m[1], m[2]
		label := fmt.Sprintf("list GET /uploaded-file, 50 files, %s", clientsLabel(c))
		rep.add(label+": first page p50 vs HTTP lookup floor", fmt.Sprintf("%s (p50 %s vs %s)", p50RatioOf(rs, 0, 2),
			first.p50.Round(time.Microsecond), floor.p50.Round(time.Microsecond)), "", true)
		rep.add(label+": page after 100k rows p50 vs HTTP lookup floor", fmt.Sprintf("%s (p50 %s vs %s)", p50RatioOf(rs, 1, 2),
			deep.p50.Round(time.Microsecond), floor.p50.Round(time.Microsecond)), "", true)
		r := p50RatioOf(rs, 1, 0)
		rep.add(label+": page after 100k rows vs first page", fmt.Sprintf("%s (p50 %s vs %s)", r,
			deep.p50.Round(time.Microsecond), first.p50.Round(time.Microsecond)), "≤ 1.5×", r.median <= 1.5)
	}
	return nil
}

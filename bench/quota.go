package main

import (
	"context"
	"fmt"
)

// benchQuota compares buffer uploads on a server with quotas configured
// (limits every upload fits under, so each one is checked and none is
// refused) with a plain server started alike, in pairRounds interleaved
// rounds (the two differ by less than a 2-core host's noise between short
// rounds): the median round's ratio with the worst.
func benchQuota(ctx context.Context, e *env, rep *report, bin, tmp, secret string) error {
	// Two servers of 32 connections each beside the bench's others would
	// pass PostgreSQL's default 100 connections; both get 16 (an upload
	// holds a connection only for its two statements).
	const pool = "pool_max_conns=16"
	withQuota, stop, err := startVariant(ctx, bin, tmp, "quota", secret, `quota:
  tenantBytes: 1099511627776
  tenantFiles: 10000000
  ownerBytes: 1099511627776
  ownerFiles: 10000000
`, pool)
	if err != nil {
		return err
	}
	defer stop()
	// The plain server is started the same way, on a fresh database and
	// file root of its own: the bench's main server has by now the rows
	// and files of every section before (the listing's 100,000 rows among
	// them), which made the comparison one of database states too.
	plain, stopPlain, err := startVariant(ctx, bin, tmp, "quota-off", secret, "", pool)
	if err != nil {
		return err
	}
	defer stopPlain()
	off := &env{uf: plain, token: e.token}
	on := &env{uf: withQuota, token: e.token}
	for _, size := range []int{1 << 20, 64 << 10} {
		body := payload(size)
		ct, form := multipartBody("data.csv", body)
		n := pairCalls(size)
		rs, m, err := measureRounds("quota bench", pairRounds,
			func() stats { return load(32, n, func(int) error { return off.bufferUpload(ct, form) }) },
			func() stats { return load(32, n, func(int) error { return on.bufferUpload(ct, form) }) },
		)
		if err != nil {
			return err
		}
		d := ratioOf(rs, 1, 0)
		rep.add(fmt.Sprintf("buffer upload %s, 32 clients: quotas configured vs none", human(size)),
			fmt.Sprintf("%s (%.0f vs %.0f uploads/s)", d, m[1].rps(), m[0].rps()), "≥ 0.95×", d.median >= 0.95)
	}
	return nil
}

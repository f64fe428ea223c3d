package main

import (
	"context"
	"fmt"
	"sync/atomic"
)

// benchIdempotency measures what an Idempotency-Key costs a buffer upload
// (the target: at most 5 %): 64 KiB uploads from 32 clients to one fresh
// server, each with a key of its own, against the same uploads without
// one, in interleaved rounds. A keyed upload stores its key and its
// request's fingerprint on the file's row, claimed by the insert that
// reserves the file: one more entry of a partial unique index, no
// statement more (docs/decisions.md, "A buffer upload's key on its file's
// row").
func benchIdempotency(ctx context.Context, e *env, rep *report, bin, tmp, secret string) error {
	srv, stop, err := startVariant(ctx, bin, tmp, "idempotency", secret, "")
	if err != nil {
		return err
	}
	defer stop()
	on := &env{uf: srv, token: e.token}
	const size = 64 << 10
	ct, form := multipartBody("data.csv", payload(size))
	var seq atomic.Int64
	keyed := func(int) error {
		return on.bufferUploadWith(on.token, ct, form, fmt.Sprintf("bench-%d", seq.Add(1)))
	}
	n := pairCalls(size)
	rs, m, err := measureRounds("idempotency bench", pairRounds,
		withSched(srv, func() stats { return load(32, n, func(int) error { return on.bufferUpload(ct, form) }) }),
		withSched(srv, func() stats { return load(32, n, keyed) }),
	)
	if err != nil {
		return err
	}
	d := ratioOf(rs, 1, 0)
	rep.add("buffer upload 64 KiB, 32 clients: with an Idempotency-Key vs without",
		fmt.Sprintf("%s (%.0f vs %.0f uploads/s)", d, m[1].rps(), m[0].rps()), "≥ 0.95×", d.median >= 0.95)
	rep.add("buffer upload 64 KiB, 32 clients: the server's, PostgreSQL's and the load generator's accounting per upload, with a key vs without",
		schedVs(medianSched(rs, 1), medianSched(rs, 0)), "", true)
	return nil
}

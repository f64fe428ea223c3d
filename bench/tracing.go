package main

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// benchTracing compares a server exporting every trace (tracing.endpoint
// set, every request, statement and storage call a span) with the plain
// one: detail lookups (p50, 1 and 8 clients) and buffer uploads.
func benchTracing(ctx context.Context, e *env, rep *report, bin, tmp, secret string) error {
	sink, stop, err := discardingServer("/v1/traces", http.StatusOK, "application/x-protobuf") // an empty export response is zero bytes
	if err != nil {
		return err
	}
	defer stop()
	traced, stopTraced, err := startVariant(ctx, bin, tmp, "tracing", secret, "tracing:\n  endpoint: "+sink+"\n")
	if err != nil {
		return err
	}
	defer stopTraced()
	on := &env{uf: traced, token: e.token}
	offID, err := e.upload(e.uf.url, payload(4096))
	if err != nil {
		return err
	}
	onID, err := on.upload(traced.url, payload(4096))
	if err != nil {
		return err
	}
	const n = 3000
	for _, c := range []int{1, 8} {
		rs, m, err := measure("tracing bench",
			func() stats { return load(c, n, func(int) error { return e.detail(offID) }) },
			func() stats { return load(c, n, func(int) error { return on.detail(onID) }) },
		)
		if err != nil {
			return err
		}
		off, with := m[0], m[1]
		rep.add(fmt.Sprintf("detail lookup, %s: tracing on vs off (p50)", clientsLabel(c)),
			fmt.Sprintf("%s (p50 %s vs %s)", p50RatioOf(rs, 1, 0), with.p50.Round(time.Microsecond), off.p50.Round(time.Microsecond)), "", true)
	}
	body := payload(1 << 20)
	ct, form := multipartBody("data.csv", body)
	rs, m, err := measure("tracing bench",
		func() stats { return load(8, count(1<<20), func(int) error { return e.bufferUpload(ct, form) }) },
		func() stats { return load(8, count(1<<20), func(int) error { return on.bufferUpload(ct, form) }) },
	)
	if err != nil {
		return err
	}
	rep.add("buffer upload 1 MiB, 8 clients: tracing on vs off", fmt.Sprintf("%s (%.0f vs %.0f uploads/s)", ratioOf(rs, 1, 0), m[1].rps(), m[0].rps()), "", true)
	return nil
}

// detail is one GET /uploaded-file/{id}.
func (e *env) detail(id string) error {
	_, err := do(e.authed(http.MethodGet, e.uf.url+"/uploaded-file/"+id, nil), http.StatusOK)
	return err
}

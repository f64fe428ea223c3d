package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/uploadedfile/uploadedfile/internal/pgtest"
)

// otlpSink is an OTLP/HTTP endpoint on loopback that accepts and drops
// every export (an empty protobuf ExportTraceServiceResponse is zero bytes).
func otlpSink() (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/v1/traces", func() { _ = srv.Close() }, nil
}

// benchTracing compares a server exporting every trace (tracing.endpoint
// set, every request, statement and storage call a span) with the plain
// one: detail lookups (p50, 1 and 8 clients) and buffer uploads.
func benchTracing(ctx context.Context, e *env, rep *report, bin, tmp, secret string) error {
	sink, stop, err := otlpSink()
	if err != nil {
		return err
	}
	defer stop()
	dsn, drop, err := createDatabase(ctx, pgtest.ServerURL())
	if err != nil {
		return err
	}
	defer drop()
	cfg := filepath.Join(tmp, "tracing.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("maxFileSizeBytes: 26214400\nlocalRoot: %s\nauth:\n  hmacSecret: %s\ntracing:\n  endpoint: %s\n",
		filepath.Join(tmp, "files-tracing"), secret, sink)), 0o600); err != nil {
		return err
	}
	traced, err := startUploadedfile(bin, dsn, cfg)
	if err != nil {
		return err
	}
	defer traced.stop()
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
		m := medianOf(
			func() stats { return load(c, n, func(int) error { return e.detail(offID) }) },
			func() stats { return load(c, n, func(int) error { return on.detail(onID) }) },
		)
		off, with := m[0], m[1]
		if off.errors+with.errors > 0 {
			return fmt.Errorf("tracing bench: %d/%d errors", off.errors, with.errors)
		}
		rep.add(fmt.Sprintf("detail lookup, %s: tracing on vs off (p50)", clientsLabel(c)),
			fmt.Sprintf("%.2f× (p50 %s vs %s)", ratio(with.p50, off.p50), with.p50.Round(time.Microsecond), off.p50.Round(time.Microsecond)), "", true)
	}
	body := payload(1 << 20)
	ct, form := multipartBody("data.csv", body)
	m := medianOf(
		func() stats { return load(8, count(1<<20), func(int) error { return e.bufferUpload(ct, form) }) },
		func() stats { return load(8, count(1<<20), func(int) error { return on.bufferUpload(ct, form) }) },
	)
	rep.add("buffer upload 1 MiB, 8 clients: tracing on vs off", fmt.Sprintf("%.2f× (%.0f vs %.0f uploads/s)", m[1].rps()/m[0].rps(), m[1].rps(), m[0].rps()), "", true)
	return nil
}

// detail is one GET /uploaded-file/{id}.
func (e *env) detail(id string) error {
	_, err := do(e.authed(http.MethodGet, e.uf.url+"/uploaded-file/"+id, nil), http.StatusOK)
	return err
}

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/uploadedfile/uploadedfile/internal/testkit/s3test"
)

// benchUploads measures the buffer upload (multipart route) and/or the
// direct upload (initiate + PUT + complete) against the raw baseline, the
// lifecycle floor and the tus server, all in the same interleaved rounds, so the
// peers are measured once per size and client count. Each ratio is the
// median of the rounds' ratios, with the worst round beside it.
func benchUploads(e *env, rep *report, size, clients int, buffer, direct bool) error {
	body := payload(size)
	ct, form := multipartBody("data.csv", body)
	in := initiateInput(body)
	type kind struct {
		label  string
		upload func(i int) error
		gated  bool // the targets: the buffer upload at 32 clients, 1 MiB and 64 KiB
		spread bool // the one-tenant buffer upload's load over 32 tenants (kinds[0] is that upload)
	}
	var kinds []kind
	gated := clients == 32 && (size == 1<<20 || size == 64<<10)
	if buffer {
		kinds = append(kinds, kind{label: "buffer upload", upload: func(int) error { return e.bufferUpload(ct, form) }, gated: gated})
	}
	if buffer && gated {
		// The same load spread over 32 tenants: every upload of a tenant
		// queues on the tenant's usage row (held until its commit), so
		// the difference to the row above is what that row costs.
		kinds = append(kinds, kind{label: "buffer upload, 32 tenants", upload: func(i int) error {
			return e.bufferUploadAs(e.tenantTokens[i%len(e.tenantTokens)], ct, form)
		}, spread: true})
	}
	if direct {
		kinds = append(kinds, kind{label: "direct upload (initiate+PUT+complete)", upload: func(int) error { return e.directUpload(in, body) }})
	}
	n := count(size)
	loads := []func() stats{
		func() stats { return load(clients, n, func(int) error { return e.rawUpload(ct, form, "/upload") }) },
		withSched(e.raw, func() stats {
			return load(clients, n, func(int) error { return e.rawUpload(ct, form, "/upload-lifecycle") })
		}),
		func() stats { return load(clients, n, func(int) error { return e.tusUpload(body) }) },
	}
	for _, k := range kinds {
		loads = append(loads, withSched(e.uf, func() stats { return load(clients, n, k.upload) }))
	}
	rs, m, err := measure("uploads", loads...)
	if err != nil {
		return err
	}
	raw, spec, tus := m[0], m[1], m[2]
	const rawAt, specAt, tusAt = 0, 1, 2
	for i, k := range kinds {
		uf, at := m[3+i], 3+i
		label := fmt.Sprintf("%s %s, %s", k.label, human(size), clientsLabel(clients))
		vsSpec, vsRaw, vsTus := ratioOf(rs, at, specAt), ratioOf(rs, at, rawAt), ratioOf(rs, at, tusAt)
		if k.spread {
			rep.add(label+": vs lifecycle floor, and vs one tenant", fmt.Sprintf("%s (%.0f vs %.0f uploads/s); %s of one tenant's", vsSpec, uf.rps(), spec.rps(), ratioOf(rs, at, 3)), "", true)
			continue
		}
		// The targets: the lifecycle floor is the upload's same-work
		// floor (the documented lifecycle with nothing else); at least
		// 0.8x of it at 64 KiB, where the features' database work is the
		// largest share, and 0.95x at 1 MiB. The raw baseline is printed
		// for the record.
		specTarget := 0.95
		if size == 64<<10 {
			specTarget = 0.8
		}
		rep.add(label+": vs lifecycle floor (2 commits + fsync + SHA-256)", fmt.Sprintf("%s (%.0f vs %.0f uploads/s; p99 %s vs %s)", vsSpec, uf.rps(), spec.rps(), uf.p99.Round(time.Millisecond), spec.p99.Round(time.Millisecond)),
			targetIf(k.gated, fmt.Sprintf("≥ %.2g×", specTarget)), !k.gated || vsSpec.median >= specTarget)
		rep.add(label+": vs raw baseline (1 commit + fsync)", fmt.Sprintf("%s (%.0f vs %.0f uploads/s; lifecycle floor %.2f× raw)", vsRaw, uf.rps(), raw.rps(), spec.rps()/raw.rps()), "", true)
		rep.add(label+": vs tus", fmt.Sprintf("%s (%.0f vs %.0f uploads/s; p50 %s vs %s)", vsTus, uf.rps(), tus.rps(), uf.p50.Round(time.Millisecond), tus.p50.Round(time.Millisecond)), "", true)
		if k.gated {
			// Where a short ratio's time goes: the server, PostgreSQL and
			// the load generator share the machine's cores.
			rep.add(label+": the server's, PostgreSQL's and the load generator's accounting per upload vs the lifecycle floor's",
				schedVs(medianSched(rs, at), medianSched(rs, specAt)), "", true)
		}
	}
	return nil
}

// schedVs prints two loads' accounting per request side by side: ours
// first, then the floor's.
func schedVs(ours, base perCall) string {
	us := func(d time.Duration) time.Duration { return d.Round(time.Microsecond) }
	out := fmt.Sprintf("server on a CPU %s vs %s; runnable, waiting for one %s vs %s; %.1f vs %.1f switches in; PostgreSQL on a CPU %s vs %s; load generator on a CPU %s vs %s",
		us(ours.run), us(base.run), us(ours.wait), us(base.wait), ours.switches, base.switches, us(ours.db), us(base.db), us(ours.client), us(base.client))
	if ours.grouped > 0 {
		out += fmt.Sprintf("; %.1f statements per group-commit transaction", ours.grouped)
	}
	return out
}

// scrape reads the storage counters of a server's operator /metrics; a
// scrape that finds no storage counter fails (the row would read 0).
func scrape(p *proc) (reads, writes, requests float64, err error) {
	text, err := metricsText(p)
	if err != nil {
		return 0, 0, 0, err
	}
	if !strings.Contains(text, "uploadedfile_storage_requests_total{") {
		return 0, 0, 0, fmt.Errorf("scrape %s: no storage counters", p.metrics)
	}
	return sumOf(text, `uploadedfile_storage_bytes_total{direction="read"}`), sumOf(text, `uploadedfile_storage_bytes_total{direction="written"}`),
		sumOf(text, "uploadedfile_storage_requests_total{"), nil
}

// metricsText reads a server's operator /metrics (Prometheus text).
func metricsText(p *proc) (string, error) {
	resp, err := http.Get(p.metrics)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("scrape %s: %d", p.metrics, resp.StatusCode)
	}
	return string(b), err
}

// sumOf adds the values of the samples in text whose line starts with
// prefix (a metric name and the start of its labels).
func sumOf(text, prefix string) float64 {
	sum := 0.0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			var v float64
			_, _ = fmt.Sscanf(line[strings.LastIndex(line, " ")+1:], "%g", &v)
			sum += v
		}
	}
	return sum
}

func benchS3Complete(ctx context.Context, e *env, rep *report, bin string, gw *s3test.Server) error {
	const n, size = 10, 4 << 20
	body := payload(size)
	in := initiateInput(body)
	ids := make([]string, n)
	held0, err := bucketBytes(ctx, gw, "bench")
	if err != nil {
		return err
	}
	for i := range ids {
		r, err := e.initiate(e.ufS3.url, in)
		if err != nil {
			return err
		}
		if err := sendTarget(r, body); err != nil {
			return err
		}
		ids[i] = r.ID
	}
	r0, w0, q0, err := scrape(e.ufS3)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := do(e.authed(http.MethodPost, e.ufS3.url+"/uploaded-file/"+id+"/complete", nil), http.StatusOK); err != nil {
			return err
		}
	}
	r1, w1, q1, err := scrape(e.ufS3)
	if err != nil {
		return err
	}
	readPer, writePer, reqPer := (r1-r0)/n, (w1-w0)/n, (q1-q0)/n
	rep.add(fmt.Sprintf("complete on S3 (%s CSV): content bytes streamed through the service", human(size)),
		fmt.Sprintf("%.0f B written; %.0f B read (bounded verification reads)", writePer, readPer), "0 B streamed", writePer == 0 && readPer <= 64<<10)
	rep.add("complete on S3: storage round trips per complete", fmt.Sprintf("%.1f", reqPer), "", true)
	return benchStagingHeld(ctx, e, rep, bin, gw, ids, held0, n*size)
}

func benchRSS(e *env, rep *report) error {
	body := payload(25 << 20)
	load(32, 32, func(int) error {
		_, err := e.upload(e.uf.url, body)
		return err
	})
	peak, err := e.uf.peakRSS()
	if err != nil {
		return err
	}
	rep.add("peak RSS of the server, 32 concurrent 25 MiB uploads", fmt.Sprintf("%.0f MiB", float64(peak)/(1<<20)), "≤ 128 MiB", peak <= 128<<20)
	return nil
}

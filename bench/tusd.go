package main

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tus/tusd/v2/pkg/filestore"
	"github.com/tus/tusd/v2/pkg/handler"
	"github.com/tus/tusd/v2/pkg/memorylocker"
	expslog "golang.org/x/exp/slog"
)

// tusdPeer serves tusd v2's own handler with its file store and memory
// locker under /files/ -- the Go peer of the resumable upload rows, beside
// @tus/server.
func tusdPeer(listen, dir string) error {
	composer := handler.NewStoreComposer()
	filestore.New(dir).UseIn(composer)
	memorylocker.New().UseIn(composer)
	h, err := handler.NewHandler(handler.Config{
		BasePath: "/files/", StoreComposer: composer, DisableDownload: true,
		Logger: expslog.New(expslog.NewTextHandler(io.Discard, nil)),
	})
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/files/", http.StripPrefix("/files/", h))
	mux.Handle("/files", http.StripPrefix("/files", h))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	slog.Info("tusd peer", "listen", listen)
	srv := &http.Server{Addr: listen, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	return srv.ListenAndServe()
}

// tusChunked creates a tus upload at create (with token, when set) and
// sends body in PATCHes of at most chunk bytes, as a tus client does.
func tusChunked(create, token string, body []byte, chunk int) error {
	req, _ := http.NewRequest(http.MethodPost, create, nil)
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Upload-Length", strconv.Itoa(len(body)))
	req.Header.Set("Upload-Metadata", "filename ZGF0YS5jc3Y=,filetype dGV4dC9jc3Y=") // data.csv, text/csv
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusCreated || loc == "" {
		return fmt.Errorf("tus create: %d", resp.StatusCode)
	}
	if strings.HasPrefix(loc, "/") {
		loc = create[:strings.Index(create[len("http://"):], "/")+len("http://")] + loc
	}
	for off := 0; off < len(body); off += chunk {
		end := min(len(body), off+chunk)
		patch, _ := http.NewRequest(http.MethodPatch, loc, bytes.NewReader(body[off:end]))
		patch.Header.Set("Tus-Resumable", "1.0.0")
		patch.Header.Set("Upload-Offset", strconv.Itoa(off))
		patch.Header.Set("Content-Type", "application/offset+octet-stream")
		if token != "" {
			patch.Header.Set("Authorization", "Bearer "+token)
		}
		if _, err := do(patch, http.StatusNoContent); err != nil {
			return err
		}
	}
	return nil
}

// benchTus measures a resumable upload (5 MiB chunks) of 1 MiB and 10 MiB
// against tusd v2's own server with its file store, and against the direct
// upload of the same bytes, in the same interleaved rounds.
func benchTus(e *env, rep *report) error {
	const clients, chunk = 8, 5 << 20
	for _, size := range []int{1 << 20, 10 << 20} {
		body := payload(size)
		in := initiateInput(body)
		n := count(size)
		rs, m, err := measure("tus", withSched(e.uf, func() stats {
			return load(clients, n, func(int) error { return tusChunked(e.uf.url+"/uploaded-file/tus/", e.token, body, chunk) })
		}), func() stats {
			return load(clients, n, func(int) error { return tusChunked(e.tusd.url+"/files/", "", body, chunk) })
		}, withSched(e.uf, func() stats {
			return load(clients, n, func(int) error { return e.directUpload(in, body) })
		}))
		if err != nil {
			return err
		}
		ours, peer, direct := m[0], m[1], m[2]
		label := fmt.Sprintf("tus upload %s (5 MiB chunks), %d clients", human(size), clients)
		vsPeer := ratioOf(rs, 0, 1)
		rep.add(label+": vs tusd v2 (its file store)", fmt.Sprintf("%s (%.0f vs %.0f uploads/s; p50 %s vs %s)", vsPeer, ours.rps(), peer.rps(), ours.p50.Round(time.Millisecond), peer.p50.Round(time.Millisecond)),
			"≥ 1.0×", vsPeer.median >= 1.0)
		rep.add(label+": vs the direct upload of the same bytes", fmt.Sprintf("%s (%.0f vs %.0f uploads/s)", ratioOf(rs, 0, 2), ours.rps(), direct.rps()), "", true)
	}
	return benchTusS3(e, rep)
}

// benchTusS3 measures the resumable upload on S3 (its chunks objects of
// their own, assembled through the server) against the direct upload of
// the same bytes (straight to the bucket, then a server-side copy).
func benchTusS3(e *env, rep *report) error {
	const clients, chunk, size = 8, 5 << 20, 10 << 20
	body := payload(size)
	in := initiateInput(body)
	n := count(size)
	rs, m, err := measure("tus-s3", func() stats {
		return load(clients, n, func(int) error { return tusChunked(e.ufS3.url+"/uploaded-file/tus/", e.token, body, chunk) })
	}, func() stats {
		return load(clients, n, func(int) error { return e.directS3Upload(in, body) })
	})
	if err != nil {
		return err
	}
	rep.add(fmt.Sprintf("tus upload %s on S3 (5 MiB chunks), %d clients: vs the direct upload of the same bytes", human(size), clients),
		fmt.Sprintf("%s (%.0f vs %.0f uploads/s; p50 %s vs %s)", ratioOf(rs, 0, 1), m[0].rps(), m[1].rps(), m[0].p50.Round(time.Millisecond), m[1].p50.Round(time.Millisecond)), "", true)
	return nil
}

// directS3Upload runs a direct upload on the S3 server: initiate, the
// presigned PUT to the bucket, complete.
func (e *env) directS3Upload(in, body []byte) error {
	r, err := e.initiate(e.ufS3.url, in)
	if err != nil {
		return err
	}
	put, _ := http.NewRequest(r.Upload.Method, r.Upload.URL, bytes.NewReader(body))
	for k, v := range r.Upload.Headers {
		if k != "Content-Length" {
			put.Header.Set(k, v)
		}
	}
	if _, err := do(put, http.StatusOK); err != nil {
		return err
	}
	_, err = do(e.authed(http.MethodPost, e.ufS3.url+"/uploaded-file/"+r.ID+"/complete", nil), http.StatusOK)
	return err
}

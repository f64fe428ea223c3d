package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/tus/tusd/v2/pkg/filestore"
	"github.com/tus/tusd/v2/pkg/handler"
	"github.com/tus/tusd/v2/pkg/memorylocker"
	expslog "golang.org/x/exp/slog"
)

// tusdPeer serves tusd v2's own handler with its file store and memory
// locker under /files/ -- the Go peer of the resumable upload rows, beside
// @tus/server. With a database (dsn), it is the resumable upload's
// same-work floor instead: the same handler and file store, each chunk
// synced to disk and a row committed per creation and per chunk (what
// makes an acknowledged chunk durable), and nothing else.
func tusdPeer(listen, dir, dsn string) error {
	composer := handler.NewStoreComposer()
	fs := filestore.New(dir)
	if dsn == "" {
		fs.UseIn(composer)
	} else {
		pool, err := pgxpool.New(context.Background(), dsn)
		if err != nil {
			return err
		}
		if _, err := pool.Exec(context.Background(), "CREATE TABLE IF NOT EXISTS tus_floor (id text PRIMARY KEY, size bigint NOT NULL, received bigint NOT NULL)"); err != nil {
			return err
		}
		composer.UseCore(durableStore{DataStore: fs, dir: dir, pool: pool})
	}
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

// durableStore is tusd's file store with what makes an acknowledged chunk
// durable: the file synced after each chunk, a row per upload and its
// offset committed per chunk.
type durableStore struct {
	handler.DataStore
	dir  string
	pool *pgxpool.Pool
}

func (d durableStore) NewUpload(ctx context.Context, info handler.FileInfo) (handler.Upload, error) {
	up, err := d.DataStore.NewUpload(ctx, info)
	if err != nil {
		return nil, err
	}
	got, err := up.GetInfo(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := d.pool.Exec(ctx, "INSERT INTO tus_floor (id, size, received) VALUES ($1, $2, 0)", got.ID, got.Size); err != nil {
		return nil, err
	}
	return durableUpload{Upload: up, d: d, id: got.ID}, nil
}

func (d durableStore) GetUpload(ctx context.Context, id string) (handler.Upload, error) {
	up, err := d.DataStore.GetUpload(ctx, id)
	if err != nil {
		return nil, err
	}
	return durableUpload{Upload: up, d: d, id: id}, nil
}

type durableUpload struct {
	handler.Upload
	d  durableStore
	id string
}

func (u durableUpload) WriteChunk(ctx context.Context, offset int64, src io.Reader) (int64, error) {
	n, err := u.Upload.WriteChunk(ctx, offset, src)
	if err != nil {
		return n, err
	}
	f, err := os.Open(filepath.Join(u.d.dir, u.id))
	if err != nil {
		return n, err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	_, err = u.d.pool.Exec(ctx, "UPDATE tus_floor SET received = received + $2 WHERE id = $1", u.id, n)
	return n, err
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
		}), func() stats {
			return load(clients, n, func(int) error { return tusChunked(e.tusdFloor.url+"/files/", "", body, chunk) })
		})
		if err != nil {
			return err
		}
		ours, peer, direct, floor := m[0], m[1], m[2], m[3]
		label := fmt.Sprintf("tus upload %s (5 MiB chunks), %d clients", human(size), clients)
		vsPeer := ratioOf(rs, 0, 1)
		rep.add(label+": vs tusd v2 (its file store)", fmt.Sprintf("%s (%.0f vs %.0f uploads/s; p50 %s vs %s)", vsPeer, ours.rps(), peer.rps(), ours.p50.Round(time.Millisecond), peer.p50.Round(time.Millisecond)),
			"≥ 1.0×", vsPeer.median >= 1.0)
		rep.add(label+": vs the direct upload of the same bytes", fmt.Sprintf("%s (%.0f vs %.0f uploads/s)", ratioOf(rs, 0, 2), ours.rps(), direct.rps()), "", true)
		rep.add(label+": vs its same-work floor (tusd's file store, each chunk synced, a row committed per creation and chunk)",
			fmt.Sprintf("%s (%.0f vs %.0f uploads/s; the floor %.2f× tusd)", ratioOf(rs, 0, 3), ours.rps(), floor.rps(), floor.rps()/peer.rps()), "", true)
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
	if err := sendTarget(r, body); err != nil {
		return err
	}
	_, err = do(e.authed(http.MethodPost, e.ufS3.url+"/uploaded-file/"+r.ID+"/complete", nil), http.StatusOK)
	return err
}

// sendTarget sends body to an initiated upload's target with exactly its
// method, URL and headers (a browser sets the length itself).
func sendTarget(r initiated, body []byte) error {
	put, _ := http.NewRequest(r.Upload.Method, r.Upload.URL, bytes.NewReader(body))
	for k, v := range r.Upload.Headers {
		if k != "Content-Length" {
			put.Header.Set(k, v)
		}
	}
	_, err := do(put, http.StatusOK)
	return err
}

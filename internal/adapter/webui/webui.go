// Package webui is the development upload page that `uploadedfile serve
// --dev` serves at "/": the Uppy Dashboard, signed in with the development
// token, uploading through the direct lifecycle with the UploadedFile Uppy
// plugin (clients/uppy) over the TypeScript client (clients/typescript).
//
// It is an adapter over the HTTP API, beside internal/adapter/httpapi: it serves
// static assets and calls nothing in the service. The assets in dist/ are
// generated from web/ by `make web` (esbuild) and embedded in the binary;
// `make verify` fails when they are stale. Never edit dist/ by hand.
package webui

import (
	"bytes"
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
)

//go:embed dist
var dist embed.FS

// Config is what the page needs to call the API: its base URL and the
// development token (only ever served in --dev).
type Config struct {
	BaseURL string `json:"baseUrl"`
	Token   string `json:"token"`
}

// Handler serves the page at GET / and its bundle at GET /_dev/app.js and
// /_dev/app.css; any other path is not the page's.
func Handler(cfg Config) (http.Handler, error) {
	page, err := pageWithConfig("dist/index.html", cfg)
	if err != nil {
		return nil, err
	}
	assets, err := fs.Sub(dist, "dist")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", page)
	files := http.StripPrefix("/_dev/", http.FileServerFS(assets))
	mux.Handle("GET /_dev/app.js", files)
	mux.Handle("GET /_dev/app.css", files)
	return mux, nil
}

// pageWithConfig serves the embedded page at path with cfg in place of its
// {{CONFIG}} marker. The config sits in a <script type="application/json">
// element; json.Marshal escapes <, > and &, so nothing in it can close the
// element early.
func pageWithConfig(path string, cfg any) (http.Handler, error) {
	page, err := fs.ReadFile(dist, path)
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	page = bytes.Replace(page, []byte("{{CONFIG}}"), js, 1)
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		_, _ = w.Write(page)
	}), nil
}

package webui

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/getkin/kin-openapi/openapi3"

	api "github.com/uploadedfile/uploadedfile/gen/api"
)

// DocsConfig configures the API reference: the base URL the contract's
// server is set to, and in development the token "Try it out" sends.
type DocsConfig struct {
	BaseURL string `json:"baseUrl"`
	Token   string `json:"token,omitempty"`
}

// DocsHandler serves the API reference at GET /docs/ (Swagger UI from
// swagger-ui-dist, embedded, no CDN) over the contract embedded in the
// binary (gen/api), served at /docs/openapi.json with this server as its
// server.
func DocsHandler(cfg DocsConfig) (http.Handler, error) {
	spec, err := contract(cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	page, err := pageWithConfig("dist/docs/index.html", cfg)
	if err != nil {
		return nil, err
	}
	assets, err := fs.Sub(dist, "dist")
	if err != nil {
		return nil, err
	}
	files := http.FileServerFS(assets)
	mux := http.NewServeMux()
	mux.Handle("GET /docs", http.RedirectHandler("/docs/", http.StatusMovedPermanently))
	mux.Handle("GET /docs/{$}", page)
	mux.HandleFunc("GET /docs/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(spec)
	})
	for _, f := range []string{"swagger-ui-bundle.js", "swagger-ui.css", "docs.js"} {
		mux.Handle("GET /docs/"+f, files)
	}
	return mux, nil
}

// contract is the embedded OpenAPI document as JSON, served from baseURL.
func contract(baseURL string) ([]byte, error) {
	doc, err := api.GetSpec()
	if err != nil {
		return nil, fmt.Errorf("webui: the embedded contract: %w", err)
	}
	doc.Servers = openapi3.Servers{{URL: baseURL}}
	return json.Marshal(doc)
}

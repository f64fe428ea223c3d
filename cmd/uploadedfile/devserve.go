package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/uploadedfile/uploadedfile/db"
	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/adapter/webui"
	"github.com/uploadedfile/uploadedfile/service"
)

// withServePages puts the development page and the API reference in front
// of handler when they are on (--dev; docs.enabled), with the one
// development token the pages and the printed help share (two signed a
// second apart would differ).
func withServePages(handler http.Handler, base string, o serveOptions, cfg fileConfig, dev devSetup) (http.Handler, string, error) {
	devTok := ""
	if o.dev && dev.secret != nil {
		var err error
		if devTok, err = devToken(dev.secret); err != nil {
			return nil, "", err
		}
	}
	docs := o.dev
	if cfg.Docs.Enabled != nil {
		docs = *cfg.Docs.Enabled
	}
	handler, err := withPages(handler, base, o.dev, docs, devTok)
	return handler, devTok, err
}

// devSetup is what devDefaults settled: the secret the development token
// is signed with (nil: tokens come from the configured keys) and the words
// the start-up text uses for the store and the secret.
type devSetup struct {
	secret  []byte
	storage string
	signing string
}

// devDefaults fills in a first local run: the database created, local
// files under ./upload unless a store is configured, this server as host,
// and a random HMAC secret unless keys are configured.
func devDefaults(ctx context.Context, g *globals, cfg *fileConfig, base string) (devSetup, error) {
	var d devSetup
	if err := ensureDatabase(ctx, g.databaseURL); err != nil {
		return d, g.databaseError(err)
	}
	if cfg.Driver == "" && cfg.AccessID == "" {
		cfg.Driver = service.DriverLocal
	}
	if cfg.LocalRoot == "" {
		abs, err := filepath.Abs("upload")
		if err != nil {
			return d, err
		}
		cfg.LocalRoot = abs
	}
	if cfg.Driver == service.DriverS3 || (cfg.Driver == "" && cfg.AccessID != "") {
		d.storage = "files in the S3 bucket " + cfg.Bucket
		if cfg.Endpoint != "" {
			d.storage += " at " + cfg.Endpoint
		}
	} else {
		d.storage = "files under " + cfg.LocalRoot
	}
	if cfg.Host == "" {
		cfg.Host = base
	}
	// The development page is served from this origin.
	cfg.CORS.AllowedOrigins = append(cfg.CORS.AllowedOrigins, base)
	switch {
	case cfg.Auth.HMACSecret != "":
		d.secret, d.signing = []byte(cfg.Auth.HMACSecret), "tokens signed with the configured secret (auth.hmacSecret)"
	case cfg.Auth.JWKSFile != "" || cfg.Auth.JWKSURL != "":
		d.signing = "tokens verified with the configured keys (auth.jwksUrl or auth.jwksFile); no development token"
	default:
		secret := make([]byte, 32)
		_, _ = rand.Read(secret)
		cfg.Auth.HMACSecret = hex.EncodeToString(secret)
		d.secret, d.signing = []byte(cfg.Auth.HMACSecret), "a random signing secret for this run"
	}
	return d, nil
}

// devToken is the token of the development user: "dev-user" of tenant
// "dev", with the host scope, valid 12 hours.
func devToken(secret []byte) (string, error) {
	claims := jwt.MapClaims{"sub": "dev-user", "tenant": "dev", "scope": httpapi.HostScope, "exp": time.Now().Add(12 * time.Hour).Unix(), "iat": time.Now().Unix()}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

// withPages puts the pages in front of the API: the development upload
// page at "/" (dev only, signed in with the development token) and the API
// reference at /docs/ (when enabled; signed in only in dev).
func withPages(api http.Handler, base string, dev, docs bool, token string) (http.Handler, error) {
	if !dev && !docs {
		return api, nil
	}
	mux := http.NewServeMux()
	mux.Handle("/", api)
	// A page that carries the development token answers only for the
	// listener's own host names: a DNS-rebinding page (its own name,
	// pointed at 127.0.0.1) cannot read the token.
	signedIn := func(h http.Handler) http.Handler { return h }
	if token != "" {
		signedIn = func(h http.Handler) http.Handler { return ownHostOnly(base, h) }
	}
	if dev {
		page, err := webui.Handler(webui.Config{BaseURL: base, Token: token})
		if err != nil {
			return nil, err
		}
		mux.Handle("GET /{$}", signedIn(page))
		mux.Handle("GET /_dev/", signedIn(page))
	}
	if docs {
		ref, err := webui.DocsHandler(webui.DocsConfig{BaseURL: base, Token: token})
		if err != nil {
			return nil, err
		}
		mux.Handle("GET /docs", signedIn(ref))
		mux.Handle("GET /docs/", signedIn(ref))
	}
	return mux, nil
}

// loopback reports whether addr is a loopback address.
func loopback(addr net.Addr) bool {
	tcp, ok := addr.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// ownHostOnly serves next only to requests whose Host is the listener's
// own (base's host and port, or localhost with that port); any other is
// 421 Misdirected Request and carries nothing.
func ownHostOnly(base string, next http.Handler) http.Handler {
	u, _ := url.Parse(base)
	own := map[string]bool{u.Host: true, net.JoinHostPort("localhost", u.Port()): true}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !own[strings.ToLower(r.Host)] {
			http.Error(w, "misdirected request: this page answers only at "+base, http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// printDevHelp prints what the development server runs on, the pages'
// addresses, a token for the dev user and curl lines to try the API.
func printDevHelp(g *globals, dev devSetup, base, metricsURL, token string) {
	fmt.Fprintf(g.stdout, `
Development mode: %s, %s.

  upload page:    %s/
  API reference:  %s/docs/
  metrics:        %s
`, dev.storage, dev.signing, base, base, metricsURL)
	if token == "" {
		fmt.Fprint(g.stdout, "\nSign in with a token your key set verifies.\n\n")
		return
	}
	fmt.Fprintf(g.stdout, `
A token for user "dev-user" of tenant "dev", valid 12 hours:

  export TOKEN=%s

Try it:

  printf 'hello, uploadedfile\n' > hello.txt
  curl -s -H "Authorization: Bearer $TOKEN" -F file=@hello.txt %s/uploaded-file
  curl -s -H "Authorization: Bearer $TOKEN" %s/uploaded-file/<id>
  curl -s -H "Authorization: Bearer $TOKEN" %s/uploaded-file/<id>/download
  curl -s -X DELETE -H "Authorization: Bearer $TOKEN" %s/uploaded-file/<id>

`, token, base, base, base, base)
}

// ensureDatabase creates the database named in databaseURL when it does not
// exist, connecting to the server's postgres database to do so.
func ensureDatabase(ctx context.Context, databaseURL string) error {
	if err := db.CreateIfMissing(ctx, databaseURL); err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

package httpapi_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"

	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
)

// BenchmarkGuardVerifyCached is the guard with a token it has verified
// before, for an HMAC secret and for a JWKS served on loopback (RS256): what
// a cached token costs each request, and what the key set's check of a
// cached token adds. It asserts nothing about time.
func BenchmarkGuardVerifyCached(b *testing.B) {
	ctx := context.Background()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		b.Fatal(err)
	}
	jwk, err := jwkset.NewJWKFromKey(key.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: "k1", ALG: jwkset.AlgRS256}})
	if err != nil {
		b.Fatal(err)
	}
	set := jwkset.JWKSMarshal{Keys: []jwkset.JWKMarshal{jwk.Marshal()}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _ = json.NewEncoder(w).Encode(set) }))
	defer srv.Close()
	secret := []byte("benchmark-secret-benchmark-secret")
	hg, err := httpapi.NewGuard(ctx, httpapi.AuthConfig{HMACSecret: secret})
	if err != nil {
		b.Fatal(err)
	}
	jg, err := httpapi.NewGuard(ctx, httpapi.AuthConfig{JWKSURL: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	defer jg.Close()
	claims := jwt.MapClaims{"sub": "u1", "tenant": "t1", "exp": time.Now().Add(time.Hour).Unix()}
	htok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
	if err != nil {
		b.Fatal(err)
	}
	t := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	t.Header["kid"] = "k1"
	rtok, err := t.SignedString(key)
	if err != nil {
		b.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {})
	for _, c := range []struct {
		name string
		g    *httpapi.Guard
		tok  string
	}{{"hmac", hg, htok}, {"jwks", jg, rtok}} {
		h := c.g.Middleware(ok)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodGet, "/uploaded-file/x", nil)
				req.Header.Set("Authorization", "Bearer "+c.tok)
				w := httptest.NewRecorder()
				h.ServeHTTP(w, req)
				if w.Code != 200 {
					b.Fatal(w.Code, w.Body.String())
				}
			}
		})
	}
}

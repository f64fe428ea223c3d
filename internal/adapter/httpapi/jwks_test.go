package httpapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/uploadedfile/uploadedfile/internal/adapter/httpapi"
	"github.com/uploadedfile/uploadedfile/internal/testkit/syncbuf"
)

// jwksServer serves a key set that a test changes: down (503), or the
// given keys (kid "" for a key without one).
type jwksServer struct {
	mu   sync.Mutex
	up   bool
	keys map[string]*ecdsa.PrivateKey
	srv  *httptest.Server
}

func newJWKSServer(t *testing.T) *jwksServer {
	j := &jwksServer{keys: map[string]*ecdsa.PrivateKey{}}
	j.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		j.mu.Lock()
		defer j.mu.Unlock()
		if !j.up {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		var set jwkset.JWKSMarshal
		for kid, k := range j.keys {
			jwk, err := jwkset.NewJWKFromKey(k.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.AlgES256}})
			if err != nil {
				t.Errorf("jwk: %v", err)
				return
			}
			set.Keys = append(set.Keys, jwk.Marshal())
		}
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(j.srv.Close)
	return j
}

func (j *jwksServer) serve(up bool, keys map[string]*ecdsa.PrivateKey) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.up, j.keys = up, keys
}

func esKey(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	return k
}

func esToken(t *testing.T, kid string, k *ecdsa.PrivateKey) string {
	tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": "alice", "tenant": "acme", "exp": time.Now().Add(time.Hour).Unix()})
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(k)
	require.NoError(t, err)
	return s
}

// TestJWKSOutageRecoveryAndRotation: a JWKS that is down when the server
// starts makes requests 503 core.keys.unavailable (not 401) and the guard
// not ready; once it answers, tokens verify within seconds (not the
// library's minutes); a rotated-in key (an unknown kid) is fetched at once,
// a rotated-out one refused; a key without a kid verifies a token with
// one; every refusal is logged with its reason, never the token.
func TestJWKSOutageRecoveryAndRotation(t *testing.T) {
	t.Parallel()
	j := newJWKSServer(t)
	var logs syncbuf.Buffer
	g, err := httpapi.NewGuard(context.Background(), httpapi.AuthConfig{JWKSURL: j.srv.URL + "/jwks?secret=in-query", JWKSRefreshMin: 200 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	require.NoError(t, err, "a JWKS that is down at start does not stop the start")
	t.Cleanup(g.Close)
	srv := httptest.NewServer(g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })))
	t.Cleanup(srv.Close)
	call := func(token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, srv.URL+"/uploaded-file/usage", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	k1 := esKey(t)
	tok1 := esToken(t, "k1", k1)
	status, body := call(tok1)
	require.Equal(t, http.StatusServiceUnavailable, status, body)
	require.Contains(t, body, `"code":"core.keys.unavailable"`)
	require.Contains(t, body, `"retryable":true`)
	require.Error(t, g.Ready(context.Background()))

	j.serve(true, map[string]*ecdsa.PrivateKey{"k1": k1})
	start := time.Now()
	require.Eventually(t, func() bool { s, _ := call(tok1); return s == http.StatusNoContent }, 10*time.Second, 50*time.Millisecond)
	require.Less(t, time.Since(start), 5*time.Second, "recovered in seconds")
	require.NoError(t, g.Ready(context.Background()))

	// Rotation: k2 in, k1 out.
	k2 := esKey(t)
	j.serve(true, map[string]*ecdsa.PrivateKey{"k2": k2})
	status, body = call(esToken(t, "k2", k2))
	require.Equal(t, http.StatusNoContent, status, "an unknown kid fetches the key set at once: %s", body)
	require.Eventually(t, func() bool { s, _ := call(tok1); return s == http.StatusUnauthorized }, 10*time.Second, 100*time.Millisecond,
		"a rotated-out key's token is refused")

	// A key without a kid verifies a token that names one.
	k3 := esKey(t)
	j.serve(true, map[string]*ecdsa.PrivateKey{"": k3})
	require.Eventually(t, func() bool { s, _ := call(esToken(t, "any-kid", k3)); return s == http.StatusNoContent }, 10*time.Second, 100*time.Millisecond)

	status, _ = call(esToken(t, "nobody", esKey(t)))
	require.Equal(t, http.StatusUnauthorized, status)
	require.Contains(t, logs.String(), `"reason":"unknown kid"`)
	require.Contains(t, logs.String(), `"msg":"JWKS fetch failed"`)
	require.NotContains(t, logs.String(), tok1[:40], "never the token")
	require.NotContains(t, logs.String(), "in-query", "never the JWKS URL's query")
	require.False(t, strings.Contains(logs.String(), "Failed to refresh HTTP JWK Set"), "no plain-text line of the library's")
}

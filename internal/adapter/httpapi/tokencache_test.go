package httpapi

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/MicahParks/jwkset"
	"github.com/MicahParks/keyfunc/v3"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"
)

// counted makes g count its signature checks (each asks for a key).
func counted(g *Guard) *atomic.Int32 {
	var n atomic.Int32
	inner := g.keyfunc
	g.keyfunc = func(t *jwt.Token) (any, error) { n.Add(1); return inner(t) }
	return &n
}

func hmacGuard(t *testing.T, size int) (*Guard, []byte) {
	t.Helper()
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	g, err := NewGuard(context.Background(), AuthConfig{HMACSecret: secret, TokenCacheSize: size})
	require.NoError(t, err)
	return g, secret
}

func hmacToken(t *testing.T, secret []byte, user string, exp time.Time) string {
	t.Helper()
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": user, "tenant": "acme", "exp": exp.Unix(), "roles": []any{"a"}}).SignedString(secret)
	require.NoError(t, err)
	return tok
}

// TestTokenCacheReuse: a reused token pays the signature once; a tampered
// one is checked (and refused); the identity served from the cache is a
// copy no request can change for the next.
func TestTokenCacheReuse(t *testing.T) {
	t.Parallel()
	g, secret := hmacGuard(t, 0)
	checks := counted(g)
	tok := hmacToken(t, secret, "alice", time.Now().Add(time.Hour))
	for range 5 {
		id, err := g.verify(context.Background(), tok)
		require.NoError(t, err)
		require.Equal(t, "alice", id.rc.UserID)
		id.rc.Roles[0] = "changed"
		id.rc.Custom["x"] = 1
	}
	require.EqualValues(t, 1, checks.Load(), "verified once, then served from the cache")
	id, _ := g.verify(context.Background(), tok)
	require.Equal(t, []string{"a"}, id.rc.Roles, "a caller's change never reaches the cache")
	require.NotContains(t, id.rc.Custom, "x")

	tampered := tok[:len(tok)-2] + "xx"
	_, err := g.verify(context.Background(), tampered)
	require.Error(t, err, "a tampered token is verified, and refused")
	require.EqualValues(t, 2, checks.Load())
}

// TestTokenCacheExpiry: an entry is never used at or past the token's exp:
// the token is verified again (here still within the parser's leeway).
func TestTokenCacheExpiry(t *testing.T) {
	t.Parallel()
	g, secret := hmacGuard(t, 0)
	checks := counted(g)
	exp := time.Now().Add(10 * time.Second).Truncate(time.Second)
	tok := hmacToken(t, secret, "alice", exp)
	_, err := g.verify(context.Background(), tok)
	require.NoError(t, err)
	g.now = func() time.Time { return exp.Add(-time.Second) }
	_, err = g.verify(context.Background(), tok)
	require.NoError(t, err)
	require.EqualValues(t, 1, checks.Load(), "before exp: from the cache")
	g.now = func() time.Time { return exp }
	_, err = g.verify(context.Background(), tok)
	require.NoError(t, err)
	require.EqualValues(t, 2, checks.Load(), "at exp: verified again, never from the cache")
}

// TestTokenCacheBound: the cache holds at most its size; the least
// recently used token goes first and is verified again.
func TestTokenCacheBound(t *testing.T) {
	t.Parallel()
	g, secret := hmacGuard(t, 10)
	checks := counted(g)
	var toks []string
	for i := range 25 {
		toks = append(toks, hmacToken(t, secret, fmt.Sprintf("user-%d", i), time.Now().Add(time.Hour)))
		_, err := g.verify(context.Background(), toks[i])
		require.NoError(t, err)
	}
	require.Equal(t, 10, g.cache.len())
	_, err := g.verify(context.Background(), toks[24])
	require.NoError(t, err)
	require.EqualValues(t, 25, checks.Load(), "a recent token is still cached")
	_, err = g.verify(context.Background(), toks[0])
	require.NoError(t, err)
	require.EqualValues(t, 26, checks.Load(), "the oldest was evicted")
	require.Equal(t, 10, g.cache.len())

	off, secret := hmacGuard(t, -1)
	offChecks := counted(off)
	tok := hmacToken(t, secret, "alice", time.Now().Add(time.Hour))
	for range 3 {
		_, err := off.verify(context.Background(), tok)
		require.NoError(t, err)
	}
	require.EqualValues(t, 3, offChecks.Load(), "a negative size turns the cache off")
}

// TestTokenCacheRotation (JWKS): when the key that verified a cached token
// leaves the key set, the token is verified again and refused; a token of
// the new key is accepted.
func TestTokenCacheRotation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := jwkset.NewMemoryStorage()
	keyA, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	keyB, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	write := func(kid string, k *ecdsa.PrivateKey) {
		jwk, err := jwkset.NewJWKFromKey(k.Public(), jwkset.JWKOptions{Metadata: jwkset.JWKMetadataOptions{KID: kid, ALG: jwkset.AlgES256}})
		require.NoError(t, err)
		require.NoError(t, store.KeyWrite(ctx, jwk))
	}
	write("a", keyA)
	kf, err := keyfunc.New(keyfunc.Options{Ctx: ctx, Storage: store})
	require.NoError(t, err)
	g := &Guard{cfg: AuthConfig{Claims: ClaimNames{Tenant: "tenant", Department: "department", User: "sub", Roles: "roles", Permissions: "permissions", Scope: "scope"}},
		keyfunc: kf.Keyfunc, jwks: kf.Storage(), parser: jwt.NewParser(jwt.WithExpirationRequired(), jwt.WithValidMethods([]string{"ES256"})),
		cache: newTokenCache(100, TokenCacheBytes), now: time.Now, close: func() {}}
	checks := counted(g)
	sign := func(kid string, k *ecdsa.PrivateKey) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"sub": "alice", "tenant": "acme", "exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = kid
		s, err := tok.SignedString(k)
		require.NoError(t, err)
		return s
	}
	tokA := sign("a", keyA)
	for range 3 {
		_, err := g.verify(ctx, tokA)
		require.NoError(t, err)
	}
	require.EqualValues(t, 1, checks.Load())

	_, err = store.KeyDelete(ctx, "a") // rotated out
	require.NoError(t, err)
	write("b", keyB)
	_, err = g.verify(ctx, tokA)
	require.Error(t, err, "the rotated-out key's token is refused, cached or not")
	_, err = g.verify(ctx, sign("b", keyB))
	require.NoError(t, err)

	write("a", keyB) // the same kid, another key: not the key that verified
	_, err = g.verify(ctx, tokA)
	require.Error(t, err)
}

// TestTokenCacheBoundInBytes: large (but allowed) tokens fill the cache up
// to TokenCacheBytes, not up to its count; the cache's bytes are what its
// entries say.
func TestTokenCacheBoundInBytes(t *testing.T) {
	t.Parallel()
	g, secret := hmacGuard(t, 0)
	pad := strings.Repeat("p", MaxTokenBytes*3/4-400)
	n := 2 * TokenCacheBytes / MaxTokenBytes
	for i := range n {
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": fmt.Sprintf("u%d", i), "tenant": "acme",
			"exp": time.Now().Add(time.Hour).Unix(), "pad": pad}).SignedString(secret)
		require.NoError(t, err)
		require.LessOrEqual(t, len(tok), MaxTokenBytes)
		_, err = g.verify(context.Background(), tok)
		require.NoError(t, err)
	}
	require.LessOrEqual(t, g.cache.size(), TokenCacheBytes)
	require.Less(t, g.cache.len(), n, "evicted by bytes, long before the count")
	require.Greater(t, g.cache.len(), TokenCacheBytes/(MaxTokenBytes+tokenEntryOverhead)-1)
}

// TestSameKey: a key is the same as itself and as an equal copy (a key set
// refreshed parses its keys again), not as another key or another kind of
// key; Ed25519 keys (slices) compare without a panic.
func TestSameKey(t *testing.T) {
	t.Parallel()
	rsaA, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	rsaB, err := rsa.GenerateKey(rand.Reader, 2048)
	require.NoError(t, err)
	ecA, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	edA, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	edB, _, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	rsaCopy := &rsa.PublicKey{N: new(big.Int).Set(rsaA.N), E: rsaA.E}
	ecBytes, err := ecA.PublicKey.Bytes()
	require.NoError(t, err)
	ecCopy, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), ecBytes)
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		a, b any
		want bool
	}{
		{"an RSA key and itself", &rsaA.PublicKey, &rsaA.PublicKey, true},
		{"an RSA key and its copy", &rsaA.PublicKey, rsaCopy, true},
		{"two RSA keys", &rsaA.PublicKey, &rsaB.PublicKey, false},
		{"an EC key and itself", &ecA.PublicKey, &ecA.PublicKey, true},
		{"an EC key and its copy", &ecA.PublicKey, ecCopy, true},
		{"an RSA key and an EC key", &rsaA.PublicKey, &ecA.PublicKey, false},
		{"an Ed25519 key and its copy", edA, slices.Clone(edA), true},
		{"two Ed25519 keys", edA, edB, false},
		{"no key and no key", nil, nil, true},
		{"a key and none", &rsaA.PublicKey, nil, false},
	} {
		require.Equal(t, c.want, sameKey(c.a, c.b), c.name)
	}
}

package httpapi

import (
	"container/list"
	"crypto"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/sha256"
	"sync"
	"time"
)

// DefaultTokenCacheSize bounds the verified-token cache in entries.
const DefaultTokenCacheSize = 10_000

// TokenCacheBytes bounds the verified-token cache in bytes (an entry counts
// as its token's length plus tokenEntryOverhead: its identity holds the
// claims, which are never larger than the token).
const TokenCacheBytes = 16 << 20

// tokenEntryOverhead is what an entry costs beside its claims (the list
// element, the map entry, the key, the identity's fixed part).
const tokenEntryOverhead = 512

// tokenCache remembers verified tokens, so a client that reuses its token
// pays the signature check once. Entries are keyed by the SHA-256 of the
// raw token (the token itself is never kept), bounded in number (the least
// recently used goes first) and in bytes (TokenCacheBytes), never used at
// or past the token's exp, and --
// for a JWKS -- dropped when the key that verified the token is no longer
// in the key set (keyStillValid).
type tokenCache struct {
	mu       sync.Mutex
	max      int
	maxBytes int
	bytes    int        // the entries' sizes, summed
	order    *list.List // front: most recently used
	items    map[tokenSum]*list.Element
}

// cachedToken is one verified token.
type cachedToken struct {
	sum  tokenSum
	size int // what the entry counts against maxBytes
	id   identity
	exp  time.Time
	kid  string // the key that verified it (JWKS), and the key itself
	key  any
}

func newTokenCache(max, maxBytes int) *tokenCache {
	return &tokenCache{max: max, maxBytes: maxBytes, order: list.New(), items: map[tokenSum]*list.Element{}}
}

// tokenSum is a token's cache key.
type tokenSum = [sha256.Size]byte

// get returns the entry of the token whose SHA-256 is sum when it is still
// usable at now.
func (c *tokenCache) get(sum tokenSum, now time.Time) (cachedToken, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.items[sum]
	if !ok {
		return cachedToken{}, false
	}
	t := e.Value.(cachedToken)
	if !now.Before(t.exp) {
		c.remove(e)
		return cachedToken{}, false
	}
	c.order.MoveToFront(e)
	return t, true
}

// put remembers the verified token of tokenLen bytes whose SHA-256 is sum,
// evicting the least recently used entries while the cache is over its
// count or its bytes.
func (c *tokenCache) put(sum tokenSum, tokenLen int, t cachedToken) {
	t.sum, t.size = sum, tokenLen+tokenEntryOverhead
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[t.sum]; ok {
		c.remove(e)
	}
	c.items[t.sum] = c.order.PushFront(t)
	c.bytes += t.size
	for c.order.Len() > c.max || c.bytes > c.maxBytes {
		c.remove(c.order.Back())
	}
}

// remove forgets entry e; the caller holds mu.
func (c *tokenCache) remove(e *list.Element) {
	t := c.order.Remove(e).(cachedToken)
	delete(c.items, t.sum)
	c.bytes -= t.size
}

// drop forgets the token whose SHA-256 is sum.
func (c *tokenCache) drop(sum tokenSum) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[sum]; ok {
		c.remove(e)
	}
}

// len is the number of entries.
func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// size is the entries' bytes, as counted against maxBytes.
func (c *tokenCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.bytes
}

// sameKey reports whether two verification keys are equal (public keys
// compare with their Equal method; an HMAC secret is static). The key set
// hands out the same key value until it is refreshed, so the same pointer
// answers at once: an RSA key's Equal copies both moduli to compare them
// in constant time, on every cached token's request.
func sameKey(a, b any) bool {
	switch a := a.(type) {
	case *rsa.PublicKey:
		if b, ok := b.(*rsa.PublicKey); ok && a == b {
			return true
		}
	case *ecdsa.PublicKey:
		if b, ok := b.(*ecdsa.PublicKey); ok && a == b {
			return true
		}
	}
	if eq, ok := a.(interface{ Equal(crypto.PublicKey) bool }); ok {
		return eq.Equal(b)
	}
	return a == nil && b == nil
}

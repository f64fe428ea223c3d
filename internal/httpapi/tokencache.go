package httpapi

import (
	"container/list"
	"crypto"
	"crypto/sha256"
	"sync"
	"time"
)

// DefaultTokenCacheSize bounds the verified-token cache.
const DefaultTokenCacheSize = 10_000

// tokenCache remembers verified tokens, so a client that reuses its token
// pays the signature check once. Entries are keyed by the SHA-256 of the
// raw token (the token itself is never kept), bounded in number (the least
// recently used goes first), never used at or past the token's exp, and --
// for a JWKS -- dropped when the key that verified the token is no longer
// in the key set (keyStillValid).
type tokenCache struct {
	mu    sync.Mutex
	max   int
	order *list.List // front: most recently used
	items map[tokenSum]*list.Element
}

// cachedToken is one verified token.
type cachedToken struct {
	sum tokenSum
	id  identity
	exp time.Time
	kid string // the key that verified it (JWKS), and the key itself
	key any
}

func newTokenCache(max int) *tokenCache {
	return &tokenCache{max: max, order: list.New(), items: map[tokenSum]*list.Element{}}
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
		c.order.Remove(e)
		delete(c.items, sum)
		return cachedToken{}, false
	}
	c.order.MoveToFront(e)
	return t, true
}

// put remembers the verified token whose SHA-256 is sum, evicting the
// least recently used entry when full.
func (c *tokenCache) put(sum tokenSum, t cachedToken) {
	t.sum = sum
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[t.sum]; ok {
		e.Value = t
		c.order.MoveToFront(e)
		return
	}
	c.items[t.sum] = c.order.PushFront(t)
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(cachedToken).sum)
	}
}

// drop forgets the token whose SHA-256 is sum.
func (c *tokenCache) drop(sum tokenSum) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.items[sum]; ok {
		c.order.Remove(e)
		delete(c.items, sum)
	}
}

// len is the number of entries.
func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

// sameKey reports whether two verification keys are equal (public keys
// compare with their Equal method; an HMAC secret is static).
func sameKey(a, b any) bool {
	if eq, ok := a.(interface{ Equal(crypto.PublicKey) bool }); ok {
		return eq.Equal(b)
	}
	return a == nil && b == nil
}

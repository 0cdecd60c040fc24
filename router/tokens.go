package router

import (
	"strconv"
	"strings"
	"sync"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
)

// tokenCache remembers the tokens the router verified, keyed by the whole
// token string, each until its own expiry, so a client's later requests
// (grab then open, a history read, the page's polling) skip the HMAC. Only
// valid tokens are kept: a forged or expired one is checked in full every
// time. It holds at most max entries; when full, an arbitrary one makes
// room (a miss costs one verification, never a wrong answer).
type tokenCache struct {
	signer *hongbao.Signer
	max    int

	mu sync.Mutex
	m  map[string]verified
}

type verified struct {
	user    hongbao.UserID
	expires time.Time
}

// tokenCacheSize bounds the verified tokens a router keeps: about 100
// bytes each.
const tokenCacheSize = 1 << 16

func newTokenCache(s *hongbao.Signer, max int) *tokenCache {
	return &tokenCache{signer: s, max: max, m: make(map[string]verified)}
}

// verify returns the user of a valid token unexpired at now.
func (c *tokenCache) verify(tok string, now time.Time) (hongbao.UserID, error) {
	c.mu.Lock()
	v, ok := c.m[tok]
	if ok && !now.Before(v.expires) {
		delete(c.m, tok)
		ok = false
	}
	c.mu.Unlock()
	if ok {
		return v.user, nil
	}
	user, err := c.signer.Verify(tok, now)
	if err != nil {
		return 0, err
	}
	exp, ok := tokenExpiry(tok)
	if !ok || c.max <= 0 {
		return user, nil
	}
	c.mu.Lock()
	if len(c.m) >= c.max {
		for k := range c.m { // map order is arbitrary: evict one
			delete(c.m, k)
			break
		}
	}
	c.m[tok] = verified{user: user, expires: exp}
	c.mu.Unlock()
	return user, nil
}

// tokenExpiry reads the expiry of a token Verify accepted:
// "<user>.<unix expiry>.<mac>".
func tokenExpiry(tok string) (time.Time, bool) {
	_, rest, _ := strings.Cut(tok, ".")
	exp, _, _ := strings.Cut(rest, ".")
	s, err := strconv.ParseInt(exp, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	return time.Unix(s, 0), true
}

// size is how many tokens are remembered.
func (c *tokenCache) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

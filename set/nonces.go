package set

import (
	"fmt"
	"sync"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// defaultMaxNonces bounds the nonces a server remembers: about 40 bytes
// each, so some 80 MiB at most; at 2 x api.Window of memory that is enough
// for 50,000 signed requests a second.
const defaultMaxNonces = 2 << 20

// nonces remembers the nonces of the signed requests a server accepted, so
// a captured request cannot be used again while its signature's time is
// inside the window. A request's time is within api.Window of the clock
// when it is accepted and when it is replayed, so the two are at most
// 2 x Window apart: nonces live in two generations rotated every
// 2 x Window, so each is kept from 2 x Window to 4 x Window. Rotation
// happens on use: no goroutine, and an idle server's sets are dropped by
// its next request. The count is bounded: when it is reached, requests are
// refused (503, the router tries another server) rather than forgetting a
// nonce early.
type nonces struct {
	period time.Duration
	max    int

	mu      sync.Mutex
	cur     map[[16]byte]struct{}
	prev    map[[16]byte]struct{}
	rotated time.Time
}

func newNonces(window time.Duration, max int) *nonces {
	if max <= 0 {
		max = defaultMaxNonces
	}
	return &nonces{period: 2 * window, max: max, cur: map[[16]byte]struct{}{}, prev: map[[16]byte]struct{}{}}
}

// use records nonce as seen at now, or refuses it when it was seen before.
func (n *nonces) use(nonce [16]byte, now time.Time) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.rotate(now)
	if _, ok := n.cur[nonce]; ok {
		return api.ErrReplayed
	}
	if _, ok := n.prev[nonce]; ok {
		return api.ErrReplayed
	}
	if len(n.cur)+len(n.prev) >= n.max {
		return fmt.Errorf("%d signed requests in the replay window: %w", n.max, hongbao.ErrBusy)
	}
	n.cur[nonce] = struct{}{}
	return nil
}

// rotate starts a new generation once the current one is older than the
// period; after two periods without a request both are stale.
func (n *nonces) rotate(now time.Time) {
	switch age := now.Sub(n.rotated); {
	case age > 2*n.period:
		n.prev, n.cur = map[[16]byte]struct{}{}, map[[16]byte]struct{}{}
	case age > n.period:
		n.prev, n.cur = n.cur, map[[16]byte]struct{}{}
	default:
		return
	}
	n.rotated = now
}

// size is how many nonces are remembered.
func (n *nonces) size() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.cur) + len(n.prev)
}

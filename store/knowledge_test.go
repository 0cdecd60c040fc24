package store_test

// What the tests pass as Work.Known and learn from batches, and a source
// of draws a test can replay.

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store"
)

// knownMarker is the greeting the tests put in the packet of every Known they
// pass: the batch of a work applied from its knowledge carries the known
// packet, so the marker comes back; a work whose transaction read the
// packet (the slow path, or the retry after stale knowledge) carries the
// greeting MySQL holds (none: the tests create packets without one).
const knownMarker = "known-marker"

// markKnown returns a copy of k whose packet carries knownMarker.
func markKnown(k *hongbao.Snapshot) *hongbao.Snapshot {
	if k == nil {
		return nil
	}
	c := *k
	c.Packet.Greeting = knownMarker
	return &c
}

// takesOpens reports whether the store applies a work from k: only while
// the known packet takes opens (a sold-out or expired one is read).
func takesOpens(k *hongbao.Snapshot) bool {
	return k != nil && k.Packet.StatusAt(time.Now()) == hongbao.Active
}

// learn returns the knowledge a batch gives, as a server keeps it.
func learn(t *testing.T, b store.Batch) *hongbao.Snapshot {
	t.Helper()
	if b.Packet == nil || b.Openers == nil {
		t.Fatalf("batch without packet or openers to learn from: %+v", b)
	}
	return &hongbao.Snapshot{Packet: *b.Packet, Openers: b.Openers}
}

// drawSource is a store's source of draws that a test can reseed before a
// call, so that a model drawing from seeded(seed) stays in step with it; it
// counts the draws.
type drawSource struct {
	mu    sync.Mutex
	r     *rand.Rand
	calls int
}

func newDrawSource(seed uint64) *drawSource {
	k := &drawSource{}
	k.reset(seed)
	return k
}

// reset restarts the draws as seeded(seed) does.
func (k *drawSource) reset(seed uint64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.r = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
}

func (k *drawSource) intn(n int64) int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.calls++
	return k.r.Int64N(n)
}

func (k *drawSource) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.calls
}

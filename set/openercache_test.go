package set

import (
	"testing"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store/cache"
)

// TestOpenerCacheAddAfterClose: a transaction may commit after a Close that
// ran out of time; its cache entries are dropped, never a panic (a send on
// a closed channel), and close twice is fine.
func TestOpenerCacheAddAfterClose(t *testing.T) {
	c := cache.New([]string{"127.0.0.1:1"}, 50*time.Millisecond, 2, zap.NewNop()) // nothing listens
	oc := newOpenerCache(c)
	for i := range 10 {
		oc.add(openerEntry{id: 1, shares: []cache.Share{{User: 2, Amount: int64(i + 1)}}, expires: time.Now().Add(time.Hour)})
	}
	done := make(chan struct{})
	go func() { oc.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return: the queued entries were not drained")
	}
	for range 2 * openerBacklog {
		oc.add(openerEntry{id: 1, shares: []cache.Share{{User: 3, Amount: 1}}})
	}
	if n := len(oc.ch); n != 0 {
		t.Errorf("%d entries queued after close, want them dropped", n)
	}
	oc.close()
}

// TestOpenerCacheSoldOutNeverDropped: with the shares' backlog full (a rain
// of entries the pacing drops), every sold-out state still reaches
// memcached: a lost one would say the packet has shares until it expires.
func TestOpenerCacheSoldOutNeverDropped(t *testing.T) {
	c := cache.New([]string{dbtest.Memcached(t, "a")}, time.Second, 8, zap.NewNop())
	oc := newOpenerCache(c)
	expires := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	base := hongbao.PacketID(time.Now().UnixNano()) // fresh keys
	for i := range 3 * openerBacklog {
		oc.add(openerEntry{id: base, shares: []cache.Share{{User: hongbao.UserID(i + 1), Amount: 1}}, expires: expires})
	}
	const n = stateBacklog + 100 // more than the states' lane holds: the rest are written by the caller
	for i := range n {
		oc.soldOut(base+hongbao.PacketID(i+1), hongbao.State{RemainingCount: 0, ExpiresAt: expires})
	}
	oc.close()
	for i := range n {
		id := base + hongbao.PacketID(i+1)
		if _, _, st, ok := c.Lookup(id, 1); !ok || st.RemainingCount != 0 || !st.ExpiresAt.Equal(expires) {
			t.Fatalf("state of packet %d (%d of %d) = %+v, %v; want sold out", id, i+1, n, st, ok)
		}
	}
}

// TestOpenerCacheBatchesLand: each entry carries one committed batch's
// shares, written in one pipelined round; every share of every batch reads
// back, and a batch larger than a tick's pace still goes whole.
func TestOpenerCacheBatchesLand(t *testing.T) {
	c := cache.New([]string{dbtest.Memcached(t, "a")}, time.Second, 8, zap.NewNop())
	oc := newOpenerCache(c)
	expires := time.Now().Add(time.Hour)
	base := hongbao.PacketID(time.Now().UnixNano())
	const batches, size = 5, 2 * openerRate * int(openerTick) / int(time.Second) // each over a tick's budget
	for b := range batches {
		var shares []cache.Share
		for i := range size {
			shares = append(shares, cache.Share{User: hongbao.UserID(1000*b + i + 1), Amount: int64(i + 1)})
		}
		oc.add(openerEntry{id: base + hongbao.PacketID(b), shares: shares, expires: expires})
	}
	oc.close()
	for b := range batches {
		for i := range size {
			if amount, ok := c.Opened(base+hongbao.PacketID(b), hongbao.UserID(1000*b+i+1)); !ok || amount != int64(i+1) {
				t.Fatalf("batch %d share %d: Opened = %d, %v; want %d", b, i, amount, ok, i+1)
			}
		}
	}
}

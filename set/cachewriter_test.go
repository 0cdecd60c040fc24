package set

import (
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/hongbao-dev/hongbao/store"
)

// TestOpenerCacheAddAfterClose: a transaction may commit after a Close that
// ran out of time; its cache entries are dropped, never a panic (a send on
// a closed channel), and close twice is fine.
func TestOpenerCacheAddAfterClose(t *testing.T) {
	c := store.NewCache([]string{"127.0.0.1:1"}, 50*time.Millisecond, 2, zap.NewNop()) // nothing listens
	oc := newOpenerCache(c)
	for i := range 10 {
		oc.add(openerEntry{id: 1, user: 2, amount: int64(i + 1), expires: time.Now().Add(time.Hour)})
	}
	done := make(chan struct{})
	go func() { oc.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return: the queued entries were not drained")
	}
	for range 2 * openerBacklog {
		oc.add(openerEntry{id: 1, user: 3, amount: 1})
	}
	if n := len(oc.ch); n != 0 {
		t.Errorf("%d entries queued after close, want them dropped", n)
	}
	oc.close()
}

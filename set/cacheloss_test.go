package set_test

// Tests of losing memcached: stopped in the middle of a load, or its entries
// gone. The cache is only an optimisation, so every answer stays MySQL's.

import (
	mrand "math/rand/v2"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/bradfitz/gomemcache/memcache"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
)

// TestMemcachedStopped: the cache dies in the middle of a load; every open
// still gets a final, correct answer from MySQL.
func TestMemcachedStopped(t *testing.T) {
	mc := dbtest.StartMemcached(t)
	h := newHarness(t, harnessOpts{Memcached: mc.Addr})
	const packets, openers, count = 20, 30, 20
	ids := make([]hongbao.PacketID, packets)
	for i := range ids {
		ids[i] = h.mustSend(t, dbtest.FreshUser(), 2000, count, []string{"random", "fixed"}[i%2])
	}
	us := distinctUsers(openers)
	start := make(chan struct{})
	half := make(chan struct{})
	var done atomic.Int64
	var got answers
	var wg sync.WaitGroup
	for _, id := range ids {
		for _, u := range us {
			wg.Go(func() {
				<-start
				time.Sleep(time.Duration(mrand.IntN(400)) * time.Millisecond)
				got.open(h, u, id)
				if done.Add(1) == packets*openers/2 {
					close(half)
				}
			})
		}
	}
	close(start)
	<-half
	mc.Stop()
	t.Logf("memcached stopped after %d of %d answers", done.Load(), packets*openers)
	wg.Wait()

	told := got.told(t)
	for _, id := range ids {
		p := dbtest.CheckPacket(t, h.db, id)
		assertSameShares(t, id, told[id], p.Shares)
		if p.RemainingCount != 0 {
			t.Errorf("packet %d: %d shares left after %d openers", id, p.RemainingCount, openers)
		}
	}
	// With the cache still down, opens and grabs are answered from MySQL.
	for _, id := range ids[:4] {
		for _, u := range us {
			r := h.open(u, id.String())
			g := h.grab(u, id.String())
			if amount, ok := told[id][u]; ok {
				if r.Status != http.StatusOK || r.Str("status") != hongbao.AlreadyOpened || r.Amount() != amount {
					t.Errorf("packet %d user %d reopens: %v, want already_opened %d", id, u, r, amount)
				}
				if g.Status != http.StatusOK || g.JSON["can_open"] != false || g.Str("reason") != hongbao.AlreadyOpened {
					t.Errorf("packet %d user %d grabs: %v, want already_opened", id, u, g)
				}
				continue
			}
			if !r.IsProblem(http.StatusConflict, "sold_out") {
				t.Errorf("packet %d user %d reopens: %v, want sold_out", id, u, r)
			}
			if g.Status != http.StatusOK || g.JSON["can_open"] != false || g.Str("reason") != string(hongbao.SoldOut) {
				t.Errorf("packet %d user %d grabs: %v, want sold_out", id, u, g)
			}
		}
	}
}

// TestCacheLoss: memcached loses its entries (eviction, restart). The cache
// is only an optimisation (store/cache.go: "a stale or lost entry makes the
// server do more work, never answer differently"), so every answer must be
// the same as with the entries in place.
func TestCacheLoss(t *testing.T) {
	t.Parallel()
	mc := dbtest.StartMemcached(t)
	h := newHarness(t, harnessOpts{Memcached: mc.Addr})
	flush := func() {
		t.Helper()
		if err := memcache.New(mc.Addr).FlushAll(); err != nil {
			t.Fatal(err)
		}
	}
	live := h.mustSend(t, dbtest.FreshUser(), 1000, 10, "random").String()
	over := h.mustSend(t, dbtest.FreshUser(), 200, 2, "random").String()
	a, b, c := dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
	first := map[string]reply{}
	for _, id := range []string{live, over} {
		first[id] = h.open(a, id)
		if r := first[id]; r.Status != http.StatusOK || r.Str("status") != hongbao.Opened {
			t.Fatalf("open: %v", r)
		}
	}
	if r := h.open(b, over); r.Status != http.StatusOK || r.Str("status") != hongbao.Opened {
		t.Fatalf("open: %v", r)
	}
	flush()
	for _, id := range []string{live, over} {
		if r := h.grab(a, id); r.Status != http.StatusOK || r.JSON["can_open"] != false || r.Str("reason") != hongbao.AlreadyOpened {
			t.Errorf("grab by an opener after the cache lost its entries: %v, want can_open false, already_opened", r)
		}
		flush()
		if r := h.open(a, id); r.Status != http.StatusOK || r.Str("status") != hongbao.AlreadyOpened || r.Amount() != first[id].Amount() {
			t.Errorf("reopen after the cache lost its entries: %v, want already_opened %d", r, first[id].Amount())
		}
		flush()
	}
	if r := h.grab(c, over); r.Status != http.StatusOK || r.JSON["can_open"] != false || r.Str("reason") != string(hongbao.SoldOut) {
		t.Errorf("grab of a sold-out packet after the cache lost its entries: %v", r)
	}
	flush()
	if r := h.open(c, over); !r.IsProblem(http.StatusConflict, "sold_out") {
		t.Errorf("open of a sold-out packet after the cache lost its entries: %v", r)
	}
	if r := h.grab(c, live); r.Status != http.StatusOK || r.JSON["can_open"] != true {
		t.Errorf("grab by a newcomer: %v", r)
	}
}

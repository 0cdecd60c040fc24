package cache_test

import (
	"errors"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/metrics"
	"github.com/hongbao-dev/hongbao/store/cache"
	"github.com/prometheus/client_golang/prometheus"
)

// freshPacket returns a packet ID no other test uses.
func freshPacket(t *testing.T) hongbao.PacketID {
	t.Helper()
	id, err := hongbao.NewPacketID(time.Now(), hongbao.Bucket(rand.IntN(hongbao.Buckets)), rand.IntN(4096))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// newCache returns a cache on addr whose calls time out after 5 s: a
// memcached starved of CPU on a loaded machine is slow, not down, and
// these tests are not about the timeout.
func newCache(t *testing.T, addr string) *cache.Cache {
	t.Helper()
	return cache.New([]string{addr}, 5*time.Second, 8, zap.NewNop())
}

func TestStateAndOpenersRoundTrip(t *testing.T) {
	c := newCache(t, dbtest.Memcached(t, "a"))
	id, user := freshPacket(t), dbtest.FreshUser()
	if _, ok := c.State(id); ok {
		t.Fatal("state of a packet never cached")
	}
	exp := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	want := hongbao.State{RemainingCount: 3, ExpiresAt: exp, Closed: true}
	c.SetState(id, want)
	got, ok := c.State(id)
	if !ok || got.RemainingCount != 3 || !got.ExpiresAt.Equal(exp) || !got.Closed {
		t.Fatalf("State = %+v, %v; want %+v", got, ok, want)
	}
	if _, opened := c.Opened(id, user); opened {
		t.Fatal("a user never cached reads as an opener")
	}
	c.SetOpened(id, user, 1234, exp)
	amount, opened, st, stOK := c.Lookup(id, user)
	if !opened || amount != 1234 || !stOK || st.RemainingCount != 3 {
		t.Errorf("Lookup = %d, %v, %+v, %v; want 1234, opened, the state", amount, opened, st, stOK)
	}
}

func TestSlotsCapInFlightTransactions(t *testing.T) {
	c := newCache(t, dbtest.Memcached(t, "a"))
	id := freshPacket(t)
	const limit = 2
	var tokens []string
	for range limit {
		tok, ok, err := c.AcquireSlot(id, limit, 5*time.Second)
		if err != nil || !ok {
			t.Fatalf("AcquireSlot within the cap = %v, %v", ok, err)
		}
		tokens = append(tokens, tok)
	}
	if _, ok, err := c.AcquireSlot(id, limit, 5*time.Second); ok || err != nil {
		t.Fatalf("AcquireSlot over the cap = %v, %v; want refused", ok, err)
	}
	c.ReleaseSlot(id, tokens[0], 5*time.Second)
	if _, ok, err := c.AcquireSlot(id, limit, 5*time.Second); !ok || err != nil {
		t.Fatalf("AcquireSlot after a release = %v, %v; want a slot", ok, err)
	}
}

// TestSlotsFreeThemselves: a holder that died never releases; its deadline
// frees the slot.
// The clock is the cache's own (WithClock), moved by hand: on a loaded
// machine the second call could otherwise come after the deadline.
func TestSlotsFreeThemselves(t *testing.T) {
	var skew atomic.Int64
	c := newCache(t, dbtest.Memcached(t, "a")).WithClock(func() time.Time { return time.Now().Add(time.Duration(skew.Load())) })
	id := freshPacket(t)
	if _, ok, err := c.AcquireSlot(id, 1, 300*time.Millisecond); !ok || err != nil {
		t.Fatalf("AcquireSlot = %v, %v", ok, err)
	}
	skew.Store(int64(-time.Minute)) // however long the call took, the holder is within its 300 ms
	if _, ok, _ := c.AcquireSlot(id, 1, 300*time.Millisecond); ok {
		t.Fatal("second holder admitted over a cap of 1")
	}
	skew.Store(int64(time.Minute)) // well past the holder's deadline
	if _, ok, err := c.AcquireSlot(id, 1, 300*time.Millisecond); !ok || err != nil {
		t.Fatalf("AcquireSlot after the holder's deadline = %v, %v; want the slot", ok, err)
	}
}

func TestSlotsConcurrentNeverOverCap(t *testing.T) {
	c := newCache(t, dbtest.Memcached(t, "a"))
	id := freshPacket(t)
	const limit, racers = 3, 24
	var mu sync.Mutex
	held, most := 0, 0
	var wg sync.WaitGroup
	for range racers {
		wg.Go(func() {
			for range 5 {
				tok, ok, err := c.AcquireSlot(id, limit, 5*time.Second)
				if err != nil {
					t.Error(err)
					return
				}
				if !ok {
					continue
				}
				mu.Lock()
				held++
				most = max(most, held)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				mu.Lock()
				held--
				mu.Unlock()
				c.ReleaseSlot(id, tok, 5*time.Second)
			}
		})
	}
	wg.Wait()
	if most > limit || most == 0 {
		t.Errorf("at most %d holders at once, want 1..%d", most, limit)
	}
}

// TestDownIsReportedAndCheap: with memcached gone every call says ErrDown
// (callers fall back to MySQL), and the breaker answers without dialing:
// one failed call per second at most, the rest skipped (counted, not
// timed: a loaded machine stretches any time bound).
func TestDownIsReportedAndCheap(t *testing.T) {
	mc := dbtest.StartMemcached(t)
	reg := prometheus.NewRegistry()
	c := newCache(t, mc.Addr).WithMetrics(metrics.NewCache(reg))
	id := freshPacket(t)
	c.SetState(id, hongbao.State{RemainingCount: 1, ExpiresAt: time.Now().Add(time.Hour)})
	if _, ok := c.State(id); !ok {
		t.Fatal("state not cached while memcached runs")
	}
	mc.Stop()
	if _, _, err := c.AcquireSlot(id, 1, time.Second); !errors.Is(err, cache.ErrDown) {
		t.Fatalf("AcquireSlot with memcached down = %v, want ErrDown", err)
	}
	start := time.Now()
	for range 100 {
		if _, _, err := c.AcquireSlot(id, 1, time.Second); !errors.Is(err, cache.ErrDown) {
			t.Fatalf("AcquireSlot with memcached down = %v, want ErrDown", err)
		}
		if _, ok := c.State(id); ok {
			t.Fatal("a state read while memcached is down")
		}
	}
	took := time.Since(start)
	failed, skipped := breakerCounts(t, reg)
	if failed+skipped != 201 || failed < 1 || failed > 1+math.Ceil(took.Seconds()) {
		t.Errorf("201 calls against a dead memcached in %v: %v failed (dialed), %v skipped; want one dial a second at most, the rest skipped",
			took, failed, skipped)
	}
}

// breakerCounts are the calls that failed against memcached (dialed) and
// those the breaker skipped, as the cache's metrics in reg count them.
func breakerCounts(t *testing.T, reg *prometheus.Registry) (failed, skipped float64) {
	t.Helper()
	return counterValue(t, reg, "hongbao_cache_errors_total"), counterValue(t, reg, "hongbao_cache_fallbacks_total")
}

// counterValue gathers reg and returns the value of counter name.
func counterValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// TestSetOpenedMany: a batch's shares written in one pipelined round read
// back one by one through the ordinary client, over several rounds on the
// same pooled connection; a single share takes the ordinary path.
func TestSetOpenedMany(t *testing.T) {
	c := newCache(t, dbtest.Memcached(t, "a"))
	exp := time.Now().Add(time.Hour)
	for round := range 3 {
		id := freshPacket(t)
		var shares []cache.Share
		for i := range 50 + round {
			shares = append(shares, cache.Share{User: dbtest.FreshUser(), Amount: int64(100*round + i + 1)})
		}
		c.SetOpenedMany(id, shares, exp)
		for _, s := range shares {
			if amount, ok := c.Opened(id, s.User); !ok || amount != s.Amount {
				t.Fatalf("round %d: Opened(%s) = %d, %v; want %d", round, s.User, amount, ok, s.Amount)
			}
		}
		if _, ok := c.Opened(id, dbtest.FreshUser()); ok {
			t.Fatal("a user not in the batch reads as an opener")
		}
	}
	id, one := freshPacket(t), cache.Share{User: dbtest.FreshUser(), Amount: 7}
	c.SetOpenedMany(id, []cache.Share{one}, exp)
	c.SetOpenedMany(id, nil, exp)
	if amount, ok := c.Opened(id, one.User); !ok || amount != 7 {
		t.Errorf("single share: Opened = %d, %v; want 7", amount, ok)
	}
}

// TestSetOpenedManyDown: with nothing listening the pipelined sets fail
// fast and mark memcached down, as the ordinary calls do; nothing panics.
// Counted, not timed (see TestDownIsReportedAndCheap).
func TestSetOpenedManyDown(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := cache.New([]string{"127.0.0.1:1"}, 50*time.Millisecond, 2, zap.NewNop()).WithMetrics(metrics.NewCache(reg))
	shares := []cache.Share{{User: 1, Amount: 1}, {User: 2, Amount: 2}}
	start := time.Now()
	c.SetOpenedMany(freshPacket(t), shares, time.Now().Add(time.Hour))
	c.SetOpenedMany(freshPacket(t), shares, time.Now().Add(time.Hour))
	if _, ok := c.State(freshPacket(t)); ok {
		t.Fatal("state read from a cache that is down")
	}
	took := time.Since(start)
	failed, skipped := breakerCounts(t, reg)
	if failed+skipped != 3 || failed < 1 || failed > 1+math.Floor(took.Seconds()) {
		t.Errorf("3 calls against a cache that is down in %v: %v failed (dialed), %v skipped; want the first to fail and the rest skipped",
			took, failed, skipped)
	}
}

package webhooks_test

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zaptest"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api/webhook"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/set/webhooks"
	"github.com/hongbao-dev/hongbao/store"
)

var secret = []byte("test-webhook-secret-0123")

// receiver is a real HTTP endpoint that checks each request's signature
// and records the events it accepted, in arrival order; while down it
// answers 503.
type receiver struct {
	srv   *httptest.Server
	down  atomic.Bool
	delay atomic.Int64 // ns each accepted request takes, so kills land mid-delivery
	// before, when set, sees each signed event before it is recorded
	// (and may hold its request).
	before atomic.Pointer[func(webhook.Event)]
	mu     sync.Mutex
	got    []webhook.Event
	body   map[string]string // event ID -> body, to see duplicates are the same event
	bad    []string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{body: map[string]string{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		if r.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		time.Sleep(time.Duration(r.delay.Load()))
		var e webhook.Event
		verr := webhook.Verify(secret, req.Header.Get(webhook.Header), b, time.Now(), 0)
		jerr := json.Unmarshal(b, &e)
		if f := r.before.Load(); f != nil && verr == nil && jerr == nil {
			(*f)(e)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if verr != nil {
			r.bad = append(r.bad, verr.Error())
			http.Error(w, verr.Error(), http.StatusBadRequest)
			return
		}
		if jerr != nil || e.ID != req.Header.Get("Hongbao-Event-Id") {
			r.bad = append(r.bad, "bad body "+string(b))
		}
		if prev, ok := r.body[e.ID]; ok && prev != string(b) {
			r.bad = append(r.bad, "event "+e.ID+" delivered twice with different bodies")
		}
		r.body[e.ID] = string(b)
		r.got = append(r.got, e)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// ids returns the distinct event IDs received, in first-arrival order.
func (r *receiver) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.got {
		if !slices.Contains(out, e.ID) {
			out = append(out, e.ID)
		}
	}
	return out
}

// fixture is a fresh SET of test MySQL a, with webhooks on.
type fixture struct {
	st     *store.Store
	bucket hongbao.Bucket
	minter *hongbao.Minter
}

func newFixture(t *testing.T) *fixture {
	db := dbtest.DB(t, "a", 8)
	set := dbtest.UniqueName("wh")
	b := hongbao.Bucket(rand.IntN(hongbao.Buckets))
	dbtest.Own(t, db, set, []hongbao.Bucket{b})
	return &fixture{st: store.New(db, set, dbtest.Shanghai(t), time.Now, rand.Int64N).WithEvents(), bucket: b, minter: hongbao.NewMinter(time.Now)}
}

// sellOut sends a packet of n shares and opens all of them, returning the
// event IDs written, in order.
func (f *fixture) sellOut(t *testing.T, n int) []string {
	t.Helper()
	ctx := context.Background()
	id, err := f.minter.Next(f.bucket)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.st.Create(ctx, store.NewPacket{ID: id, Sender: dbtest.FreshUser(),
		Req: hongbao.SendRequest{Total: int64(100 * n), Count: n, Type: hongbao.Random}, Expiry: time.Hour, Funding: hongbao.Funded}); err != nil {
		t.Fatal(err)
	}
	want := []string{store.EventID(store.EventSent, id, 0)}
	for range n {
		u := dbtest.FreshUser()
		if _, err := f.st.Open(ctx, id, u); err != nil {
			t.Fatal(err)
		}
		want = append(want, store.EventID(store.EventOpened, id, u))
	}
	return append(want, store.EventID(store.EventFinished, id, 0))
}

func (f *fixture) deliverer(t *testing.T, urls ...string) *webhooks.Deliverer {
	d := webhooks.New(f.st, &http.Client{Timeout: 5 * time.Second}, urls, secret, time.Now, zaptest.NewLogger(t))
	d.Interval, d.Backoff, d.MaxBackoff = 10*time.Millisecond, 20*time.Millisecond, 100*time.Millisecond
	return d
}

// run runs d until the test ends.
func run(t *testing.T, d *webhooks.Deliverer) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { d.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// waitFor polls cond for up to 20 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	waitUpTo(t, 20*time.Second, what, cond)
}

// waitUpTo polls cond for up to d.
func waitUpTo(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestReceiverDownThenUp: one of two endpoints is down while packets are
// sent and sold out, then up: each endpoint ends with every event, each
// packet's in order, duplicates only under the same ID and body, and the
// endpoint that stayed up never got an event twice for the other's
// failures.
func TestReceiverDownThenUp(t *testing.T) {
	f := newFixture(t)
	up, flaky := newReceiver(t), newReceiver(t)
	flaky.down.Store(true)
	run(t, f.deliverer(t, up.srv.URL, flaky.srv.URL))
	var want [][]string
	for range 5 {
		want = append(want, f.sellOut(t, 4))
	}
	time.Sleep(300 * time.Millisecond) // retries meet the endpoint down
	flaky.down.Store(false)
	all := slices.Concat(want...)
	for _, r := range []*receiver{up, flaky} {
		waitFor(t, "every event at "+r.srv.URL, func() bool { return len(r.ids()) == len(all) })
		got := r.ids()
		for _, w := range want { // each packet's events in the order written
			var seen []string
			for _, id := range got {
				if slices.Contains(w, id) {
					seen = append(seen, id)
				}
			}
			if !slices.Equal(seen, w) {
				t.Errorf("%s: got %v, want %v", r.srv.URL, seen, w)
			}
		}
		if len(r.bad) > 0 {
			t.Errorf("%s: %v", r.srv.URL, r.bad)
		}
	}
	if n := len(up.got); n != len(all) {
		t.Errorf("the endpoint up all along got %d deliveries of %d events", n, len(all))
	}
	waitFor(t, "the events table empty", func() bool {
		evs, err := f.st.Events(context.Background(), store.EventFilter{})
		return err == nil && len(evs) == 0
	})
}

// TestFailedThenReplayed: an endpoint down past the retry window leaves
// the events failed (kept, not retried); replayed, they are delivered.
func TestFailedThenReplayed(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	r := newReceiver(t)
	r.down.Store(true)
	d := f.deliverer(t, r.srv.URL)
	d.RetryFor = 200 * time.Millisecond
	run(t, d)
	want := f.sellOut(t, 2)
	failed := true
	waitFor(t, "the events failed", func() bool {
		evs, err := f.st.Events(ctx, store.EventFilter{Failed: &failed})
		return err == nil && len(evs) == len(want)
	})
	r.down.Store(false)
	time.Sleep(200 * time.Millisecond)
	if got := r.ids(); len(got) != 0 {
		t.Fatalf("failed events delivered without a replay: %v", got)
	}
	n, err := f.st.ReplayEvents(ctx, store.EventFilter{}, time.Now())
	if err != nil || n != int64(len(want)) {
		t.Fatalf("replay: %d, %v", n, err)
	}
	waitFor(t, "the replayed events", func() bool { return len(r.ids()) == len(want) })
	if got := r.ids(); !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// TestOneRoundSendsAPacketsEventsInOrder: a round claims a packet's first
// pending event and those after it, so a packet's events need not wait a
// round each; a batch too small for them all takes a prefix, and the next
// round the rest, in order.
func TestOneRoundSendsAPacketsEventsInOrder(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	r := newReceiver(t)
	d := f.deliverer(t, r.srv.URL)
	want := f.sellOut(t, 20) // 22 events
	d.Batch = 15
	for i, n := range []int{15, 7, 0} {
		got, err := d.Round(ctx)
		if err != nil || got != n {
			t.Fatalf("round %d: %d events, %v; want %d", i, got, err, n)
		}
	}
	if got := r.ids(); !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

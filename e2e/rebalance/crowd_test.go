package rebalance_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/clustertest"
	"github.com/hongbao-dev/hongbao/e2e/harness/ctltest"
)

// load is a crowd of clients sending packets of 5 shares through the
// router and opening each share as another user, as an app does: every
// client retries busy answers and lost connections for 15 s and, when
// think is set, waits about that long between two requests (a crowd of
// people, not a loop). It keeps every acknowledged open, every answer that
// was not one (and its kind), and the latency of every request.
type load struct {
	think time.Duration

	mu      sync.Mutex
	acks    []ctltest.Opened
	errors  []string // every failure
	wrong   []string // the failures that are not an overloaded machine's
	busy    int      // the others: no answer, or 503 after 15 s of retries
	kinds   map[string]int
	sent    []hongbao.PacketID
	samples []sample
	n       atomic.Int64
}

// sample is one request's answer time, and whether it failed.
type sample struct {
	at     time.Time
	took   time.Duration
	failed bool
}

func (l *load) run(t testing.TB, c *clustertest.Cluster, clients int, stop <-chan struct{}) *sync.WaitGroup {
	cl := c.Client.Retrying(15 * time.Second)
	var wg sync.WaitGroup
	for w := range clients {
		wg.Go(func() {
			for i := 0; l.pause(stop); i++ {
				sender := ctltest.User()
				r := cl.Send(sender, hongbao.SendRequest{Total: 500, Count: 5, Type: hongbao.Random}, fmt.Sprintf("w%d-%d", w, i))
				if r.Status != http.StatusCreated && r.Status != http.StatusOK {
					l.fail("send", r.Status, r.Code, r.Err, r.String(), r.Sent)
					continue
				}
				l.took(r.Sent, r.Answered)
				id, err := hongbao.ParsePacketID(r.Body.ID)
				if err != nil {
					l.fail("send", r.Status, "bad_id", nil, "send answered id "+r.Body.ID, r.Sent)
					continue
				}
				l.mu.Lock()
				l.sent = append(l.sent, id)
				l.mu.Unlock()
				for range 5 {
					if !l.pause(stop) {
						return
					}
					u := ctltest.User()
					o := cl.Open(u, id.String())
					l.n.Add(1)
					// After a lost answer the retry (the client's, or the
					// router's on the next server) says already_opened,
					// with the amount the first attempt took: an answer,
					// checked against MySQL like the others.
					took := o.Body.Status == hongbao.Opened || o.Body.Status == hongbao.AlreadyOpened
					if o.Status != http.StatusOK || !took {
						l.fail("open", o.Status, o.Code+string(o.Body.Status), o.Err, fmt.Sprintf("open %s: %v", id, o), o.Sent)
						continue
					}
					l.took(o.Sent, o.Answered)
					l.mu.Lock()
					l.acks = append(l.acks, ctltest.Opened{ID: id, User: u, Amount: o.Body.Amount})
					l.mu.Unlock()
				}
			}
		})
	}
	return &wg
}

// pause waits a client's think time (uniform in [0.5, 1.5] of it), and
// reports false once stop is closed.
func (l *load) pause(stop <-chan struct{}) bool {
	if l.think == 0 {
		select {
		case <-stop:
			return false
		default:
			return true
		}
	}
	d := time.Duration(float64(l.think) * (0.5 + rand.Float64()))
	select {
	case <-stop:
		return false
	case <-time.After(d):
		return true
	}
}

func (l *load) took(sent, answered time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.samples = append(l.samples, sample{at: answered, took: answered.Sub(sent)})
}

// fail keeps an answer that was not a success, counted by its kind: the
// operation, the status and the problem code, or for no answer at all the
// kind of transport error.
func (l *load) fail(op string, status int, code string, err error, detail string, sent time.Time) {
	kind := fmt.Sprintf("%s %d %s", op, status, code)
	if status == 0 {
		kind = op + " no answer: " + transportKind(err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kinds == nil {
		l.kinds = map[string]int{}
	}
	l.kinds[kind]++
	l.errors = append(l.errors, detail)
	// No answer (in 30 s, or a connection dropped after a long wait) and
	// 503 after 15 s of retries are what an overloaded machine gives;
	// every other answer that is not a success is wrong.
	if status == 0 || status == http.StatusServiceUnavailable {
		l.busy++
	} else {
		l.wrong = append(l.wrong, detail)
	}
	l.samples = append(l.samples, sample{at: time.Now(), took: time.Since(sent), failed: true})
}

func transportKind(err error) string {
	switch s := fmt.Sprint(err); {
	case strings.Contains(s, "Timeout") || strings.Contains(s, "deadline"):
		return "timeout"
	case strings.Contains(s, "refused"):
		return "connection refused"
	case strings.Contains(s, "reset") || strings.Contains(s, "EOF"):
		return "connection reset"
	default:
		return s
	}
}

// window sums the requests answered in [from, to): how many, how many
// failed, and the latency percentiles of the successful ones.
func (l *load) window(from, to time.Time) (w loadWindow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ds []time.Duration
	for _, s := range l.samples {
		if s.at.Before(from) || !s.at.Before(to) {
			continue
		}
		w.requests++
		if s.failed {
			w.failed++
			continue
		}
		ds = append(ds, s.took)
	}
	w.seconds = to.Sub(from).Seconds()
	if len(ds) > 0 {
		slices.Sort(ds)
		at := func(q float64) time.Duration { return ds[min(len(ds)-1, int(q*float64(len(ds)-1)+0.5))] }
		w.p50, w.p99, w.max = at(0.5), at(0.99), ds[len(ds)-1]
	}
	return w
}

// loadWindow is what clients saw during one phase of a run.
type loadWindow struct {
	requests, failed int
	seconds          float64
	p50, p99, max    time.Duration
}

func (w loadWindow) String() string {
	return fmt.Sprintf("%d requests (%.0f/s), %d failed, latency p50 %v p99 %v max %v",
		w.requests, float64(w.requests)/w.seconds, w.failed, w.p50.Round(time.Millisecond), w.p99.Round(time.Millisecond), w.max.Round(time.Millisecond))
}

// kindsTable lists the failures by kind, most frequent first.
func (l *load) kindsTable() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	type kv struct {
		k string
		n int
	}
	var all []kv
	for k, n := range l.kinds {
		all = append(all, kv{k, n})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].n > all[j].n || all[i].n == all[j].n && all[i].k < all[j].k })
	var b strings.Builder
	for _, e := range all {
		fmt.Fprintf(&b, "%8d  %s\n", e.n, e.k)
	}
	return b.String()
}

// acked is how many opens were acknowledged so far.
func (l *load) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.acks)
}

package router

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/api"
)

// batchServer answers batches in memory: each item's answer names its
// user, so a mixed-up answer shows. Batches wait on gate when it is set;
// items slow says are slow are answered last, once slowGate opens.
type batchServer struct {
	mu       sync.Mutex
	batches  [][]api.BatchItem
	flying   atomic.Int32 // batches sent and not answered yet
	maxFly   atomic.Int32
	gate     chan struct{}
	err      error
	slow     func(api.BatchItem) bool
	slowGate chan struct{}
}

func (f *batchServer) send(ctx context.Context, srv string, items []api.BatchItem, answer func(int, api.BatchAnswer)) error {
	n := f.flying.Add(1)
	first := sync.OnceFunc(func() { f.flying.Add(-1) })
	defer first()
	for {
		m := f.maxFly.Load()
		if n <= m || f.maxFly.CompareAndSwap(m, n) {
			break
		}
	}
	f.mu.Lock()
	f.batches = append(f.batches, items)
	gate, err := f.gate, f.err
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err != nil {
		return err
	}
	reply := func(i int) {
		first()
		answer(i, api.BatchAnswer{Status: 200, Body: []byte(srv + " " + items[i].User.String())})
	}
	var slow []int
	for i, it := range items {
		if f.slow != nil && f.slow(it) {
			slow = append(slow, i)
			continue
		}
		reply(i)
	}
	for _, i := range slow {
		select {
		case <-f.slowGate:
		case <-ctx.Done():
			return ctx.Err()
		}
		reply(i)
	}
	return nil
}

func (f *batchServer) sizes() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	var s []int
	for _, b := range f.batches {
		s = append(s, len(b))
	}
	return s
}

func item(u int) api.BatchItem {
	return api.BatchItem{Method: "POST", Target: "/v1/ping", User: hongbao.UserID(u)}
}

// closeCoalescer closes co at the end of the test, failing it when
// batches are left.
func closeCoalescer(t *testing.T, co *coalescer) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := co.close(ctx); err != nil {
			t.Error(err)
		}
	})
}

// TestCoalescerIdleSendsAtOnce: alone, a request leaves at once in a
// batch of one, and gets its own answer.
func TestCoalescerIdleSendsAtOnce(t *testing.T) {
	f := &batchServer{}
	co := newCoalescer(Coalescing{Batch: 64, InFlight: 1}, time.Second, f.send)
	closeCoalescer(t, co)
	for i := 1; i <= 3; i++ {
		a, err := co.do(context.Background(), "s1", item(i))
		if err != nil || string(a.Body) != fmt.Sprintf("s1 %d", i) {
			t.Fatalf("answer %q, %v", a.Body, err)
		}
	}
	if s := f.sizes(); len(s) != 3 || s[0] != 1 || s[2] != 1 {
		t.Fatalf("batch sizes %v, want three of one", s)
	}
}

// TestCoalescerGathersWhileInFlight: while a server's batches are in
// flight, requests gather into the next batches: every caller gets its
// own answer, no batch is over the cap, and no more batches fly at once
// than InFlight.
func TestCoalescerGathersWhileInFlight(t *testing.T) {
	for _, tc := range []struct{ batch, inFlight, callers int }{{8, 1, 100}, {64, 2, 300}, {1, 4, 50}} {
		t.Run(fmt.Sprintf("batch%d_inflight%d", tc.batch, tc.inFlight), func(t *testing.T) {
			f := &batchServer{gate: make(chan struct{})}
			co := newCoalescer(Coalescing{Batch: tc.batch, InFlight: tc.inFlight}, 5*time.Second, f.send)
			co.firstAnswer.Store(int64(time.Hour)) // a lease longer than the test holds its gate
			co.maxLease = time.Hour
			closeCoalescer(t, co)
			var wg sync.WaitGroup
			errs := make(chan error, tc.callers)
			for i := 1; i <= tc.callers; i++ {
				wg.Go(func() {
					srv := fmt.Sprintf("s%d", i%2)
					a, err := co.do(context.Background(), srv, item(i))
					if err != nil || string(a.Body) != fmt.Sprintf("%s %d", srv, i) {
						errs <- fmt.Errorf("caller %d: %q, %v", i, a.Body, err)
					}
				})
			}
			time.Sleep(50 * time.Millisecond) // all callers queued behind the first batches
			close(f.gate)
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			total := 0
			for _, n := range f.sizes() {
				if n > tc.batch {
					t.Errorf("a batch of %d, cap %d", n, tc.batch)
				}
				total += n
			}
			if total != tc.callers {
				t.Errorf("%d items sent for %d callers", total, tc.callers)
			}
			if got := int(f.maxFly.Load()); got > 2*tc.inFlight { // two servers
				t.Errorf("%d batches in flight, at most %d", got, 2*tc.inFlight)
			}
			if tc.batch > 1 && len(f.sizes()) >= tc.callers {
				t.Errorf("%d batches for %d callers: nothing gathered", len(f.sizes()), tc.callers)
			}
		})
	}
}

// TestCoalescerCancelledCaller: a caller that leaves gets its context's
// error at once; the others of its batch are answered, and a caller gone
// before its batch left is not sent at all.
func TestCoalescerCancelledCaller(t *testing.T) {
	f := &batchServer{gate: make(chan struct{})}
	co := newCoalescer(Coalescing{Batch: 64, InFlight: 1}, 5*time.Second, f.send)
	co.firstAnswer.Store(int64(time.Hour)) // a lease longer than the test holds its gate
	co.maxLease = time.Hour
	closeCoalescer(t, co)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = co.do(context.Background(), "s", item(1)) }) // holds the lane
	until(t, "the first batch in flight", func() bool { return f.flying.Load() == 1 })
	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() { _, err := co.do(ctx, "s", item(2)); gone <- err }()
	answers := make([]string, 5)
	for i := range answers {
		wg.Go(func() {
			a, err := co.do(context.Background(), "s", item(10+i))
			answers[i] = fmt.Sprintf("%s %v", a.Body, err)
		})
	}
	until(t, "six callers waiting", func() bool { return co.waiting("s") == 6 })
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled caller: %v", err)
	}
	close(f.gate)
	wg.Wait()
	for i, a := range answers {
		if a != fmt.Sprintf("s %d <nil>", 10+i) {
			t.Errorf("caller %d: %s", 10+i, a)
		}
	}
	for _, b := range f.batches {
		for _, it := range b {
			if it.User == 2 {
				t.Errorf("the cancelled caller's item was sent")
			}
		}
	}
}

// TestCoalescerFailedBatch: a batch that fails fails every one of its
// callers with the error, none with an answer.
func TestCoalescerFailedBatch(t *testing.T) {
	boom := errors.New("connection reset")
	f := &batchServer{gate: make(chan struct{}), err: boom}
	co := newCoalescer(Coalescing{Batch: 64, InFlight: 1}, 5*time.Second, f.send)
	co.firstAnswer.Store(int64(time.Hour)) // a lease longer than the test holds its gate
	co.maxLease = time.Hour
	closeCoalescer(t, co)
	var wg sync.WaitGroup
	var failed atomic.Int32
	for i := 1; i <= 20; i++ {
		wg.Go(func() {
			a, err := co.do(context.Background(), "s", item(i))
			if errors.Is(err, boom) && a.Status == 0 {
				failed.Add(1)
			}
		})
	}
	time.Sleep(20 * time.Millisecond)
	close(f.gate)
	wg.Wait()
	if failed.Load() != 20 {
		t.Fatalf("%d of 20 callers got the batch's error", failed.Load())
	}
}

// TestCoalescerClose: close waits for the batches in flight (their callers
// are answered), and later calls are refused so they go the single way;
// when close's context ends first it cancels them.
func TestCoalescerClose(t *testing.T) {
	f := &batchServer{gate: make(chan struct{})}
	co := newCoalescer(Coalescing{Batch: 64, InFlight: 1}, 5*time.Second, f.send)
	got := make(chan error, 1)
	go func() { _, err := co.do(context.Background(), "s", item(1)); got <- err }()
	until(t, "the batch in flight", func() bool { return f.flying.Load() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := co.close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("close with a stuck batch: %v", err)
	}
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("caller of the cancelled batch: %v", err)
	}
	if _, err := co.do(context.Background(), "s", item(2)); !errors.Is(err, errCoalescerClosed) {
		t.Fatalf("after close: %v", err)
	}
	if len(co.lanes) != 0 {
		t.Fatalf("%d lanes left", len(co.lanes))
	}
}

// TestCoalescerBytesCap: bodies over the byte cap split batches, and a
// body larger than the cap still goes, alone.
func TestCoalescerBytesCap(t *testing.T) {
	f := &batchServer{gate: make(chan struct{})}
	co := newCoalescer(Coalescing{Batch: 64, InFlight: 1, Bytes: 100}, 5*time.Second, f.send)
	co.firstAnswer.Store(int64(time.Hour)) // a lease longer than the test holds its gate
	co.maxLease = time.Hour
	closeCoalescer(t, co)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = co.do(context.Background(), "s", item(1)) })
	time.Sleep(20 * time.Millisecond)
	// Bodies, and a long Idempotency-Key with no body: what counts is the
	// item as the batch carries it.
	for i, size := range []int{60, 60, 500, 10, 0, 0} {
		it := item(2 + i)
		it.Body = make([]byte, size)
		if i >= 4 {
			it.Header = []api.Header{{Name: "Idempotency-Key", Value: strings.Repeat("k", 70)}}
		}
		wg.Go(func() { _, _ = co.do(context.Background(), "s", it) })
		time.Sleep(5 * time.Millisecond)
	}
	close(f.gate)
	wg.Wait()
	items := 0
	for _, b := range f.batches {
		n := 0
		for _, it := range b {
			n += it.Size()
		}
		if n > 100 && len(b) > 1 {
			t.Errorf("a batch of %d items and %d bytes", len(b), n)
		}
		items += len(b)
	}
	if items != 7 {
		t.Errorf("%d items sent in %v, want 7", items, f.sizes())
	}
}

// TestCoalescerBatchesFitTheServer: the largest requests a router batches
// (a query, Content-Type and Idempotency-Key at the most a sub-request may
// have each), 512 of them waiting at once, go in batches a server takes
// whole (api.MaxBatchBytes): counting bodies alone, one batch of 512 was
// over it, and the server refused every request in it.
func TestCoalescerBatchesFitTheServer(t *testing.T) {
	f := &batchServer{gate: make(chan struct{})}
	co := newCoalescer(Coalescing{Batch: api.MaxBatchItems, InFlight: 1}, 10*time.Second, f.send)
	co.firstAnswer.Store(int64(time.Hour))
	co.maxLease = time.Hour
	closeCoalescer(t, co)
	long := strings.Repeat("x", 2000)
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = co.do(context.Background(), "s", item(1)) })
	time.Sleep(20 * time.Millisecond)
	for i := range api.MaxBatchItems {
		it := api.BatchItem{Method: "POST", Target: "/v1/packets?" + long, User: hongbao.UserID(2 + i), RequestID: long,
			Header: []api.Header{{Name: "Content-Type", Value: "application/json;" + long}, {Name: "Idempotency-Key", Value: long}},
			Body:   make([]byte, 2048)}
		if !it.Fits() {
			t.Fatal("the test's item does not fit a batch")
		}
		wg.Go(func() { _, _ = co.do(context.Background(), "s", it) })
	}
	for co.waiting("s") < api.MaxBatchItems {
		time.Sleep(time.Millisecond)
	}
	close(f.gate)
	wg.Wait()
	items := 0
	for _, b := range f.batches {
		raw := api.AppendBatch(nil, b)
		if len(raw) > api.MaxBatchBytes {
			t.Errorf("a batch of %d items and %d bytes, over %d", len(b), len(raw), api.MaxBatchBytes)
		}
		if _, err := api.DecodeBatch(raw); err != nil {
			t.Errorf("a batch of %d items: the server refuses it: %v", len(b), err)
		}
		items += len(b)
	}
	if items != api.MaxBatchItems+1 || len(f.batches) < 3 {
		t.Errorf("%d items in batches of %v", items, f.sizes())
	}
}

// TestCoalescerTimeout: an attempt is bounded by the coalescer's timeout,
// in flight (its batch is cancelled at the earliest deadline of its calls)
// and waiting behind a stuck batch (failed once its deadline passed).
func TestCoalescerTimeout(t *testing.T) {
	f := &batchServer{gate: make(chan struct{})} // never opened: batches end by their deadline
	const timeout = 100 * time.Millisecond
	co := newCoalescer(Coalescing{Batch: 64, InFlight: 1}, timeout, f.send)
	closeCoalescer(t, co)
	start := time.Now()
	errs := make(chan error, 2)
	go func() { _, err := co.do(context.Background(), "s", item(1)); errs <- err }()
	time.Sleep(timeout / 2)
	go func() { _, err := co.do(context.Background(), "s", item(2)); errs <- err }()
	for range 2 {
		if err := <-errs; !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("attempt: %v, want a deadline error", err)
		}
	}
	if took := time.Since(start); took > 20*timeout { // bounded; generous for a loaded machine and -race
		t.Fatalf("attempts of %v took %v", timeout, took)
	}
}

// TestCoalescerSlowItemHoldsNoOne: a sub-request that takes long (an open
// waiting for a locked row) holds back neither the answers of its own
// batch nor the requests that come after it: a batch leaves the lane's
// count in flight at its first answer.
func TestCoalescerSlowItemHoldsNoOne(t *testing.T) {
	f := &batchServer{slow: func(it api.BatchItem) bool { return it.User <= 3 }, slowGate: make(chan struct{})}
	co := newCoalescer(Coalescing{Batch: 64, InFlight: 1}, 5*time.Second, f.send)
	closeCoalescer(t, co)
	slow := make(chan error, 3)
	for i := 1; i <= 3; i++ {
		go func() { _, err := co.do(context.Background(), "s", item(i)); slow <- err }()
		time.Sleep(10 * time.Millisecond)
	}
	for i := 10; i < 40; i++ {
		a, err := co.do(context.Background(), "s", item(i))
		if err != nil || string(a.Body) != fmt.Sprintf("s %d", i) {
			t.Fatalf("call %d behind slow ones: %q, %v", i, a.Body, err)
		}
	}
	select {
	case err := <-slow:
		t.Fatalf("a slow call answered before its gate opened: %v", err)
	default:
	}
	close(f.slowGate)
	for range 3 {
		if err := <-slow; err != nil {
			t.Fatal(err)
		}
	}
}

// until waits for cond, polling, for up to 30 s: what a goroutine does
// next may take a loaded machine much longer than a fixed sleep.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after 30 s", what)
		}
	}
}

// waiting is how many calls wait in srv's lane.
func (co *coalescer) waiting(srv string) int {
	co.mu.Lock()
	defer co.mu.Unlock()
	if l := co.lanes[srv]; l != nil {
		return len(l.queue)
	}
	return 0
}

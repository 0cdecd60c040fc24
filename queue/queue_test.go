package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
)

// These tests exercise the queue's own mechanics with a recording Apply
// function. It is not a stand-in for MySQL: it answers every open with a
// made-up share and records how and when it was called.

type call struct {
	id    hongbao.PacketID
	users []hongbao.UserID
}

type recorder struct {
	gate    chan struct{} // when non-nil, every apply waits until it is closed
	started chan call     // every apply is announced here (buffered)
	delay   time.Duration
	fail    func(id hongbao.PacketID, users []hongbao.UserID) error
	outcome func(id hongbao.PacketID, u hongbao.UserID) hongbao.Outcome

	mu       sync.Mutex
	calls    []call
	inflight map[hongbao.PacketID]*atomic.Int32
	overlaps atomic.Int32
	ctxs     []context.Context
}

func newRecorder() *recorder {
	return &recorder{started: make(chan call, 10000), inflight: map[hongbao.PacketID]*atomic.Int32{}}
}

// share is the amount the recorder gives user u of packet id.
func share(id hongbao.PacketID, u hongbao.UserID) int64 { return int64(id)*1000 + int64(u) }

func (r *recorder) apply(ctx context.Context, id hongbao.PacketID, users []hongbao.UserID) ([]hongbao.Outcome, error) {
	users = slices.Clone(users)
	r.mu.Lock()
	c, ok := r.inflight[id]
	if !ok {
		c = new(atomic.Int32)
		r.inflight[id] = c
	}
	r.calls = append(r.calls, call{id, users})
	r.ctxs = append(r.ctxs, ctx)
	r.mu.Unlock()
	if c.Add(1) > 1 {
		r.overlaps.Add(1)
	}
	defer c.Add(-1)
	r.started <- call{id, users}
	if r.gate != nil {
		<-r.gate
	}
	if r.delay > 0 {
		time.Sleep(r.delay)
	}
	if r.fail != nil {
		if err := r.fail(id, users); err != nil {
			return nil, err
		}
	}
	out := make([]hongbao.Outcome, len(users))
	for i, u := range users {
		if r.outcome != nil {
			out[i] = r.outcome(id, u)
			continue
		}
		out[i] = hongbao.Outcome{Result: hongbao.OpenResult{User: u, Amount: share(id, u), Status: hongbao.Opened}}
	}
	return out, nil
}

func (r *recorder) snapshot() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// applied lists the users applied to id, in order, over all calls.
func (r *recorder) applied(id hongbao.PacketID) []hongbao.UserID {
	var us []hongbao.UserID
	for _, c := range r.snapshot() {
		if c.id == id {
			us = append(us, c.users...)
		}
	}
	return us
}

func (r *recorder) sizes() []int {
	var s []int
	for _, c := range r.snapshot() {
		s = append(s, len(c.users))
	}
	return s
}

// waitStarted waits for the next apply to begin.
func (r *recorder) waitStarted(t *testing.T) call {
	t.Helper()
	return receive(t, r.started, "apply started")
}

// each turns a one-packet apply into an Apply, one work after the other.
func each(f func(ctx context.Context, id hongbao.PacketID, users []hongbao.UserID) ([]hongbao.Outcome, error)) Apply {
	return func(ctx context.Context, works []Work) ([][]hongbao.Outcome, error) {
		out := make([][]hongbao.Outcome, len(works))
		for i, w := range works {
			o, err := f(ctx, w.ID, w.Users)
			if err != nil {
				return nil, err
			}
			out[i] = o
		}
		return out, nil
	}
}

func newManager(t *testing.T, cfg Config, apply Apply, slots Slots) *Manager {
	t.Helper()
	m := New(cfg, apply, slots, zap.NewNop())
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := m.Close(ctx); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return m
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

type result struct {
	user hongbao.UserID
	res  hongbao.OpenResult
	err  error
}

// submitAsync submits an open in a goroutine and reports on the channel.
func submitAsync(ctx context.Context, m *Manager, id hongbao.PacketID, u hongbao.UserID, out chan<- result) {
	go func() {
		res, err := m.Submit(ctx, id, u)
		out <- result{u, res, err}
	}()
}

// submitInOrder submits users one after the other, each only once the
// previous one is queued, so arrival order is the order of users. base is
// the queue depth before the first.
func submitInOrder(t *testing.T, m *Manager, id hongbao.PacketID, users []hongbao.UserID, base int64, out chan<- result) {
	t.Helper()
	for i, u := range users {
		submitAsync(context.Background(), m, id, u, out)
		want := base + int64(i) + 1
		waitFor(t, fmt.Sprintf("user %d to be queued", u), func() bool { return m.Stats().Queued >= want })
	}
}

func collect(t *testing.T, out <-chan result, n int) map[hongbao.UserID]result {
	t.Helper()
	got := make(map[hongbao.UserID]result, n)
	for range n {
		select {
		case r := <-out:
			if _, dup := got[r.user]; dup {
				t.Fatalf("user %d answered twice", r.user)
			}
			got[r.user] = r
		case <-time.After(10 * time.Second):
			t.Fatalf("only %d of %d opens answered", len(got), n)
		}
	}
	return got
}

func userRange(from, to int) []hongbao.UserID {
	var us []hongbao.UserID
	for u := from; u <= to; u++ {
		us = append(us, hongbao.UserID(u))
	}
	return us
}

func TestSubmitReturnsApplyOutcome(t *testing.T) {
	rec := newRecorder()
	rec.outcome = func(id hongbao.PacketID, u hongbao.UserID) hongbao.Outcome {
		switch u {
		case 2:
			return hongbao.Outcome{Err: fmt.Errorf("open: %w", hongbao.ErrSoldOut)}
		case 3:
			return hongbao.Outcome{Result: hongbao.OpenResult{User: u, Amount: 5, Status: hongbao.AlreadyOpened}}
		}
		return hongbao.Outcome{Result: hongbao.OpenResult{User: u, Amount: 7, Status: hongbao.Opened}}
	}
	m := newManager(t, Config{Size: 8, Batch: 1}, each(rec.apply), nil)
	ctx := context.Background()
	if res, err := m.Submit(ctx, 10, 1); err != nil || res != (hongbao.OpenResult{User: 1, Amount: 7, Status: hongbao.Opened}) {
		t.Errorf("Submit(user 1) = %+v, %v", res, err)
	}
	if _, err := m.Submit(ctx, 10, 2); !errors.Is(err, hongbao.ErrSoldOut) {
		t.Errorf("Submit(user 2) = %v, want ErrSoldOut", err)
	}
	if res, err := m.Submit(ctx, 10, 3); err != nil || res.Status != hongbao.AlreadyOpened || res.Amount != 5 {
		t.Errorf("Submit(user 3) = %+v, %v", res, err)
	}
	if got := rec.applied(10); !slices.Equal(got, []hongbao.UserID{1, 2, 3}) {
		t.Errorf("applied %v, want [1 2 3]", got)
	}
}

// TestOnePacketNeverConcurrent: many clients open a few packets at once;
// every open is applied exactly once, batches never exceed Batch, and two
// batches of one packet never overlap.
func TestOnePacketNeverConcurrent(t *testing.T) {
	rec := newRecorder()
	rec.delay = 200 * time.Microsecond
	m := newManager(t, Config{Size: 10000, Batch: 4}, each(rec.apply), nil)
	const packets, perPacket = 4, 150
	out := make(chan result, packets*perPacket)
	var start sync.WaitGroup
	start.Add(1)
	for p := range packets {
		for u := range perPacket {
			go func() {
				start.Wait()
				id, user := hongbao.PacketID(100+p), hongbao.UserID(u+1)
				res, err := m.Submit(context.Background(), id, user)
				if err != nil || res.User != user || res.Amount != share(id, user) || res.Status != hongbao.Opened {
					t.Errorf("Submit(%d, %d) = %+v, %v", id, user, res, err)
				}
				out <- result{}
			}()
		}
	}
	start.Done()
	for range packets * perPacket {
		select {
		case <-out:
		case <-time.After(20 * time.Second):
			t.Fatal("opens not answered")
		}
	}
	if n := rec.overlaps.Load(); n != 0 {
		t.Errorf("%d applies overlapped another apply of the same packet", n)
	}
	for _, s := range rec.sizes() {
		if s < 1 || s > 4 {
			t.Errorf("batch of %d, want 1..4", s)
		}
	}
	for p := range packets {
		id := hongbao.PacketID(100 + p)
		got := rec.applied(id)
		slices.Sort(got)
		if !slices.Equal(got, userRange(1, perPacket)) {
			t.Errorf("packet %d: applied %d opens %v, want users 1..%d once each", id, len(got), got, perPacket)
		}
	}
	waitFor(t, "queue to empty", func() bool { return m.Stats().Queued == 0 })
}

// TestPacketsRunInParallel: one packet's slow transaction does not hold up
// another packet.
func TestPacketsRunInParallel(t *testing.T) {
	rec := newRecorder()
	release := make(chan struct{})
	m := newManager(t, Config{Size: 8, Batch: 1}, each(func(ctx context.Context, id hongbao.PacketID, users []hongbao.UserID) ([]hongbao.Outcome, error) {
		if id == 1 {
			<-release
		}
		return rec.apply(ctx, id, users)
	}), nil)
	out := make(chan result, 2)
	submitAsync(context.Background(), m, 1, 1, out)
	waitFor(t, "packet 1 to be in flight", func() bool { return m.Stats().Queued == 1 })
	if _, err := m.Submit(context.Background(), 2, 1); err != nil {
		t.Fatalf("packet 2 while packet 1 is stuck: %v", err)
	}
	close(release)
	if r := collect(t, out, 1)[1]; r.err != nil {
		t.Fatalf("packet 1: %v", r.err)
	}
	if got := m.Stats().Packets; got != 2 {
		t.Errorf("Stats().Packets = %d, want 2", got)
	}
}

func TestFIFO(t *testing.T) {
	for _, batch := range []int{1, 4} {
		t.Run(fmt.Sprintf("batch=%d", batch), func(t *testing.T) {
			rec := newRecorder()
			rec.gate = make(chan struct{})
			m := newManager(t, Config{Size: 100, Batch: batch}, each(rec.apply), nil)
			const id = 7
			out := make(chan result, 50)
			// User 1 is taken at once and blocks in apply...
			submitAsync(context.Background(), m, id, 1, out)
			if c := rec.waitStarted(t); c.id != id || !slices.Equal(c.users, []hongbao.UserID{1}) {
				t.Fatalf("first apply = %+v", c)
			}
			// ...while users 2..30 queue up behind it in a known order.
			order := []hongbao.UserID{2, 30, 3, 29, 4, 28, 5, 27, 6, 26, 7, 25, 8, 24, 9, 23, 10, 22, 11, 21, 12, 20, 13, 19, 14, 18, 15, 17, 16}
			submitInOrder(t, m, id, order, 1, out)
			close(rec.gate)
			got := collect(t, out, 30)
			for u, r := range got {
				if r.err != nil || r.res.User != u {
					t.Errorf("user %d: %+v, %v", u, r.res, r.err)
				}
			}
			want := append([]hongbao.UserID{1}, order...)
			if applied := rec.applied(id); !slices.Equal(applied, want) {
				t.Errorf("applied in order %v, want arrival order %v", applied, want)
			}
		})
	}
}

func TestBatchSizes(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	m := newManager(t, Config{Size: 100, Batch: 4}, each(rec.apply), nil)
	out := make(chan result, 20)
	submitAsync(context.Background(), m, 3, 1, out)
	rec.waitStarted(t)
	submitInOrder(t, m, 3, userRange(2, 20), 1, out)
	close(rec.gate)
	collect(t, out, 20)
	// The blocked open alone, then the 19 queued behind it four at a time.
	if got, want := rec.sizes(), []int{1, 4, 4, 4, 4, 3}; !slices.Equal(got, want) {
		t.Errorf("batch sizes %v, want %v", got, want)
	}
	if got := rec.applied(3); !slices.Equal(got, userRange(1, 20)) {
		t.Errorf("applied %v, want 1..20 in order", got)
	}
}

func TestFullQueueIsBusy(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	m := newManager(t, Config{Size: 2, Batch: 1}, each(rec.apply), nil)
	out := make(chan result, 3)
	submitAsync(context.Background(), m, 5, 1, out)
	rec.waitStarted(t) // the worker holds user 1; the queue is empty
	submitInOrder(t, m, 5, []hongbao.UserID{2, 3}, 1, out)

	start := time.Now()
	_, err := m.Submit(context.Background(), 5, 4)
	if !errors.Is(err, hongbao.ErrBusy) {
		t.Fatalf("Submit to a full queue = %v, want ErrBusy", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("busy answer took %s, want it at once", d)
	}
	if hongbao.Code(err) != "busy" {
		t.Errorf("Code = %q, want busy", hongbao.Code(err))
	}
	// Another packet is not affected by this one being full.
	rec2 := make(chan result, 1)
	submitAsync(context.Background(), m, 6, 1, rec2)
	close(rec.gate)
	collect(t, rec2, 1)
	got := collect(t, out, 3)
	for u, r := range got {
		if r.err != nil {
			t.Errorf("user %d: %v", u, r.err)
		}
	}
	if applied := rec.applied(5); !slices.Equal(applied, []hongbao.UserID{1, 2, 3}) {
		t.Errorf("applied %v, want [1 2 3]: the busy open must not be applied", applied)
	}
}

func TestIdleWorkersExit(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, Config{Size: 8, Batch: 1, Idle: 300 * time.Millisecond}, each(rec.apply), nil)
	for id := range hongbao.PacketID(3) {
		if _, err := m.Submit(context.Background(), id+1, 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.Stats(); got.Packets != 3 || got.Queued != 0 {
		t.Errorf("Stats() after three opens = %+v, want 3 packets, 0 queued", got)
	}
	waitFor(t, "idle workers to exit", func() bool { return m.Stats().Packets == 0 })
	// A retired packet gets a fresh worker on its next open.
	if res, err := m.Submit(context.Background(), 1, 2); err != nil || res.User != 2 {
		t.Fatalf("open after retirement: %+v, %v", res, err)
	}
	if got := m.Stats().Packets; got != 1 {
		t.Errorf("Stats().Packets = %d after a new open, want 1", got)
	}
	waitFor(t, "idle worker to exit again", func() bool { return m.Stats().Packets == 0 })
}

// TestBusyWorkerDoesNotRetire: a packet that keeps receiving opens within
// Idle keeps one worker, and none of its opens is lost.
func TestBusyWorkerDoesNotRetire(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, Config{Size: 8, Batch: 1, Idle: 30 * time.Millisecond}, each(rec.apply), nil)
	for u := range hongbao.UserID(40) {
		if _, err := m.Submit(context.Background(), 9, u+1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Duration(u%3) * 10 * time.Millisecond)
	}
	if got := rec.applied(9); !slices.Equal(got, userRange(1, 40)) {
		t.Errorf("applied %v", got)
	}
	if n := rec.overlaps.Load(); n != 0 {
		t.Errorf("%d overlapping applies across worker retirements", n)
	}
}

func TestCloseDrains(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	m := New(Config{Size: 100, Batch: 3}, each(rec.apply), nil, zap.NewNop())
	const packets, per = 3, 10
	out := make(chan result, packets*per)
	for p := range packets {
		// Users are distinct across packets: p*100+1 .. p*100+per.
		id, first := hongbao.PacketID(p+1), p*100+1
		submitAsync(context.Background(), m, id, hongbao.UserID(first), out)
		rec.waitStarted(t)
		submitInOrder(t, m, id, userRange(first+1, first+per-1), int64(p*per+1), out)
	}
	drainOnClose(t, m, func() { close(rec.gate) })
	got := collect(t, out, packets*per)
	for u, r := range got {
		if r.err != nil {
			t.Errorf("user %d lost in Close: %v", u, r.err)
		}
	}
	for p := range packets {
		if applied := rec.applied(hongbao.PacketID(p + 1)); !slices.Equal(applied, userRange(p*100+1, p*100+per)) {
			t.Errorf("packet %d applied %v", p+1, applied)
		}
	}
	if s := m.Stats(); s != (Stats{}) {
		t.Errorf("Stats() after Close = %+v, want zero", s)
	}
	if _, err := m.Submit(context.Background(), 1, 1000); !errors.Is(err, hongbao.ErrUnavailable) {
		t.Errorf("Submit after Close = %v, want ErrUnavailable", err)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

func TestCloseTimesOut(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	m := New(Config{Size: 8, Batch: 1}, each(rec.apply), nil, zap.NewNop())
	out := make(chan result, 1)
	submitAsync(context.Background(), m, 1, 1, out)
	rec.waitStarted(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := m.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close with a stuck apply = %v, want DeadlineExceeded", err)
	}
	close(rec.gate)
	if r := collect(t, out, 1)[1]; r.err != nil {
		t.Errorf("open after a timed-out Close: %v", r.err)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Errorf("Close after the apply finished: %v", err)
	}
}

func TestCancelledBeforeSubmit(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, Config{Size: 8, Batch: 4}, each(rec.apply), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Submit(ctx, 4, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("Submit with a cancelled ctx = %v, want context.Canceled", err)
	}
	// FIFO: once user 2 is answered, the worker has passed user 1.
	if _, err := m.Submit(context.Background(), 4, 2); err != nil {
		t.Fatal(err)
	}
	if got := rec.applied(4); !slices.Equal(got, []hongbao.UserID{2}) {
		t.Errorf("applied %v, want [2]: a cancelled open must not reach the DB", got)
	}
	waitFor(t, "queue to empty", func() bool { return m.Stats().Queued == 0 })
}

func TestCancelledWhileQueued(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	m := newManager(t, Config{Size: 8, Batch: 4}, each(rec.apply), nil)
	out := make(chan result, 3)
	submitAsync(context.Background(), m, 4, 1, out)
	rec.waitStarted(t)

	ctx, cancel := context.WithCancel(context.Background())
	gone := make(chan error, 1)
	go func() { _, err := m.Submit(ctx, 4, 2); gone <- err }()
	waitFor(t, "user 2 to be queued", func() bool { return m.Stats().Queued == 2 })
	submitInOrder(t, m, 4, []hongbao.UserID{3}, 2, out)
	cancel()
	select {
	case err := <-gone:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Submit whose client left = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Submit did not return when its ctx was cancelled")
	}
	close(rec.gate)
	collect(t, out, 2)
	if got := rec.snapshot(); len(got) != 2 || !slices.Equal(got[1].users, []hongbao.UserID{3}) {
		t.Errorf("calls %+v, want [1] then [3] without the cancelled user 2", got)
	}
}

// TestApplyCtxOutlivesClient: a batch is shared by clients, so one client
// leaving must not cancel the transaction; TxTimeout bounds it instead.
func TestApplyCtxOutlivesClient(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	m := newManager(t, Config{Size: 8, Batch: 4, TxTimeout: 3 * time.Second}, each(rec.apply), nil)
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan result, 1)
	submitAsync(ctx, m, 8, 1, out)
	rec.waitStarted(t)
	cancel()
	if r := collect(t, out, 1)[1]; !errors.Is(r.err, context.Canceled) {
		t.Errorf("Submit = %v, want context.Canceled", r.err)
	}
	rec.mu.Lock()
	applyCtx := rec.ctxs[0]
	rec.mu.Unlock()
	if err := applyCtx.Err(); err != nil {
		t.Errorf("apply ctx = %v after the client left, want still live", err)
	}
	dl, ok := applyCtx.Deadline()
	if !ok || time.Until(dl) > 3*time.Second || time.Until(dl) < time.Second {
		t.Errorf("apply ctx deadline in %s (set: %v), want about TxTimeout=3s", time.Until(dl), ok)
	}
	close(rec.gate)
	waitFor(t, "queue to empty", func() bool { return m.Stats().Queued == 0 })
}

func TestBatchErrorRetriesOneByOne(t *testing.T) {
	rec := newRecorder()
	rec.gate = make(chan struct{})
	errBatch := errors.New("deadlock on batch")
	errFive := errors.New("user 5 is broken")
	rec.fail = func(id hongbao.PacketID, users []hongbao.UserID) error {
		if len(users) > 1 {
			return errBatch
		}
		if users[0] == 5 {
			return errFive
		}
		return nil
	}
	m := newManager(t, Config{Size: 16, Batch: 8}, each(rec.apply), nil)
	out := make(chan result, 6)
	submitAsync(context.Background(), m, 2, 1, out)
	rec.waitStarted(t)
	submitInOrder(t, m, 2, userRange(2, 6), 1, out)
	close(rec.gate)
	got := collect(t, out, 6)
	for u, r := range got {
		switch {
		case u == 5:
			if !errors.Is(r.err, errFive) {
				t.Errorf("user 5: %v, want its own error", r.err)
			}
		case r.err != nil || r.res.User != u || r.res.Amount != share(2, u):
			t.Errorf("user %d: %+v, %v; want its share after the retry", u, r.res, r.err)
		}
	}
	want := [][]hongbao.UserID{{1}, {2, 3, 4, 5, 6}, {2}, {3}, {4}, {5}, {6}}
	calls := rec.snapshot()
	if len(calls) != len(want) {
		t.Fatalf("calls %+v, want %v", calls, want)
	}
	for i, c := range calls {
		if !slices.Equal(c.users, want[i]) {
			t.Errorf("call %d = %v, want %v", i, c.users, want[i])
		}
	}
}

func TestSingleErrorNotRetried(t *testing.T) {
	rec := newRecorder()
	errDB := errors.New("connection reset")
	rec.fail = func(hongbao.PacketID, []hongbao.UserID) error { return errDB }
	m := newManager(t, Config{Size: 4, Batch: 4}, each(rec.apply), nil)
	if _, err := m.Submit(context.Background(), 1, 1); !errors.Is(err, errDB) {
		t.Errorf("Submit = %v, want the apply error", err)
	}
	if n := len(rec.snapshot()); n != 1 {
		t.Errorf("%d applies, want 1: a single open is not retried", n)
	}
}

type fakeSlots struct {
	ok  bool
	err error

	mu       sync.Mutex
	acquired int
	released []string
	limits   []int
	holds    []time.Duration
}

func (s *fakeSlots) AcquireSlot(id hongbao.PacketID, limit int, hold time.Duration) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acquired++
	s.limits = append(s.limits, limit)
	s.holds = append(s.holds, hold)
	if s.err != nil {
		return "", false, s.err
	}
	if !s.ok {
		return "", false, nil
	}
	return fmt.Sprintf("tok-%d-%d", id, s.acquired), true, nil
}

func (s *fakeSlots) ReleaseSlot(id hongbao.PacketID, token string, hold time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.released = append(s.released, token)
}

func TestSlots(t *testing.T) {
	cfg := Config{Size: 8, Batch: 1, SlotCap: 3, TxTimeout: 2 * time.Second}
	t.Run("granted", func(t *testing.T) {
		rec := newRecorder()
		slots := &fakeSlots{ok: true}
		m := newManager(t, cfg, each(rec.apply), slots)
		for u := range hongbao.UserID(2) {
			if _, err := m.Submit(context.Background(), 12, u+1); err != nil {
				t.Fatal(err)
			}
		}
		slots.mu.Lock()
		if slots.acquired != 1 || len(slots.released) != 0 {
			t.Errorf("acquired %d, released %v; want one lease kept by the live worker", slots.acquired, slots.released)
		}
		if !slices.Equal(slots.limits, []int{3}) || !slices.Equal(slots.holds, []time.Duration{4 * time.Second}) {
			t.Errorf("AcquireSlot limits %v holds %v, want SlotCap 3 and 2 x TxTimeout", slots.limits, slots.holds)
		}
		slots.mu.Unlock()
		if err := m.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		slots.mu.Lock()
		defer slots.mu.Unlock()
		if !slices.Equal(slots.released, []string{"tok-12-1"}) {
			t.Errorf("released %v after Close, want the lease back with its token", slots.released)
		}
	})
	t.Run("lease taken again before it lapses", func(t *testing.T) {
		rec := newRecorder()
		slots := &fakeSlots{ok: true}
		short := Config{Size: 8, Batch: 1, SlotCap: 3, TxTimeout: 100 * time.Millisecond, Idle: time.Minute}
		m := newManager(t, short, each(rec.apply), slots)
		if _, err := m.Submit(context.Background(), 12, 1); err != nil {
			t.Fatal(err)
		}
		time.Sleep(120 * time.Millisecond) // less than one TxTimeout left of the 200 ms lease
		if _, err := m.Submit(context.Background(), 12, 2); err != nil {
			t.Fatal(err)
		}
		slots.mu.Lock()
		defer slots.mu.Unlock()
		if slots.acquired != 2 || !slices.Equal(slots.released, []string{"tok-12-1"}) {
			t.Errorf("acquired %d, released %v; want the old lease given back and a new one taken", slots.acquired, slots.released)
		}
	})
	t.Run("cap reached", func(t *testing.T) {
		rec := newRecorder()
		slots := &fakeSlots{ok: false}
		m := newManager(t, cfg, each(rec.apply), slots)
		if _, err := m.Submit(context.Background(), 12, 1); !errors.Is(err, hongbao.ErrBusy) {
			t.Errorf("Submit with the cap reached = %v, want ErrBusy", err)
		}
		if n := len(rec.snapshot()); n != 0 {
			t.Errorf("%d applies, want none while the cap is reached", n)
		}
		if len(slots.released) != 0 {
			t.Errorf("released %v, want nothing: no slot was taken", slots.released)
		}
	})
	t.Run("cap unreachable", func(t *testing.T) {
		rec := newRecorder()
		slots := &fakeSlots{err: errors.New("memcached: connection refused")}
		m := newManager(t, cfg, each(rec.apply), slots)
		res, err := m.Submit(context.Background(), 12, 1)
		if err != nil || res.Status != hongbao.Opened {
			t.Errorf("Submit with memcached down = %+v, %v; want the open through", res, err)
		}
		if n := len(rec.snapshot()); n != 1 {
			t.Errorf("%d applies, want 1", n)
		}
		if len(slots.released) != 0 {
			t.Errorf("released %v, want nothing", slots.released)
		}
	})
}

func TestNewDefaults(t *testing.T) {
	m := New(Config{}, each(newRecorder().apply), nil, zap.NewNop())
	want := Config{Size: 1, Batch: 1, Idle: 5 * time.Second, TxTimeout: 5 * time.Second, SlotCap: 1, Parallel: 16, Merge: 1}
	if m.cfg != want {
		t.Errorf("New(Config{}) config = %+v, want %+v", m.cfg, want)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestTinyIdleLosesNothing: with an Idle of 1ns the idle timer is ready at
// nearly every select, racing the queued opens and the retirement of the
// worker against new opens. No open may be lost or applied twice, and no two
// workers of one packet may overlap.
func TestTinyIdleLosesNothing(t *testing.T) {
	rec := newRecorder()
	m := newManager(t, Config{Size: 1000, Batch: 3, Idle: time.Nanosecond}, each(rec.apply), nil)
	const clients, rounds = 16, 40
	var wg sync.WaitGroup
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				u := hongbao.UserID(c*rounds + r + 1)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				res, err := m.Submit(ctx, 42, u)
				cancel()
				if err != nil || res.User != u {
					t.Errorf("Submit(user %d) = %+v, %v", u, res, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	got := rec.applied(42)
	slices.Sort(got)
	if !slices.Equal(got, userRange(1, clients*rounds)) {
		t.Errorf("applied %d opens, want each of %d exactly once", len(got), clients*rounds)
	}
	if n := rec.overlaps.Load(); n != 0 {
		t.Errorf("%d overlapping applies of one packet", n)
	}
	waitFor(t, "workers to retire", func() bool { return m.Stats() == Stats{} })
}

// drainOnClose starts Close and checks that it refuses new opens (of a
// queued packet and of a new one) and waits for the queued ones while they
// are held; then it calls release and checks that Close returns nil.
func drainOnClose(t *testing.T, m *Manager, release func()) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- m.Close(context.Background()) }()
	waitFor(t, "Close to stop taking opens", m.closed.Load)
	for _, id := range []hongbao.PacketID{1, 77} {
		if _, err := m.Submit(context.Background(), id, 999); !errors.Is(err, hongbao.ErrUnavailable) {
			t.Errorf("Submit to packet %d during Close = %v, want ErrUnavailable", id, err)
		}
	}
	select {
	case err := <-closed:
		t.Fatalf("Close returned %v before the queued opens were applied", err)
	case <-time.After(50 * time.Millisecond):
	}
	release()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return")
	}
}

// receive waits up to 5 s for the next value on ch.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s within 5s", what)
		var zero T
		return zero
	}
}

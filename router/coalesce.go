package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hongbao-dev/hongbao/api"
)

// Coalescing is how a router gathers concurrent requests bound for one
// server into batches: one signed exchange carries many sub-requests, so a
// crowd costs the server (and the router's client side) far less than one
// HTTP exchange per request. The zero value turns it off: every request is
// one exchange.
type Coalescing struct {
	// Batch is the most sub-requests one batch carries; 0 is off.
	Batch int
	// InFlight is how many batches may be in flight to one server at once:
	// while fewer are, a request leaves at once (no added wait when idle);
	// requests arriving meanwhile join the next batch.
	InFlight int
	// Bytes bounds a batch's sub-requests as encoded (api.BatchItem.Size:
	// bodies, targets and headers; a larger single one still goes, alone);
	// 0 is 1 MiB, and more than api.MaxBatchBytes is that, what a server
	// takes.
	Bytes int
}

// errCoalescerClosed sends a request the single way: the router is
// shutting down its coalescer.
var errCoalescerClosed = errors.New("coalescer closed")

// sendBatch sends one batch to a server and hands each answer to answer
// (index of the item, its answer) as it arrives; an error means the items
// not answered yet have no known answer.
type sendBatch func(ctx context.Context, srv string, items []api.BatchItem, answer func(int, api.BatchAnswer)) error

// coalescer batches sub-requests per target server. A batch goes out as
// soon as the server has fewer than InFlight batches in flight; a batch
// stops counting as in flight at its first answer (one round trip), or
// when it has waited twice as long as first answers usually take, so a
// slow sub-request (an open waiting for a locked row) holds back no other
// request; then the requests that gathered meanwhile go as the next batch.
// Each batch has a goroutine of the coalescer's: close waits for them.
type coalescer struct {
	cfg     Coalescing
	send    sendBatch
	timeout time.Duration // bound on one attempt: its wait for a batch and the batch's exchange

	base   context.Context // of every batch; cancelled when close gives up waiting
	cancel context.CancelFunc

	mu     sync.Mutex
	lanes  map[string]*lane
	closed bool
	wg     sync.WaitGroup

	firstAnswer atomic.Int64 // moving average of the time to a batch's first answer, in ns
	maxLease    time.Duration
}

// Bounds of a batch's turn in flight without an answer.
const (
	minLease = 2 * time.Millisecond
	maxLease = 200 * time.Millisecond
)

// lease is how long a batch counts as in flight without an answer: twice
// the usual time to a first answer, within minLease..maxLease.
func (co *coalescer) lease() time.Duration {
	return min(max(2*time.Duration(co.firstAnswer.Load()), minLease), co.maxLease)
}

// observe adds a batch's time to its first answer to the moving average
// (a lost update under a race only slows the average down).
func (co *coalescer) observe(d time.Duration) {
	old := co.firstAnswer.Load()
	co.firstAnswer.Store(old + (int64(d)-old)/8)
}

// lane is one server's waiting calls and its batches in flight.
type lane struct {
	queue  []*call
	flying int
}

// call is one sub-request waiting for its answer.
type call struct {
	ctx      context.Context // the client's: gone, its item is dropped before sending
	deadline time.Time       // of the attempt: past it, the call fails as a timed-out exchange
	item     api.BatchItem
	done     chan outcome // buffered: the batch never waits for a caller
}

type outcome struct {
	answer api.BatchAnswer
	err    error
}

func newCoalescer(cfg Coalescing, timeout time.Duration, send sendBatch) *coalescer {
	if cfg.InFlight <= 0 {
		cfg.InFlight = 1
	}
	if cfg.Bytes <= 0 {
		cfg.Bytes = 1 << 20
	}
	if cfg.Bytes > api.MaxBatchBytes {
		cfg.Bytes = api.MaxBatchBytes
	}
	base, cancel := context.WithCancel(context.Background())
	co := &coalescer{cfg: cfg, send: send, timeout: timeout, base: base, cancel: cancel, lanes: map[string]*lane{}, maxLease: maxLease}
	co.firstAnswer.Store(int64(5 * time.Millisecond))
	return co
}

// do sends item to srv in a batch and waits for its answer, or for ctx.
// A caller that leaves does not disturb the others of its batch: its
// answer, if one comes, is dropped. The attempt is bounded by the
// coalescer's timeout without a timer of its own: a call still waiting at
// its deadline is failed when the lane next takes a batch (the batches in
// flight end by their own first call's deadline, earlier than this one's),
// and a batch in flight ends at its earliest call's deadline.
func (co *coalescer) do(ctx context.Context, srv string, item api.BatchItem) (api.BatchAnswer, error) {
	c := &call{ctx: ctx, deadline: time.Now().Add(co.timeout), item: item, done: make(chan outcome, 1)}
	co.mu.Lock()
	if co.closed {
		co.mu.Unlock()
		return api.BatchAnswer{}, errCoalescerClosed
	}
	l := co.lanes[srv]
	if l == nil {
		l = &lane{}
		co.lanes[srv] = l
	}
	l.queue = append(l.queue, c)
	co.start(srv, l)
	co.mu.Unlock()
	select {
	case o := <-c.done:
		return o.answer, o.err
	case <-ctx.Done():
		return api.BatchAnswer{}, ctx.Err()
	}
}

// start sends the next batch of l (co.mu held) if fewer than InFlight are
// in flight and calls wait.
func (co *coalescer) start(srv string, l *lane) {
	if l.flying >= co.cfg.InFlight {
		return
	}
	batch := co.take(l)
	if len(batch) == 0 {
		return
	}
	l.flying++
	co.wg.Add(1)
	go func() {
		defer co.wg.Done()
		co.flush(srv, l, batch)
	}()
}

// release ends a batch's turn in flight: the next batch may leave.
func (co *coalescer) release(srv string, l *lane) {
	co.mu.Lock()
	defer co.mu.Unlock()
	l.flying--
	co.start(srv, l)
	if l.flying == 0 && len(l.queue) == 0 && co.lanes[srv] == l {
		delete(co.lanes, srv)
	}
}

// take removes the next batch from l's queue (co.mu held): up to Batch
// calls and Bytes of the batch's body, at least one call if any waits; calls whose
// client left are dropped, those past their deadline failed.
func (co *coalescer) take(l *lane) []*call {
	var batch []*call
	bytes, i := 0, 0
	now := time.Now()
	for ; i < len(l.queue) && len(batch) < co.cfg.Batch; i++ {
		c := l.queue[i]
		if c.ctx.Err() != nil {
			continue
		}
		if !now.Before(c.deadline) {
			c.done <- outcome{err: fmt.Errorf("no batch left before the attempt's deadline: %w", context.DeadlineExceeded)}
			continue
		}
		size := c.item.Size()
		if len(batch) > 0 && bytes+size > co.cfg.Bytes {
			break
		}
		bytes += size
		batch = append(batch, c)
	}
	rest := copy(l.queue, l.queue[i:])
	clear(l.queue[rest:])
	l.queue = l.queue[:rest]
	return batch
}

// flush sends one batch and hands every call its answer as it arrives; the
// calls a failed batch left unanswered get its error, as a failed single
// exchange would, never a made-up answer. The batch's turn in flight ends
// at its first answer, at its lease, or at its end, whichever is first.
func (co *coalescer) flush(srv string, l *lane, batch []*call) {
	var once sync.Once
	release := func() { once.Do(func() { co.release(srv, l) }) }
	lease := time.AfterFunc(co.lease(), release)
	defer func() {
		lease.Stop()
		release() // returns only once a release by the lease is done too
	}()
	live := batch[:0]
	for _, c := range batch {
		if c.ctx.Err() == nil {
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return
	}
	items := make([]api.BatchItem, len(live))
	deadline := live[0].deadline
	for i, c := range live {
		items[i] = c.item
		if c.deadline.Before(deadline) {
			deadline = c.deadline
		}
	}
	answered := make([]bool, len(live))
	ctx, cancel := context.WithDeadline(co.base, deadline)
	sent, first := time.Now(), true
	err := co.send(ctx, srv, items, func(i int, a api.BatchAnswer) {
		if first {
			first = false
			co.observe(time.Since(sent))
		}
		release()
		answered[i] = true
		live[i].done <- outcome{answer: a}
	})
	cancel()
	if err == nil {
		err = fmt.Errorf("server %s: the batch ended with sub-requests unanswered", srv)
	}
	for i, c := range live {
		if !answered[i] {
			c.done <- outcome{err: err}
		}
	}
}

// close stops taking calls (they go the single way) and waits for the
// batches in flight and those already gathered; when ctx ends first it
// cancels them (their callers get errors, as a failed exchange gives).
func (co *coalescer) close(ctx context.Context) error {
	co.mu.Lock()
	co.closed = true
	co.mu.Unlock()
	done := make(chan struct{})
	go func() { co.wg.Wait(); close(done) }()
	select {
	case <-done:
		co.cancel()
		return nil
	case <-ctx.Done():
		co.cancel()
		<-done
		return fmt.Errorf("coalescer: batches still in flight: %w", ctx.Err())
	}
}

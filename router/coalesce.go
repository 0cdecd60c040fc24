package router

import (
	"context"
	"errors"
	"fmt"
	"sync"
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
	// Bytes bounds a batch's sub-request bodies (a larger single one still
	// goes, alone); 0 is 1 MiB.
	Bytes int
}

// errCoalescerClosed sends a request the single way: the router is
// shutting down its coalescer.
var errCoalescerClosed = errors.New("coalescer closed")

// sendBatch sends one batch to a server and returns its answers, one per
// item, in order; an error means no answer is known for any item.
type sendBatch func(ctx context.Context, srv string, items []api.BatchItem) ([]api.BatchAnswer, error)

// coalescer batches sub-requests per target server. A batch goes out as
// soon as the server has fewer than InFlight batches in flight; the
// goroutine that sent it then sends what gathered meanwhile, until
// nothing waits. Those goroutines are the coalescer's: close waits for
// them.
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
	base, cancel := context.WithCancel(context.Background())
	return &coalescer{cfg: cfg, send: send, timeout: timeout, base: base, cancel: cancel, lanes: map[string]*lane{}}
}

// do sends item to srv in a batch and waits for its answer, or for ctx.
// A caller that leaves does not disturb the others of its batch: its
// answer, if one comes, is dropped. The attempt is bounded by the
// coalescer's timeout without a timer of its own: a call still waiting at
// its deadline is failed when the lane next takes a batch (the batch in
// flight ends by its own first call's deadline, earlier than this one's),
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
	if l.flying < co.cfg.InFlight {
		l.flying++
		co.wg.Add(1)
		go co.run(srv, l, co.take(l))
	}
	co.mu.Unlock()
	select {
	case o := <-c.done:
		return o.answer, o.err
	case <-ctx.Done():
		return api.BatchAnswer{}, ctx.Err()
	}
}

// run sends batch to srv, then the batches that gathered meanwhile, until
// the lane is empty.
func (co *coalescer) run(srv string, l *lane, batch []*call) {
	defer co.wg.Done()
	for {
		co.flush(srv, batch)
		co.mu.Lock()
		batch = co.take(l)
		if len(batch) == 0 {
			l.flying--
			if l.flying == 0 && len(l.queue) == 0 {
				delete(co.lanes, srv)
			}
			co.mu.Unlock()
			return
		}
		co.mu.Unlock()
	}
}

// take removes the next batch from l's queue (co.mu held): up to Batch
// calls and Bytes of bodies, at least one call if any waits; calls whose
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
		if len(batch) > 0 && bytes+len(c.item.Body) > co.cfg.Bytes {
			break
		}
		bytes += len(c.item.Body)
		batch = append(batch, c)
	}
	rest := copy(l.queue, l.queue[i:])
	clear(l.queue[rest:])
	l.queue = l.queue[:rest]
	return batch
}

// flush sends one batch and hands every call its answer, or the batch's
// error: a failed batch fails each of its calls as a failed single
// exchange would, never with a made-up answer.
func (co *coalescer) flush(srv string, batch []*call) {
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
	ctx, cancel := context.WithDeadline(co.base, deadline)
	answers, err := co.send(ctx, srv, items)
	cancel()
	if err == nil && len(answers) != len(live) {
		err = fmt.Errorf("server %s: %d answers to %d sub-requests", srv, len(answers), len(live))
	}
	for i, c := range live {
		if err != nil {
			c.done <- outcome{err: err}
		} else {
			c.done <- outcome{answer: answers[i]}
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

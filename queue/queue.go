// Package queue serialises the opens of each packet: every open of one
// packet on a server enters that packet's bounded FIFO, and one worker per
// packet applies them to MySQL one transaction at a time, in arrival order,
// optionally several queued opens per transaction. A hot packet therefore
// never becomes a lock fight inside the database.
package queue

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/metrics"
)

// Work is the opens of one packet taken from its queue for a transaction,
// in arrival order.
type Work struct {
	ID    hongbao.PacketID
	Users []hongbao.UserID
}

// Apply applies works, the batches of distinct packets, in one transaction
// and returns the outcomes of each work, one per user in order, as if the
// works had been applied one after the other. A non-nil error means none of
// the opens is known to have committed.
type Apply func(ctx context.Context, works []Work) ([][]hongbao.Outcome, error)

// Slots is the cross-server cap on transactions per packet (memcached CAS).
// AcquireSlot returns ok=false when the cap is reached, and an error when
// the cap cannot be consulted, in which case the queue relies on its own
// serialisation: one transaction per packet per server.
type Slots interface {
	AcquireSlot(id hongbao.PacketID, limit int, hold time.Duration) (token string, ok bool, err error)
	ReleaseSlot(id hongbao.PacketID, token string, hold time.Duration)
}

// Config tunes the queues.
type Config struct {
	Size      int           // queued opens per packet before answering busy
	Batch     int           // opens of a packet applied per transaction (1: one at a time)
	Idle      time.Duration // a packet's worker exits after this long without opens
	TxTimeout time.Duration // bound on one transaction, and on a held slot
	SlotCap   int           // transactions of one packet in the DB at once, SET-wide
	// Parallel is the number of transactions this server runs at once, all
	// packets together (at most its MySQL pool size; 0: 16). Workers hand
	// their batches to that many committers, the oldest first, so none
	// starves behind the others.
	Parallel int
	// Merge is how many packets' batches one transaction may carry (1:
	// each its own). The batches waiting when a committer is free share
	// its transaction: its begin, fence, commit and fsync, which is what
	// many packets with one open each (WeChat groups) need. Packets of one
	// bucket go together, as they share day tables.
	Merge int
	// Metrics measures batches, transactions and slot refusals; nil:
	// none.
	Metrics *metrics.Queue
}

// Manager owns the per-packet queues and their workers.
type Manager struct {
	cfg    Config
	apply  Apply
	slots  Slots // nil: no cross-server cap
	log    *zap.Logger
	shards [64]shard
	wg     sync.WaitGroup
	closed atomic.Bool
	depth  atomic.Int64   // opens queued or in flight, all packets
	live   atomic.Int64   // packets with a worker
	jobs   *waiting       // batches waiting for a committer
	cwg    sync.WaitGroup // committers
	stop   sync.Once
	moving frozen // buckets a move froze a moment ago
}

type shard struct {
	mu     sync.Mutex
	queues map[hongbao.PacketID]chan *request
}

type request struct {
	ctx  context.Context
	user hongbao.UserID
	done chan hongbao.Outcome // buffered: the worker never blocks on a gone client
}

// New returns a Manager applying opens with apply. slots may be nil.
func New(cfg Config, apply Apply, slots Slots, log *zap.Logger) *Manager {
	cfg.Size = max(cfg.Size, 1)
	cfg.Batch = max(cfg.Batch, 1)
	cfg.SlotCap = max(cfg.SlotCap, 1)
	if cfg.Idle <= 0 {
		cfg.Idle = 5 * time.Second
	}
	if cfg.TxTimeout <= 0 {
		cfg.TxTimeout = 5 * time.Second
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 16
	}
	cfg.Merge = max(cfg.Merge, 1)
	m := &Manager{cfg: cfg, apply: apply, slots: slots, log: log, jobs: newWaiting()}
	for i := range m.shards {
		m.shards[i].queues = make(map[hongbao.PacketID]chan *request)
	}
	m.cwg.Add(cfg.Parallel)
	for range cfg.Parallel {
		go m.commit()
	}
	return m
}

// Stats is a snapshot for health and benchmarks.
type Stats struct {
	Queued  int64 // opens waiting or being applied
	Packets int64 // packets with a live worker
}

// Stats returns current queue sizes.
func (m *Manager) Stats() Stats { return Stats{Queued: m.depth.Load(), Packets: m.live.Load()} }

// Live reports whether packet id has a worker on this server right now: a
// hot packet, whose opens are cheapest answered by its batches.
func (m *Manager) Live(id hongbao.PacketID) bool {
	sh := &m.shards[uint64(id)%uint64(len(m.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, ok := sh.queues[id]
	return ok
}

// Submit queues an open of id by user and waits for its outcome. A full
// queue answers hongbao.ErrBusy at once. If ctx ends first, Submit returns
// ctx.Err(); the open may still be applied (it is idempotent, so the client
// can ask again and get its share).
func (m *Manager) Submit(ctx context.Context, id hongbao.PacketID, user hongbao.UserID) (hongbao.OpenResult, error) {
	req := &request{ctx: ctx, user: user, done: make(chan hongbao.Outcome, 1)}
	if err := m.enqueue(id, req); err != nil {
		return hongbao.OpenResult{}, err
	}
	select {
	case out := <-req.done:
		return out.Result, out.Err
	case <-ctx.Done():
		return hongbao.OpenResult{}, ctx.Err()
	}
}

func (m *Manager) enqueue(id hongbao.PacketID, req *request) error {
	sh := &m.shards[uint64(id)%uint64(len(m.shards))]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if m.closed.Load() {
		return hongbao.ErrUnavailable
	}
	q, ok := sh.queues[id]
	if !ok {
		q = make(chan *request, m.cfg.Size)
		sh.queues[id] = q
		m.wg.Add(1)
		m.live.Add(1)
		go m.work(sh, id, q)
	}
	m.depth.Add(1) // before the worker can see it, so Stats never counts it out first
	select {
	case q <- req:
		return nil
	default:
		m.depth.Add(-1)
		return fmt.Errorf("queue of %s full: %w", id, hongbao.ErrBusy)
	}
}

// Close stops taking opens, lets every worker apply what is queued, stops
// the committers, and waits for them all or for ctx.
func (m *Manager) Close(ctx context.Context) error {
	m.closed.Store(true)
	for i := range m.shards {
		sh := &m.shards[i]
		sh.mu.Lock()
		for id, q := range sh.queues {
			close(q)
			delete(sh.queues, id)
		}
		sh.mu.Unlock()
	}
	done := make(chan struct{})
	go func() {
		m.wg.Wait()
		m.stop.Do(m.jobs.close) // no worker is left to put
		m.cwg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("queue: drain: %w", ctx.Err())
	}
}

// work is the worker of one packet: it takes up to Batch queued opens at a
// time and applies them, until the queue is closed or idle.
func (m *Manager) work(sh *shard, id hongbao.PacketID, q chan *request) {
	defer m.wg.Done()
	defer m.live.Add(-1)
	var l lease
	defer m.letGo(id, &l)
	idle := time.NewTimer(m.cfg.Idle)
	defer idle.Stop()
	batch := make([]*request, 0, m.cfg.Batch)
	for {
		select {
		case req, ok := <-q:
			if !ok {
				return
			}
			batch = append(batch[:0], req)
			gather(q)
			for len(batch) < m.cfg.Batch && len(q) > 0 {
				if r, ok := <-q; ok {
					batch = append(batch, r)
				}
			}
			m.run(id, batch, &l)
			idle.Reset(m.cfg.Idle)
		case <-idle.C:
			if m.retire(sh, id, q) {
				return
			}
			idle.Reset(m.cfg.Idle)
		}
	}
}

// gatherYields bounds gather's yields: each lets every goroutine ready to
// run go first; two rounds in a row that queued nothing end it.
const gatherYields = 4

// gather lets the opens about to be queued reach q before the worker takes
// its batch, when it was woken by a lone open. A router's batch brings a
// packet's opens together, each run by a goroutine of its own; the first
// one's send wakes the worker, which Go runs next, so without this the
// worker took that open alone and the rest formed the next transaction:
// two transactions, each a commit's fixed cost on the primary and the
// replica, and the batch answered a commit later. A yield costs nothing
// when no other goroutine is ready. A queue that holds more than the open
// that woke the worker (opens arrived while its last transaction ran) is
// taken at once: under load the yields would only delay the transaction,
// a round of them behind every goroutine that is ready.
func gather(q chan *request) {
	if len(q) > 0 {
		return
	}
	for i, idle := 0, 0; i < gatherYields && idle < 2; i++ {
		n := len(q)
		runtime.Gosched()
		if len(q) == n {
			idle++ // with more Ps, a runner may be on its way: twice
		} else {
			idle = 0
		}
	}
}

// retire frees an idle queue. It holds the shard lock, under which every
// send happens, so no open can slip into a queue nobody reads.
func (m *Manager) retire(sh *shard, id hongbao.PacketID, q chan *request) bool {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if len(q) > 0 {
		return false
	}
	if sh.queues[id] == q {
		delete(sh.queues, id)
	}
	return true
}

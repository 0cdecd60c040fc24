package set

import (
	"sync"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store/cache"
)

// openerCache carries committed shares, and the state of packets that sold
// out, to memcached off the committers' path, through one writer: states
// first and all of them, shares paced to openerRate entries a second;
// share entries
// beyond a backlog are dropped. The cache is advisory (a missing entry
// costs a MySQL point read later, never a different answer), so caching
// must not take the CPU of the opens it describes: unpaced, a hot packet's
// entries cost more CPU (here and in memcached) than its transactions.
// Under such load most entries are dropped; that packet's repeated opens
// are answered by its live queue, and after a sell-out by the memo.
type openerCache struct {
	cache   *cache.Cache
	ch      chan openerEntry // never closed: a late add must not panic
	states  chan openerEntry // sold-out states: written first, unpaced, never dropped
	closing chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

// openerEntry is the shares one committed batch took of a packet, or with
// state set, a packet's state. A batch's shares travel as one entry and
// are written in one pipelined round (Cache.SetOpenedMany), not one
// memcached round trip per share.
type openerEntry struct {
	id      hongbao.PacketID
	shares  []cache.Share
	expires time.Time
	state   *hongbao.State
}

// cost is what the entry spends of the writer's pace: its shares.
func (e openerEntry) cost() int { return max(len(e.shares), 1) }

func (oc *openerCache) set(e openerEntry) {
	if e.state != nil {
		oc.cache.SetState(e.id, *e.state)
		return
	}
	oc.cache.SetOpenedMany(e.id, e.shares, e.expires)
}

const (
	stateBacklog  = 4096 // sold-out states waiting; beyond, the committer writes its own
	openerBacklog = 4096 // entries (batches) waiting for the writer at most
	openerRate    = 5000 // shares written per second at most
	openerTick    = 10 * time.Millisecond
)

func newOpenerCache(c *cache.Cache) *openerCache {
	oc := &openerCache{cache: c, ch: make(chan openerEntry, openerBacklog), states: make(chan openerEntry, stateBacklog), closing: make(chan struct{})}
	oc.wg.Add(1)
	go oc.write()
	return oc
}

// write sets up to openerRate/100 shares every openerTick (a batch larger
// than what is left of a tick's budget still goes whole, and the next
// ticks pay for it); once closing, it writes what is queued without
// pausing and stops.
func (oc *openerCache) write() {
	defer oc.wg.Done()
	tick := time.NewTicker(openerTick)
	defer tick.Stop()
	const perTick = int(openerRate * openerTick / time.Second)
	budget := 0
	for {
		for budget += perTick; budget > 0; {
			oc.writeStates()
			select {
			case e := <-oc.states:
				oc.set(e)
				budget--
			case e := <-oc.ch:
				oc.set(e)
				budget -= e.cost()
			case <-oc.closing:
				oc.drain()
				return
			}
		}
		select {
		case <-tick.C:
		case <-oc.closing:
			oc.drain()
			return
		}
	}
}

// writeStates writes every sold-out state waiting.
func (oc *openerCache) writeStates() {
	for {
		select {
		case e := <-oc.states:
			oc.set(e)
		default:
			return
		}
	}
}

func (oc *openerCache) drain() {
	oc.writeStates()
	for {
		select {
		case e := <-oc.ch:
			oc.set(e)
		default:
			return
		}
	}
}

// soldOut queues the state of a packet that just sold out. A lost state
// would leave memcached saying the packet has shares until it expires, so
// when the writer is that far behind the caller writes it itself.
func (oc *openerCache) soldOut(id hongbao.PacketID, st hongbao.State) {
	e := openerEntry{id: id, state: &st}
	select {
	case oc.states <- e:
	default:
		oc.set(e)
	}
}

// add queues an entry, or drops it when the writer is behind or stopped (a
// transaction may still commit after a Close that ran out of time).
func (oc *openerCache) add(e openerEntry) {
	select {
	case <-oc.closing:
		return
	default:
	}
	select {
	case oc.ch <- e:
	default:
	}
}

// close writes what is queued and stops the writer.
func (oc *openerCache) close() {
	oc.once.Do(func() { close(oc.closing) })
	oc.wg.Wait()
}

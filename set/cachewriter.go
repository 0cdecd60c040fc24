package set

import (
	"sync"
	"sync/atomic"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store"
)

// openerCache carries committed shares to memcached off the committers'
// path, through one writer paced to openerRate entries a second; entries
// beyond a backlog are dropped. The cache is advisory (a missing entry
// costs a MySQL point read later, never a different answer), so caching
// must not take the CPU of the opens it describes: unpaced, a hot packet's
// entries cost more CPU (here and in memcached) than its transactions.
// Under such load most entries are dropped; that packet's repeated opens
// are answered by its live queue, and after a sell-out by the memo.
type openerCache struct {
	cache   *store.Cache
	ch      chan openerEntry
	closing chan struct{}
	wg      sync.WaitGroup
	once    sync.Once
	dropped atomic.Int64
}

type openerEntry struct {
	id      hongbao.PacketID
	user    hongbao.UserID
	amount  int64
	expires time.Time
}

const (
	openerBacklog = 4096 // entries waiting for the writer at most
	openerRate    = 5000 // entries written per second at most
	openerTick    = 10 * time.Millisecond
)

func newOpenerCache(c *store.Cache) *openerCache {
	oc := &openerCache{cache: c, ch: make(chan openerEntry, openerBacklog), closing: make(chan struct{})}
	oc.wg.Add(1)
	go oc.write()
	return oc
}

// write sets up to openerRate/100 entries every openerTick; once closing,
// it writes what is left without pausing.
func (oc *openerCache) write() {
	defer oc.wg.Done()
	tick := time.NewTicker(openerTick)
	defer tick.Stop()
	for {
		for range openerRate * openerTick / time.Second {
			e, ok := <-oc.ch
			if !ok {
				return
			}
			oc.cache.SetOpened(e.id, e.user, e.amount, e.expires)
		}
		select {
		case <-tick.C:
		case <-oc.closing:
		}
	}
}

// add queues an entry, or drops it when the writer is behind.
func (oc *openerCache) add(e openerEntry) {
	select {
	case oc.ch <- e:
	default:
		oc.dropped.Add(1)
	}
}

// close writes what is queued and stops the writer; nothing may be added
// after it.
func (oc *openerCache) close() {
	oc.once.Do(func() { close(oc.closing); close(oc.ch) })
	oc.wg.Wait()
}

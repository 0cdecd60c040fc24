package set

import (
	"sync"
	"sync/atomic"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/store"
)

// openerCache carries committed shares to memcached off the committers'
// path, through one writer. It is bounded: when memcached cannot keep up,
// entries are dropped. The cache is advisory (a missing entry costs a MySQL
// point read later, never a different answer), so caching must not take
// the CPU of the opens it describes: under a hot packet's load most
// entries are dropped, and that packet's repeated opens are answered by
// its live queue anyway.
type openerCache struct {
	cache   *store.Cache
	ch      chan openerEntry
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

// openerBacklog is how many entries may wait for the writer.
const openerBacklog = 4096

func newOpenerCache(c *store.Cache) *openerCache {
	oc := &openerCache{cache: c, ch: make(chan openerEntry, openerBacklog)}
	oc.wg.Add(1)
	go oc.write()
	return oc
}

func (oc *openerCache) write() {
	defer oc.wg.Done()
	for e := range oc.ch {
		oc.cache.SetOpened(e.id, e.user, e.amount, e.expires)
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
	oc.once.Do(func() { close(oc.ch) })
	oc.wg.Wait()
}

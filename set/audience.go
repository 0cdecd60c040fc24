package set

import (
	"sync"

	hongbao "github.com/hongbao-dev/hongbao"
)

// audiences remembers, in process, the audiences of packets this server
// sent, opened or read, so a stranger's grab or open is refused from
// memory: no memcached round trip, no transaction. An audience never
// changes after the send, so a remembered one is exact for good. Packets
// without an audience are not held (a miss costs one map read); one
// forgotten, or never seen here, is refused by the memcached state's copy
// of its audience or, failing that, by the open transaction itself
// (hongbao.DrawOpens), whose packet read carries it: money never depends on
// this memory.
//
// It is bounded by the users it holds, all packets together; the packets
// remembered first are forgotten first.
type audiences struct {
	mu      sync.RWMutex
	limit   int
	held    int
	packets map[hongbao.PacketID]hongbao.Audience
	order   []hongbao.PacketID // oldest first
}

// audienceUsers bounds what audiences holds: about 8 MB of user IDs, the
// audiences of some 2,000 full groups or a million exclusive packets.
const audienceUsers = 1 << 20

func newAudiences(limit int) *audiences {
	return &audiences{limit: limit, packets: map[hongbao.PacketID]hongbao.Audience{}}
}

// refuses reports whether id is known to have an audience that does not
// admit user.
func (a *audiences) refuses(id hongbao.PacketID, user hongbao.UserID) bool {
	a.mu.RLock()
	aud, ok := a.packets[id]
	a.mu.RUnlock()
	return ok && !aud.Admits(user)
}

// learn remembers id's audience (none: nothing to remember).
func (a *audiences) learn(id hongbao.PacketID, aud hongbao.Audience) {
	if aud == nil || len(aud) > a.limit {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.packets[id]; ok {
		return
	}
	for a.held+len(aud) > a.limit && len(a.order) > 0 {
		old := a.order[0]
		a.order = a.order[1:]
		a.held -= len(a.packets[old])
		delete(a.packets, old)
	}
	a.packets[id] = aud
	a.order = append(a.order, id)
	a.held += len(aud)
}

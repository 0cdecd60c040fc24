package set

import (
	"cmp"
	"slices"
	"sync"

	hongbao "github.com/hongbao-dev/hongbao"
)

// soldOut remembers, in process, every opener of packets that sold out
// here. A sold-out packet never changes again (no share is ever added or
// taken back), so the crowd that arrives after the last share, often many
// times the shares, is answered from memory: the user's share, or
// sold_out. It is bounded by the openers it holds, all packets together,
// counting each packet as packetCost openers more (so a million one-share
// packets cannot hold more than their share of memory); the packets
// remembered longest are forgotten first, and a forgotten or never-learnt
// packet is answered by the usual path. A packet with an audience is
// remembered with it, so a stranger is refused not_in_audience, never told
// sold_out, even once the audiences' own memory has forgotten the packet:
// the memo never answers what the audience would not.
type soldOut struct {
	mu      sync.RWMutex
	limit   int // openers held at most; 0: remember nothing
	held    int
	packets map[hongbao.PacketID][]opener         // sorted by user
	auds    map[hongbao.PacketID]hongbao.Audience // of the packets held that have one
	order   []hongbao.PacketID                    // oldest first
}

// opener is one share of a sold-out packet: 16 bytes.
type opener struct {
	user   hongbao.UserID
	amount int64
}

// packetCost is what a packet costs beyond its openers, in openers (its
// map entry and slice header, about 64 bytes).
const packetCost = 4

func newSoldOut(limit int) *soldOut {
	return &soldOut{limit: max(limit, 0), packets: map[hongbao.PacketID][]opener{}, auds: map[hongbao.PacketID]hongbao.Audience{}}
}

// cost is what a packet of openers and audience aud holds, in openers: an
// audience's user is 8 bytes, half an opener.
func cost(openers []opener, aud hongbao.Audience) int { return len(openers) + packetCost + len(aud)/2 }

// answer is the open of id by user when id is known to be sold out: the
// user's share (already_opened), ErrNotInAudience for a user its audience
// does not admit (before anything else, as the transaction decides), or
// ErrSoldOut. ok is false when id is not remembered.
func (m *soldOut) answer(id hongbao.PacketID, user hongbao.UserID) (o hongbao.Outcome, ok bool) {
	m.mu.RLock()
	openers, ok := m.packets[id]
	aud := m.auds[id]
	m.mu.RUnlock()
	switch {
	case !ok:
		return hongbao.Outcome{}, false
	case !aud.Admits(user):
		return hongbao.Outcome{Err: hongbao.ErrNotInAudience}, true
	}
	if i, had := slices.BinarySearchFunc(openers, user, func(o opener, u hongbao.UserID) int { return cmp.Compare(o.user, u) }); had {
		return hongbao.Outcome{Result: hongbao.OpenResult{User: user, Amount: openers[i].amount, Status: hongbao.AlreadyOpened}}, true
	}
	return hongbao.Outcome{Err: hongbao.ErrSoldOut}, true
}

// size returns the packets remembered.
func (m *soldOut) size() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.packets)
}

// knows reports whether id is remembered.
func (m *soldOut) knows(id hongbao.PacketID) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	_, ok := m.packets[id]
	return ok
}

// worth is the largest packet (in shares) worth remembering: a quarter of
// the bound, so one activity cannot push out everything else.
func (m *soldOut) worth() int { return m.limit / 4 }

// remember records every opener of sold-out packet id and its audience
// (nil: anyone); shares must be all of them (read after the last share,
// under the packet's lock).
func (m *soldOut) remember(id hongbao.PacketID, shares map[hongbao.UserID]int64, aud hongbao.Audience) {
	if len(shares) == 0 || len(shares) > m.worth() {
		return
	}
	openers := make([]opener, 0, len(shares))
	for u, a := range shares {
		openers = append(openers, opener{user: u, amount: a})
	}
	slices.SortFunc(openers, func(a, b opener) int { return cmp.Compare(a.user, b.user) })
	c := cost(openers, aud)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.packets[id]; ok {
		return
	}
	for m.held+c > m.limit && len(m.order) > 0 {
		old := m.order[0]
		m.order = m.order[1:]
		m.held -= cost(m.packets[old], m.auds[old])
		delete(m.packets, old)
		delete(m.auds, old)
	}
	m.packets[id] = openers
	if aud != nil {
		m.auds[id] = aud
	}
	m.order = append(m.order, id)
	m.held += c
}

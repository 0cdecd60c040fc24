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
// packet is answered by the usual path.
type soldOut struct {
	mu      sync.RWMutex
	limit   int // openers held at most; 0: remember nothing
	held    int
	packets map[hongbao.PacketID][]opener // sorted by user
	order   []hongbao.PacketID            // oldest first
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
	return &soldOut{limit: max(limit, 0), packets: map[hongbao.PacketID][]opener{}}
}

// answer is the open of id by user when id is known to be sold out: the
// user's share (already_opened) or ErrSoldOut. ok is false when id is not
// remembered.
func (m *soldOut) answer(id hongbao.PacketID, user hongbao.UserID) (o hongbao.Outcome, ok bool) {
	m.mu.RLock()
	openers, ok := m.packets[id]
	m.mu.RUnlock()
	if !ok {
		return hongbao.Outcome{}, false
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

// remember records every opener of sold-out packet id; shares must be all
// of them (read after the last share, under the packet's lock).
func (m *soldOut) remember(id hongbao.PacketID, shares map[hongbao.UserID]int64) {
	if len(shares) == 0 || len(shares) > m.worth() {
		return
	}
	openers := make([]opener, 0, len(shares))
	for u, a := range shares {
		openers = append(openers, opener{user: u, amount: a})
	}
	slices.SortFunc(openers, func(a, b opener) int { return cmp.Compare(a.user, b.user) })
	cost := len(openers) + packetCost
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.packets[id]; ok {
		return
	}
	for m.held+cost > m.limit && len(m.order) > 0 {
		old := m.order[0]
		m.order = m.order[1:]
		m.held -= len(m.packets[old]) + packetCost
		delete(m.packets, old)
	}
	m.packets[id] = openers
	m.order = append(m.order, id)
	m.held += cost
}

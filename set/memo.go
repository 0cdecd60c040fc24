package set

import (
	"sync"

	hongbao "github.com/hongbao-dev/hongbao"
)

// soldOut remembers, in process, every opener of packets that sold out
// here. A sold-out packet never changes again (no share is ever added or
// taken back), so the crowd that arrives after the last share, often many
// times the shares, is answered from memory: the user's share, or
// sold_out. It is bounded by the openers it holds, all packets together;
// the packets remembered longest are forgotten first, and a forgotten or
// never-learnt packet is answered by the usual path.
type soldOut struct {
	mu      sync.RWMutex
	limit   int // openers held at most; 0: remember nothing
	held    int
	packets map[hongbao.PacketID]map[hongbao.UserID]int64
	order   []hongbao.PacketID // oldest first
}

func newSoldOut(limit int) *soldOut {
	return &soldOut{limit: max(limit, 0), packets: map[hongbao.PacketID]map[hongbao.UserID]int64{}}
}

// answer is the open of id by user when id is known to be sold out: the
// user's share (already_opened) or ErrSoldOut. ok is false when id is not
// remembered.
func (m *soldOut) answer(id hongbao.PacketID, user hongbao.UserID) (o hongbao.Outcome, ok bool) {
	m.mu.RLock()
	openers, ok := m.packets[id]
	amount, had := openers[user]
	m.mu.RUnlock()
	switch {
	case !ok:
		return hongbao.Outcome{}, false
	case had:
		return hongbao.Outcome{Result: hongbao.OpenResult{User: user, Amount: amount, Status: hongbao.AlreadyOpened}}, true
	}
	return hongbao.Outcome{Err: hongbao.ErrSoldOut}, true
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

// remember records every opener of sold-out packet id; openers must be all
// of them (read after the last share, under the packet's lock).
func (m *soldOut) remember(id hongbao.PacketID, openers map[hongbao.UserID]int64) {
	if len(openers) == 0 || len(openers) > m.worth() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.packets[id]; ok {
		return
	}
	for m.held+len(openers) > m.limit && len(m.order) > 0 {
		old := m.order[0]
		m.order = m.order[1:]
		m.held -= len(m.packets[old])
		delete(m.packets, old)
	}
	m.packets[id] = openers
	m.order = append(m.order, id)
	m.held += len(openers)
}

package set

// Tests of known's bound (known.go): held stays within the limit and the
// packets go first in, first out, checked step by step against a model of
// the FIFO the bound promises.

import (
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
)

// fifo models the FIFO the bound promises: the packets held in the order
// they were learnt (learning a held packet again keeps its place), each
// with its cost; while over the limit, the first goes.
type fifo struct {
	limit int
	ids   []hongbao.PacketID
	cost  map[hongbao.PacketID]int
}

func (m *fifo) learn(id hongbao.PacketID, openers int) {
	if _, ok := m.cost[id]; !ok {
		m.ids = append(m.ids, id)
	}
	m.cost[id] = openers + knownCost
	for m.held() > m.limit {
		delete(m.cost, m.ids[0])
		m.ids = m.ids[1:]
	}
}

func (m *fifo) forget(id hongbao.PacketID) {
	if _, ok := m.cost[id]; ok {
		delete(m.cost, id)
		m.ids = slices.DeleteFunc(m.ids, func(x hongbao.PacketID) bool { return x == id })
	}
}

func (m *fifo) held() int {
	n := 0
	for _, c := range m.cost {
		n += c
	}
	return n
}

// checkFIFO asserts that k holds what the model holds, in its order.
func checkFIFO(t *testing.T, step string, k *known, m *fifo) {
	t.Helper()
	got := checkKnown(t, k)
	if !slices.Equal(got, m.ids) || k.held != m.held() {
		t.Fatalf("%s: known holds %v (held %d); the FIFO holds %v (held %d)", step, got, k.held, m.ids, m.held())
	}
	for _, id := range m.ids {
		if kn := k.get(id, t0); kn == nil || len(kn.Openers)+knownCost != m.cost[id] {
			t.Fatalf("%s: packet %d: %+v, want %d openers", step, id, kn, m.cost[id]-knownCost)
		}
	}
}

// TestKnownBoundFIFO proves held stays within the limit, the packet learnt first goes first, and learning a packet again replaces its cost in place.
func TestKnownBoundFIFO(t *testing.T) {
	k := newKnown(60) // upTo 15; a packet with n shares costs n+8
	m := &fifo{limit: 60, cost: map[hongbao.PacketID]int{}}
	steps := []struct {
		id      hongbao.PacketID
		openers int
		want    []hongbao.PacketID // held after the step, oldest first
		held    int
	}{
		{1, 2, []hongbao.PacketID{1}, 10},
		{2, 2, []hongbao.PacketID{1, 2}, 20},
		{3, 2, []hongbao.PacketID{1, 2, 3}, 30},
		{4, 2, []hongbao.PacketID{1, 2, 3, 4}, 40},
		{5, 2, []hongbao.PacketID{1, 2, 3, 4, 5}, 50},
		{2, 7, []hongbao.PacketID{1, 2, 3, 4, 5}, 55}, // learnt again: 10 -> 15, same place
		{6, 5, []hongbao.PacketID{2, 3, 4, 5, 6}, 58}, // +13 = 68: 1 goes
		{3, 12, []hongbao.PacketID{3, 4, 5, 6}, 53},   // again, 10 -> 20: 68, 2 goes
		{7, 0, []hongbao.PacketID{4, 5, 6, 7}, 41},    // +8 = 61: 3 goes
		{8, 14, []hongbao.PacketID{5, 6, 7, 8}, 53},   // +22 = 63: 4 goes
		{9, 0, []hongbao.PacketID{6, 7, 8, 9}, 51},    // +8 = 61: 5 goes
		{10, 0, []hongbao.PacketID{6, 7, 8, 9, 10}, 59},
	}
	for i, st := range steps {
		k.learn(st.id, batch(st.id, 15, openers(1000*int(st.id), st.openers)), t0)
		m.learn(st.id, st.openers)
		got := checkKnown(t, k)
		if !slices.Equal(got, st.want) || k.held != st.held {
			t.Fatalf("step %d (learn %d with %d shares): holds %v, held %d; want %v, %d", i+1, st.id, st.openers, got, k.held, st.want, st.held)
		}
		checkFIFO(t, fmt.Sprintf("step %d", i+1), k, m)
	}
	// Random learning, again and again of the same packets, against the
	// model. Limits of every size, down to one packet's cost or less.
	for _, limit := range []int{9, 16, 50, 120, 400} {
		k := newKnown(limit)
		m := &fifo{limit: limit, cost: map[hongbao.PacketID]int{}}
		r := mrand.New(mrand.NewPCG(uint64(limit), 7))
		upTo := k.upTo()
		for i := range 3000 {
			id := hongbao.PacketID(1 + r.IntN(40))
			n := r.IntN(upTo) // fewer than the count: still active
			k.learn(id, batch(id, upTo, openers(1000*int(id), n)), t0)
			m.learn(id, n)
			checkFIFO(t, fmt.Sprintf("limit %d, step %d (learn %d with %d shares)", limit, i, id, n), k, m)
		}
	}
}

// TestKnownFIFOAfterForget proves a packet forgotten then learnt again (a failed transaction, then a good one) is evicted after the packets learnt before it.
func TestKnownFIFOAfterForget(t *testing.T) {
	// known.forget leaves the packet's name in order; learning it again
	// appends a second name, and eviction must not take it by the first.
	k := newKnown(24) // upTo 6; three packets without shares fill it
	m := &fifo{limit: 24, cost: map[hongbao.PacketID]int{}}
	empty := map[hongbao.UserID]int64{}
	for _, id := range []hongbao.PacketID{1, 2, 3} {
		k.learn(id, batch(id, 1, empty), t0)
		m.learn(id, 0)
	}
	k.forget(1)
	m.forget(1)
	checkFIFO(t, "forget 1", k, m)
	k.learn(1, batch(1, 1, empty), t0) // learnt last: 2, 3, 1
	m.learn(1, 0)
	k.learn(4, batch(4, 1, empty), t0) // one too many: 2 must go
	m.learn(4, 0)
	if k.get(2, t0) != nil || k.get(1, t0) == nil {
		t.Errorf("learning 4 kept packet 2 (learnt before 3 and 1) and evicted 1, learnt last but for 4: order %v", k.order)
	}
	checkFIFO(t, "learn 4", k, m) // 3, 1, 4
}

// TestKnownOrderBounded proves the order list stays bounded (2*known+67 names at most) over 10,000 learn/forget cycles of the same packets.
func TestKnownOrderBounded(t *testing.T) {
	for _, keep := range []int{0, 50} {
		t.Run(fmt.Sprintf("%d kept", keep), func(t *testing.T) {
			k := newKnown(10000)
			for i := range keep {
				id := hongbao.PacketID(1000 + i)
				k.learn(id, batch(id, 2, openers(0, 1)), t0)
			}
			sold := batch(3, 2, openers(0, 2)) // sold out: learning it forgets
			for range 10000 {
				k.learn(1, batch(1, 2, openers(0, 1)), t0)
				k.learn(2, batch(2, 2, openers(0, 1)), t0)
				k.learn(3, batch(3, 2, openers(0, 1)), t0)
				k.learn(1, batch(1, 2, openers(0, 1)), t0) // again: no new name
				k.forget(1)
				k.forget(2)
				k.learn(3, sold, t0)
			}
			if k.size() != keep {
				t.Errorf("%d packets known, want the %d kept", k.size(), keep)
			}
			if bound := 2*keep + 64 + 3; len(k.order) > bound {
				t.Errorf("order names %d packets after 10,000 cycles (%d known), want at most %d", len(k.order), k.size(), bound)
			}
			checkKnown(t, k)
			// And the packets kept are still the first to go.
			if keep > 0 {
				id := hongbao.PacketID(9999)
				for range (k.limit - k.held) / knownCost {
					k.learn(id, batch(id, 2, map[hongbao.UserID]int64{}), t0)
					id++
				}
				k.learn(id, batch(id, 3, openers(0, 2)), t0) // 2 more than fits
				if k.get(1000, t0) != nil || k.get(1001, t0) == nil || k.get(id, t0) == nil {
					t.Errorf("learning past the limit did not evict exactly the oldest packet")
				}
				checkKnown(t, k)
			}
		})
	}
}

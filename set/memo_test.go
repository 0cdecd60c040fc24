package set

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
)

// openers returns n openers of a packet: users base+1.. with amounts
// 100*user.
func openers(base, n int) map[hongbao.UserID]int64 {
	m := make(map[hongbao.UserID]int64, n)
	for i := 1; i <= n; i++ {
		u := hongbao.UserID(base + i)
		m[u] = 100 * int64(u)
	}
	return m
}

// checkHeld asserts the memo's bookkeeping: held is the openers of the
// packets held plus packetCost per packet, every held packet is listed
// once in order, and held is within the limit.
func checkHeld(t *testing.T, m *soldOut) {
	t.Helper()
	m.mu.RLock()
	defer m.mu.RUnlock()
	sum := 0
	for id, o := range m.packets {
		sum += cost(o, m.auds[id])
	}
	if sum != m.held {
		t.Errorf("held = %d, the packets hold %d openers", m.held, sum)
	}
	if m.held > m.limit {
		t.Errorf("held %d openers, over the limit %d", m.held, m.limit)
	}
	if len(m.order) != len(m.packets) {
		t.Errorf("order lists %d packets, %d held", len(m.order), len(m.packets))
	}
	seen := map[hongbao.PacketID]bool{}
	for _, id := range m.order {
		if _, ok := m.packets[id]; !ok || seen[id] {
			t.Errorf("order %v: packet %d not held or listed twice", m.order, id)
		}
		seen[id] = true
	}
}

func TestSoldOutMemoAnswer(t *testing.T) {
	m := newSoldOut(100)
	if _, ok := m.answer(1, 11); ok {
		t.Error("answer for a packet never remembered: ok=true, want false")
	}
	if m.knows(1) {
		t.Error("knows a packet never remembered")
	}
	m.remember(1, map[hongbao.UserID]int64{11: 37, 12: 1, 13: 262}, nil)
	if !m.knows(1) {
		t.Error("does not know a remembered packet")
	}
	for u, amount := range map[hongbao.UserID]int64{11: 37, 12: 1, 13: 262} {
		o, ok := m.answer(1, u)
		want := hongbao.OpenResult{User: u, Amount: amount, Status: hongbao.AlreadyOpened}
		if !ok || o.Err != nil || o.Result != want {
			t.Errorf("answer(1, opener %d) = %+v, %v; want %+v", u, o, ok, want)
		}
	}
	o, ok := m.answer(1, 14)
	if !ok || !errors.Is(o.Err, hongbao.ErrSoldOut) || o.Result != (hongbao.OpenResult{}) {
		t.Errorf("answer(1, newcomer) = %+v, %v; want ErrSoldOut", o, ok)
	}
	if hongbao.Code(o.Err) != "sold_out" {
		t.Errorf("Code = %q, want sold_out", hongbao.Code(o.Err))
	}
	if _, ok := m.answer(2, 11); ok {
		t.Error("an opener of packet 1 is answered for packet 2")
	}
}

func TestSoldOutMemoRememberIgnores(t *testing.T) {
	m := newSoldOut(40)
	if w := m.worth(); w != 10 {
		t.Fatalf("worth() = %d with limit 40, want 10", w)
	}
	m.remember(1, openers(100, 11), nil) // larger than worth
	m.remember(2, map[hongbao.UserID]int64{}, nil)
	m.remember(3, nil, nil)
	for _, id := range []hongbao.PacketID{1, 2, 3} {
		if m.knows(id) {
			t.Errorf("packet %d remembered", id)
		}
		if _, ok := m.answer(id, 101); ok {
			t.Errorf("answer for packet %d: ok=true, want false", id)
		}
	}
	m.remember(4, openers(400, 10), nil) // exactly worth
	if o, ok := m.answer(4, 401); !ok || o.Result.Amount != 40100 {
		t.Errorf("answer for a packet of worth() openers = %+v, %v", o, ok)
	}
	// Remembering a packet again changes nothing.
	m.remember(4, openers(900, 3), nil)
	if o, ok := m.answer(4, 401); !ok || o.Result.Amount != 40100 {
		t.Errorf("answer after remembering again = %+v, %v; want the first openers", o, ok)
	}
	if o, ok := m.answer(4, 901); !ok || !errors.Is(o.Err, hongbao.ErrSoldOut) {
		t.Errorf("answer for the second openers = %+v, %v; want ErrSoldOut", o, ok)
	}
	if m.held != 10+packetCost {
		t.Errorf("held = %d, want 10 openers + %d", m.held, packetCost)
	}
	checkHeld(t, m)
}

func TestSoldOutMemoEviction(t *testing.T) {
	t.Run("limit 20", func(t *testing.T) {
		// worth() is 20/4 = 5: packets of 6 and 7 openers are not worth
		// remembering, so they neither enter nor evict anything.
		m := newSoldOut(20)
		for i, n := range []int{2, 2, 6, 7} {
			m.remember(hongbao.PacketID(i+1), openers(100*(i+1), n), nil)
			checkHeld(t, m)
		}
		for i, want := range []bool{true, true, false, false} {
			id := hongbao.PacketID(i + 1)
			if _, ok := m.answer(id, hongbao.UserID(100*(i+1)+1)); ok != want {
				t.Errorf("packet %d remembered: %v, want %v", id, ok, want)
			}
		}
		if m.held != 2*(2+packetCost) {
			t.Errorf("held = %d, want %d", m.held, 2*(2+packetCost))
		}
	})
	t.Run("limit 40", func(t *testing.T) {
		m := newSoldOut(40) // worth() = 10; a packet of n openers costs n+4
		sizes := []int{2, 2, 2, 3, 4, 10, 4}
		// After each remember: the packets held, oldest first.
		want := [][]hongbao.PacketID{
			{1}, {1, 2}, {1, 2, 3}, {1, 2, 3, 4}, // 6+6+6+7 = 25
			{1, 2, 3, 4, 5}, // +8 = 33 <= 40: nothing goes
			{3, 4, 5, 6},    // +14 = 47 > 40: 1 goes (41), then 2 (35)
			{4, 5, 6, 7},    // +8 = 43 > 40: 3 goes (37)
		}
		for i, n := range sizes {
			id := hongbao.PacketID(i + 1)
			m.remember(id, openers(100*int(id), n), nil)
			checkHeld(t, m)
			held := map[hongbao.PacketID]bool{}
			for _, h := range want[i] {
				held[h] = true
			}
			for p := hongbao.PacketID(1); p <= id; p++ {
				opener := hongbao.UserID(100*int(p) + 1)
				o, ok := m.answer(p, opener)
				switch {
				case ok != held[p]:
					t.Errorf("after packet %d: packet %d answered: %v, want %v", id, p, ok, held[p])
				case ok && o.Result.Amount != 100*int64(opener):
					t.Errorf("after packet %d: packet %d opener %d answered %+v", id, p, opener, o)
				}
			}
			if got := fmt.Sprint(m.order); got != fmt.Sprint(want[i]) {
				t.Errorf("after packet %d: order %s, want %v", id, got, want[i])
			}
		}
		if m.held != 37 {
			t.Errorf("held = %d, want 37", m.held)
		}
	})
}

func TestSoldOutMemoLimitZero(t *testing.T) {
	for _, limit := range []int{0, -5, 3} { // 3: worth() is 0 too
		m := newSoldOut(limit)
		m.remember(1, openers(0, 1), nil)
		if m.knows(1) {
			t.Errorf("limit %d: a packet was remembered", limit)
		}
		if _, ok := m.answer(1, 1); ok {
			t.Errorf("limit %d: answer ok=true, want false", limit)
		}
		if m.held != 0 || len(m.order) != 0 {
			t.Errorf("limit %d: held %d, order %v", limit, m.held, m.order)
		}
	}
}

// TestSoldOutMemoConcurrent: answers run while packets are remembered and
// evicted (run with -race).
func TestSoldOutMemoConcurrent(t *testing.T) {
	m := newSoldOut(160) // worth() = 40
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 200 {
				id := hongbao.PacketID(w*1000 + i)
				m.remember(id, openers(int(id)*10, 1+i%16), nil)
			}
		})
		wg.Go(func() {
			for i := range 2000 {
				id := hongbao.PacketID(w*1000 + i%200)
				u := hongbao.UserID(int(id)*10 + 1)
				if o, ok := m.answer(id, u); ok && (o.Err != nil || o.Result.Amount != 100*int64(u)) {
					t.Errorf("answer(%d, %d) = %+v", id, u, o)
					return
				}
			}
		})
	}
	wg.Wait()
	checkHeld(t, m)
}

// TestSoldOutMemoAudience: a packet remembered with its audience answers
// a stranger ErrNotInAudience before anything else, an opener its share, a
// member without one ErrSoldOut; the audience counts in what the memo
// holds and is forgotten with its packet.
func TestSoldOutMemoAudience(t *testing.T) {
	m := newSoldOut(40)
	m.remember(1, map[hongbao.UserID]int64{11: 37}, hongbao.Audience{11, 12, 13, 14})
	for _, tt := range []struct {
		user   hongbao.UserID
		amount int64
		err    error
	}{{11, 37, nil}, {12, 0, hongbao.ErrSoldOut}, {99, 0, hongbao.ErrNotInAudience}} {
		o, ok := m.answer(1, tt.user)
		if !ok || o.Err != tt.err || o.Result.Amount != tt.amount {
			t.Errorf("answer(1, %d) = %+v, %v; want amount %d, err %v", tt.user, o, ok, tt.amount, tt.err)
		}
	}
	if m.held != 1+packetCost+2 {
		t.Errorf("held %d, want %d", m.held, 1+packetCost+2)
	}
	checkHeld(t, m)
	for id := hongbao.PacketID(3); m.knows(1); id++ {
		m.remember(id, openers(100*int(id), 10), nil)
	}
	if len(m.auds) != 0 {
		t.Errorf("audiences of forgotten packets kept: %v", m.auds)
	}
	checkHeld(t, m)
}

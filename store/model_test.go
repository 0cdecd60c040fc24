package store_test

// The reference the open tests compare the store with: opening one at a
// time in memory with the domain's Draw and the same draw sequence, and the
// printing of outcomes both sides share.

import (
	"database/sql"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
)

// printOutcome prints the outcome of user u's open.
func printOutcome(u hongbao.UserID, o hongbao.Outcome) string {
	if o.Err != nil {
		return u.String() + ":" + hongbao.Code(o.Err)
	}
	if o.Result.User != u {
		return fmt.Sprintf("%s:answered-for-%s:%s:%d", u, o.Result.User, o.Result.Status, o.Result.Amount)
	}
	return fmt.Sprintf("%s:%s:%d", u, o.Result.Status, o.Result.Amount)
}

// printBatch prints the batch of work w on packet number pi: one line per
// outcome, then what the batch says is left of the packet.
func printBatch(t *testing.T, pi int, w store.Work, b store.Batch) []string {
	t.Helper()
	if len(b.Outcomes) != len(w.Users) {
		t.Fatalf("packet %s: %d outcomes for %d users", w.ID, len(b.Outcomes), len(w.Users))
	}
	var out []string
	for i, u := range w.Users {
		out = append(out, fmt.Sprintf("p%d %s", pi, printOutcome(u, b.Outcomes[i])))
	}
	switch {
	case b.Packet == nil:
		out = append(out, fmt.Sprintf("p%d no packet", pi))
	case b.Packet.ID != w.ID:
		t.Fatalf("batch of %s carries packet %s", w.ID, b.Packet.ID)
	default:
		out = append(out, fmt.Sprintf("p%d left %d/%d", pi, b.Packet.RemainingAmount, b.Packet.RemainingCount))
	}
	return out
}

// roundWork is a work on packet number pkt of a test's list.
type roundWork struct {
	pkt   int
	users []hongbao.UserID
}

// seededRounds is a seeded list of rounds, each a list of works on distinct
// packets (of n) in random order; users come from a pool of 8 so some open
// again in later rounds and the small packets sell out, and some appear
// twice in one work (always in the very first work).
func seededRounds(seed uint64, n int) [][]roundWork {
	r := rand.New(rand.NewPCG(seed, 99))
	var rounds [][]roundWork
	for round := range 7 {
		perm := r.Perm(n)
		var works []roundWork
		for wi, pkt := range perm[:2+r.IntN(n-1)] {
			var us []hongbao.UserID
			for range 1 + r.IntN(4) {
				us = append(us, hongbao.UserID(100+r.IntN(8)))
			}
			if (round == 0 && wi == 0) || r.IntN(3) == 0 {
				dup := us[r.IntN(len(us))]
				at := r.IntN(len(us) + 1)
				us = slices.Insert(us, at, dup)
			}
			works = append(works, roundWork{pkt: pkt, users: us})
		}
		rounds = append(rounds, works)
	}
	return rounds
}

// modelPacket is the reference: opening one at a time in memory with the
// domain's Draw and the same draw sequence.
type modelPacket struct {
	typ    hongbao.Type
	amount int64
	count  int
	have   map[hongbao.UserID]int64
	shares []dbtest.Share
}

func runModel(seed uint64, specs []packetSpec, rounds [][]roundWork) ([]string, []*modelPacket) {
	intn := seeded(seed)
	ms := make([]*modelPacket, len(specs))
	for i, sp := range specs {
		ms[i] = &modelPacket{typ: sp.typ, amount: sp.total, count: sp.count, have: map[hongbao.UserID]int64{}}
	}
	var out []string
	for _, round := range rounds {
		for _, w := range round {
			m := ms[w.pkt]
			for _, u := range w.users {
				if a, ok := m.have[u]; ok {
					out = append(out, fmt.Sprintf("p%d %s:%s:%d", w.pkt, u, hongbao.AlreadyOpened, a))
					continue
				}
				if m.count == 0 {
					out = append(out, fmt.Sprintf("p%d %s:sold_out", w.pkt, u))
					continue
				}
				a := hongbao.Draw(m.typ, m.amount, m.count, intn)
				m.amount -= a
				m.count--
				m.have[u] = a
				m.shares = append(m.shares, dbtest.Share{User: u, Amount: a, Seq: len(m.shares) + 1})
				out = append(out, fmt.Sprintf("p%d %s:%s:%d", w.pkt, u, hongbao.Opened, a))
			}
			out = append(out, fmt.Sprintf("p%d left %d/%d", w.pkt, m.amount, m.count))
		}
	}
	return out, ms
}

// diffLines reports the first line where got and want differ.
func diffLines(got, want []string) string {
	for i := range max(len(got), len(want)) {
		g, w := "<none>", "<none>"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			return fmt.Sprintf("line %d: got %q, want %q (%d lines vs %d)", i, g, w, len(got), len(want))
		}
	}
	return "equal"
}

// packetState is the model of one packet: what is left, whether it was closed
// or is gone, and every share.
type packetState struct {
	typ     hongbao.Type
	amount  int64
	count   int
	closed  bool
	missing bool
	have    map[hongbao.UserID]int64
}

func (s *packetState) clone() *packetState {
	c := *s
	c.have = maps.Clone(s.have)
	return &c
}

func (s *packetState) String() string {
	if s.missing {
		return "missing"
	}
	return fmt.Sprintf("%d/%d closed=%v shares=%v", s.amount, s.count, s.closed, s.have)
}

// readState reads packet id from MySQL into the model.
func readState(t *testing.T, db *sql.DB, id hongbao.PacketID) *packetState {
	t.Helper()
	p := dbtest.ReadPacket(t, db, id)
	if p == nil {
		return &packetState{missing: true}
	}
	pt, _ := dbtest.Tables(t, id)
	closed := dbtest.Count(t, db, "SELECT closed FROM "+pt+" WHERE id = ?", id) != 0
	return &packetState{typ: hongbao.Type(p.Type), amount: p.RemainingAmount, count: p.RemainingCount, closed: closed, have: p.Shares}
}

// believedState is the model of what k says of its packet.
func believedState(k *hongbao.Snapshot) *packetState {
	return &packetState{typ: k.Packet.Type, amount: k.Packet.RemainingAmount, count: k.Packet.RemainingCount,
		closed: k.Packet.Closed, have: maps.Clone(k.Openers)}
}

// modelWork is a work of the model on packet number pi.
type modelWork struct {
	pi    int
	st    *packetState
	users []hongbao.UserID
}

// applyModel applies works in order to their states as the store decides one
// open at a time (have, then sold out, then closed, then a draw) and prints
// the outcomes as printBatch does.
func applyModel(intn func(int64) int64, works []modelWork) []string {
	var out []string
	for _, w := range works {
		line := func(format string, a ...any) {
			out = append(out, fmt.Sprintf("p%d ", w.pi)+fmt.Sprintf(format, a...))
		}
		s := w.st
		if s.missing {
			for _, u := range w.users {
				line("%s:not_found", u)
			}
			line("no packet")
			continue
		}
		for _, u := range w.users {
			if a, ok := s.have[u]; ok {
				line("%s:%s:%d", u, hongbao.AlreadyOpened, a)
				continue
			}
			if s.count == 0 {
				line("%s:sold_out", u)
				continue
			}
			if s.closed {
				line("%s:expired", u)
				continue
			}
			a := hongbao.Draw(s.typ, s.amount, s.count, intn)
			s.amount -= a
			s.count--
			s.have[u] = a
			line("%s:%s:%d", u, hongbao.Opened, a)
		}
		line("left %d/%d", s.amount, s.count)
	}
	return out
}

// sameState reports how the packet in MySQL differs from the model.
func sameState(got, want *packetState) bool {
	if got.missing || want.missing {
		return got.missing == want.missing
	}
	return got.amount == want.amount && got.count == want.count && got.closed == want.closed && maps.Equal(got.have, want.have)
}

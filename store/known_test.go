package store_test

// Integration tests of OpenMany's fast path for known packets (Work.Known):
// a work carrying what the caller's last transaction left of its packet is
// applied without the locking read and the share read, in one compound
// write that fails when the knowledge has gone stale, after which OpenMany
// applies every work again from what MySQL holds.

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
)

// TestKnownMatchesUnknown proves rounds applied with the last batch's knowledge give exactly the outcomes, openers and rows of rounds applied without it, never retrying.
func TestKnownMatchesUnknown(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := setup(t, 3)
	specs := []packetSpec{
		{hongbao.Random, 1000, 10},
		{hongbao.Fixed, 300, 3},
		{hongbao.Random, 5, 3},
		{hongbao.Random, 777, 7},
		{hongbao.Fixed, 100, 1},
		{hongbao.Random, 3, 3},
		{hongbao.Fixed, 800, 8},
		{hongbao.Random, 50000, 200},
	}
	mixed, knownSoldOut, knownWorks := false, false, 0
	for seed := uint64(21); seed <= 23; seed++ {
		rounds := seededRounds(seed, len(specs))
		want, model := runModel(seed, specs, rounds)
		type run struct {
			lines   []string
			openers []map[hongbao.UserID]int64
			packets []hongbao.Packet
		}
		runs := map[string]*run{}
		for _, mode := range []string{"unknown", "known"} {
			r := &run{}
			runs[mode] = r
			st := store.New(db, set, loc, time.Now, seeded(seed))
			ids := make([]hongbao.PacketID, len(specs))
			for i, sp := range specs {
				ids[i] = createPacket(t, st, buckets[i%len(buckets)], sp, hongbao.Funded)
			}
			knowledge := map[int]*hongbao.Snapshot{}
			for ri, round := range rounds {
				works := make([]store.Work, len(round))
				nknown := 0
				for i, w := range round {
					works[i] = store.Work{ID: ids[w.pkt], Users: w.users, OpenersUpTo: 1000}
					if mode == "known" && knowledge[w.pkt] != nil {
						works[i].Known = markKnown(knowledge[w.pkt])
						nknown++
						knownSoldOut = knownSoldOut || knowledge[w.pkt].Packet.RemainingCount == 0
					}
				}
				knownWorks += nknown
				mixed = mixed || nknown > 0 && nknown < len(works)
				bs, err := st.OpenMany(ctx, works)
				if err != nil {
					t.Fatalf("seed %d %s round %d: OpenMany: %v", seed, mode, ri, err)
				}
				if len(bs) != len(works) {
					t.Fatalf("seed %d %s: %d batches for %d works", seed, mode, len(bs), len(works))
				}
				for i, b := range bs {
					r.lines = append(r.lines, printBatch(t, round[i].pkt, works[i], b)...)
					if b.Openers == nil {
						t.Errorf("seed %d %s round %d: packet p%d of %d shares: no openers with OpenersUpTo 1000",
							seed, mode, ri, round[i].pkt, specs[round[i].pkt].count)
					}
					r.openers = append(r.openers, b.Openers)
					r.packets = append(r.packets, *b.Packet)
					switch usable := takesOpens(works[i].Known); {
					case usable && b.Packet.Greeting != knownMarker:
						t.Errorf("seed %d %s round %d: packet p%d was known but its batch was read from MySQL (the knowledge attempt failed)",
							seed, mode, ri, round[i].pkt)
					case !usable && b.Packet.Greeting == knownMarker:
						t.Errorf("seed %d %s round %d: packet p%d no longer takes opens, yet was answered from knowledge",
							seed, mode, ri, round[i].pkt)
					}
					knowledge[round[i].pkt] = learn(t, b)
				}
			}
			if !slices.Equal(r.lines, want) {
				t.Errorf("seed %d, %s: outcomes differ from one at a time: %s", seed, mode, diffLines(r.lines, want))
			}
			for i, id := range ids {
				p := dbtest.CheckPacket(t, db, id)
				m := model[i]
				if p.RemainingAmount != m.amount || p.RemainingCount != m.count || !slices.Equal(p.Details, m.shares) {
					t.Errorf("seed %d, %s: packet p%d: left %d/%d with shares %v, want %d/%d with %v",
						seed, mode, i, p.RemainingAmount, p.RemainingCount, p.Details, m.amount, m.count, m.shares)
				}
				if len(p.Shares) != len(p.Details) {
					t.Errorf("seed %d, %s: packet p%d: a user holds two shares: %v", seed, mode, i, p.Details)
				}
				checkCredits(t, db, p)
				// The last batch of the packet carried every share it has.
				if k := knowledge[i]; k != nil && !maps.Equal(k.Openers, p.Shares) {
					t.Errorf("seed %d, %s: packet p%d: last openers %v, MySQL %v", seed, mode, i, k.Openers, p.Shares)
				}
			}
		}
		u, k := runs["unknown"], runs["known"]
		for i := range min(len(u.openers), len(k.openers)) {
			if !maps.Equal(u.openers[i], k.openers[i]) {
				t.Errorf("seed %d: batch %d: openers known %v, read %v", seed, i, k.openers[i], u.openers[i])
			}
			pu, pk := u.packets[i], k.packets[i]
			if pu.Type != pk.Type || pu.Total != pk.Total || pu.Count != pk.Count || pu.RemainingAmount != pk.RemainingAmount ||
				pu.RemainingCount != pk.RemainingCount || pu.Closed != pk.Closed || pu.Funding != pk.Funding {
				t.Errorf("seed %d: batch %d: packet known %+v, read %+v", seed, i, pk, pu)
			}
		}
	}
	if !mixed || !knownSoldOut || knownWorks < 30 {
		t.Errorf("mixed call %v, sold-out packet known %v, %d known works: the rounds do not cover the fast path",
			mixed, knownSoldOut, knownWorks)
	}
}

// TestKnownSamePacketTwice proves two works of one packet in a call, known or not, give the one-at-a-time outcomes and rows.
func TestKnownSamePacketTwice(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := setup(t, 1)
	for _, mode := range []string{"both known", "known then unknown", "unknown then known"} {
		rnd := newDrawSource(7)
		st := store.New(db, set, loc, time.Now, rnd.intn)
		id := createPacket(t, st, buckets[0], packetSpec{hongbao.Random, 1000, 6}, hongbao.Funded)
		a, b, c, d := dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
		bs, err := st.OpenMany(ctx, []store.Work{{ID: id, Users: []hongbao.UserID{a}, OpenersUpTo: 100}})
		if err != nil {
			t.Fatal(err)
		}
		k := markKnown(learn(t, bs[0]))
		works := []store.Work{
			{ID: id, Users: []hongbao.UserID{b, a}, OpenersUpTo: 100, Known: k},
			{ID: id, Users: []hongbao.UserID{c, b, d}, OpenersUpTo: 100, Known: k},
		}
		switch mode {
		case "known then unknown":
			works[1].Known = nil
		case "unknown then known":
			works[0].Known = nil
		}
		truth := readState(t, db, id)
		rnd.reset(99)
		bs, err = st.OpenMany(ctx, works)
		if err != nil {
			t.Fatalf("%s: %v", mode, err)
		}
		// Whatever attempts the store made, the committed outcomes are the
		// one-at-a-time ones against MySQL; with every work known there is
		// no retry, so the draws are exactly the model's.
		var lines []string
		for i, b := range bs {
			lines = append(lines, printBatch(t, 0, works[i], b)...)
		}
		p := dbtest.CheckPacket(t, db, id)
		checkCredits(t, db, p)
		if mode == "both known" {
			want := applyModel(seeded(99), []modelWork{{0, truth, works[0].Users}, {0, truth, works[1].Users}})
			if !slices.Equal(lines, want) {
				t.Errorf("%s: %s", mode, diffLines(lines, want))
			}
		}
		// Shares answered are the rows; a, b, c, d hold one each.
		for i, b := range bs {
			for j, o := range b.Outcomes {
				u := works[i].Users[j]
				if o.Err != nil || p.Shares[u] != o.Result.Amount {
					t.Errorf("%s: work %d user %s: %+v, MySQL %d", mode, i, u, o, p.Shares[u])
				}
			}
			if !maps.Equal(b.Openers, p.Shares) {
				t.Errorf("%s: work %d: openers %v, MySQL %v", mode, i, b.Openers, p.Shares)
			}
		}
		if len(p.Shares) != 4 || p.RemainingCount != 2 {
			t.Errorf("%s: %d shares, %d left; want 4 and 2", mode, len(p.Shares), p.RemainingCount)
		}
		t.Logf("%s: %d draws for 3 new shares", mode, rnd.count()-1)
	}
}

// TestKnownNilOpeners: Known{Openers: nil} means a packet with no shares yet: it opens (a nil map once panicked in drawShares).
func TestKnownNilOpeners(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := setup(t, 1)
	st := store.New(db, set, loc, time.Now, rand.Int64N)
	id := createPacket(t, st, buckets[0], packetSpec{hongbao.Fixed, 500, 5}, hongbao.Funded)
	p, _, err := st.Packet(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	u := dbtest.FreshUser()
	var bs []store.Batch
	func() {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		bs, err = st.OpenMany(ctx, []store.Work{{ID: id, Users: []hongbao.UserID{u}, Known: &hongbao.Snapshot{Packet: *p}}})
	}()
	if err != nil {
		t.Fatalf("OpenMany with Known{Openers: nil} of a packet with no share: %v", err)
	}
	if o := bs[0].Outcomes[0]; o.Err != nil || o.Result.Status != hongbao.Opened || o.Result.Amount != 100 {
		t.Errorf("outcome %+v, want opened 100 fen", o)
	}
	checkCredits(t, db, dbtest.CheckPacket(t, db, id))
}

// TestKnownUsable: knowledge stands in for a read only for a funded packet
// taking opens whose openers add up to its shares.
func TestKnownUsable(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	base := hongbao.Packet{Count: 3, RemainingCount: 2, RemainingAmount: 200, Total: 300, ExpiresAt: now.Add(time.Hour), Funding: hongbao.Funded}
	one := map[hongbao.UserID]int64{7: 100}
	for _, tc := range []struct {
		name string
		edit func(k *hongbao.Snapshot)
		want bool
	}{
		{"live, openers add up", func(*hongbao.Snapshot) {}, true},
		{"an opener missing", func(k *hongbao.Snapshot) { k.Openers = map[hongbao.UserID]int64{} }, false},
		{"an opener too many", func(k *hongbao.Snapshot) { k.Openers = map[hongbao.UserID]int64{7: 100, 8: 1} }, false},
		{"pending funding", func(k *hongbao.Snapshot) { k.Packet.Funding = hongbao.Pending }, false},
		{"closed", func(k *hongbao.Snapshot) { k.Packet.Closed = true }, false},
		{"expired", func(k *hongbao.Snapshot) { k.Packet.ExpiresAt = now }, false},
		{"sold out", func(k *hongbao.Snapshot) {
			k.Packet.RemainingCount, k.Openers = 0, map[hongbao.UserID]int64{7: 100, 8: 100, 9: 100}
		}, false},
		{"fresh, no openers (nil)", func(k *hongbao.Snapshot) { k.Packet.RemainingCount, k.Openers = 3, nil }, true},
		{"unlisted", func(k *hongbao.Snapshot) { k.Openers, k.Unlisted = nil, true }, true},
		{"unlisted, expired", func(k *hongbao.Snapshot) { k.Openers, k.Unlisted, k.Packet.ExpiresAt = nil, true, now }, false},
		{"unlisted, sold out", func(k *hongbao.Snapshot) { k.Openers, k.Unlisted, k.Packet.RemainingCount = nil, true, 0 }, false},
		{"unlisted, pending funding", func(k *hongbao.Snapshot) { k.Openers, k.Unlisted, k.Packet.Funding = nil, true, hongbao.Pending }, false},
	} {
		k := &hongbao.Snapshot{Packet: base, Openers: maps.Clone(one)}
		tc.edit(k)
		if got := k.Usable(now); got != tc.want {
			t.Errorf("%s: Usable = %v, want %v", tc.name, got, tc.want)
		}
	}
	if (*hongbao.Snapshot)(nil).Usable(now) {
		t.Error("nil knowledge is usable")
	}
}

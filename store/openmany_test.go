package store_test

// Integration tests of Store.OpenMany: several packets' opens in one MySQL
// transaction, against the one-at-a-time model (model_test.go).

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	hongbao "github.com/hongbao-dev/hongbao"
	"github.com/hongbao-dev/hongbao/e2e/harness/dbtest"
	"github.com/hongbao-dev/hongbao/store"
)

// TestOpenManyMatchesSequential: with the same seeded draws, applying the
// works one OpenMany per round (several packets per transaction) and one
// OpenBatch per work in the same order give exactly the outcomes and the
// shares of opening one at a time in memory, including users twice in one
// work, users opening again in a later round and packets selling out in
// the middle of a transaction; and every packet's invariants hold.
func TestOpenManyMatchesSequential(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := setup(t, 2)
	specs := []packetSpec{
		{hongbao.Random, 1000, 10},
		{hongbao.Fixed, 300, 3},
		{hongbao.Random, 5, 3},
		{hongbao.Random, 777, 7},
		{hongbao.Fixed, 100, 1},
		{hongbao.Random, 3, 3},
		{hongbao.Fixed, 800, 8},
	}
	for seed := uint64(1); seed <= 4; seed++ {
		rounds := seededRounds(seed, len(specs))
		want, model := runModel(seed, specs, rounds)
		soldOutMidway := false
		for _, m := range model {
			soldOutMidway = soldOutMidway || m.count == 0
		}
		if !soldOutMidway {
			t.Fatalf("seed %d: no packet sells out: the test would not cover sold_out", seed)
		}
		for _, mode := range []string{"OpenMany per round", "OpenBatch per work"} {
			st := store.New(db, set, loc, time.Now, seeded(seed))
			ids := make([]hongbao.PacketID, len(specs))
			for i, sp := range specs {
				ids[i] = createPacket(t, st, buckets[i%len(buckets)], sp, hongbao.Funded)
			}
			var got []string
			for _, round := range rounds {
				works := make([]store.Work, len(round))
				for i, w := range round {
					works[i] = store.Work{ID: ids[w.pkt], Users: w.users}
				}
				if mode == "OpenMany per round" {
					bs, err := st.OpenMany(ctx, works)
					if err != nil {
						t.Fatalf("seed %d: OpenMany: %v", seed, err)
					}
					if len(bs) != len(works) {
						t.Fatalf("seed %d: %d batches for %d works", seed, len(bs), len(works))
					}
					for i, b := range bs {
						got = append(got, printBatch(t, round[i].pkt, works[i], b)...)
					}
					continue
				}
				for i, w := range works {
					b, err := st.OpenBatch(ctx, w.ID, w.Users)
					if err != nil {
						t.Fatalf("seed %d: OpenBatch: %v", seed, err)
					}
					got = append(got, printBatch(t, round[i].pkt, w, b)...)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("seed %d, %s: outcomes differ from one at a time: %s\ngot  %v\nwant %v",
					seed, mode, diffLines(got, want), got, want)
			}
			for i, id := range ids {
				p := dbtest.CheckPacket(t, db, id)
				m := model[i]
				if p.RemainingAmount != m.amount || p.RemainingCount != m.count || !slices.Equal(p.Details, m.shares) {
					t.Errorf("seed %d, %s: packet p%d %s: left %d/%d with shares %v, want %d/%d with %v",
						seed, mode, i, id, p.RemainingAmount, p.RemainingCount, p.Details, m.amount, m.count, m.shares)
				}
				checkCredits(t, db, p)
				sp, recs, err := st.Packet(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if sp.RemainingAmount != p.RemainingAmount || sp.RemainingCount != p.RemainingCount || len(recs) != len(p.Details) {
					t.Errorf("seed %d: Store.Packet(%s) says %d/%d with %d records, MySQL %d/%d with %d",
						seed, id, sp.RemainingAmount, sp.RemainingCount, len(recs), p.RemainingAmount, p.RemainingCount, len(p.Details))
				}
			}
		}
	}
}

// TestOpenManyOpeners: a work asking for the openers (SoldOutOpenersUpTo >=
// Count) gets exactly the packet's shares in MySQL when its transaction
// leaves the packet sold out, whether this transaction took the last
// share or the packet was sold out before; it gets nil when it asks for
// fewer than Count, not at all, or the packet still has shares. Each case
// runs alone, and all together in one transaction (in order and reversed).
func TestOpenManyOpeners(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := setup(t, 2)
	const (
		op = hongbao.Opened
		ao = hongbao.AlreadyOpened
		so = "sold_out"
	)
	type tcase struct {
		name    string
		sp      packetSpec
		before  []int // users who opened in an earlier transaction
		users   []int
		upTo    int
		want    []string // status or error code per user
		openers bool
	}
	cases := []tcase{
		{"sells out, up to = count", packetSpec{hongbao.Random, 300, 3}, nil, []int{1, 2, 2, 3, 4}, 3,
			[]string{op, op, ao, op, so}, true},
		{"sells out, up to > count", packetSpec{hongbao.Fixed, 300, 3}, nil, []int{1, 2, 3}, 100,
			[]string{op, op, op}, true},
		{"sells out, up to < count", packetSpec{hongbao.Random, 300, 3}, nil, []int{1, 2, 3, 4}, 2,
			[]string{op, op, op, so}, false},
		{"sells out, not asked", packetSpec{hongbao.Random, 200, 2}, nil, []int{1, 2}, 0,
			[]string{op, op}, false},
		{"last share after earlier opens", packetSpec{hongbao.Random, 500, 5}, []int{1, 2, 3, 4}, []int{4, 5, 6}, 5,
			[]string{ao, op, so}, true},
		{"sold out before, new user", packetSpec{hongbao.Fixed, 300, 3}, []int{1, 2, 3}, []int{4}, 3,
			[]string{so}, true},
		{"sold out before, opener again", packetSpec{hongbao.Random, 300, 3}, []int{1, 2, 3}, []int{2, 5}, 10,
			[]string{ao, so}, true},
		{"sold out before, up to < count", packetSpec{hongbao.Random, 300, 3}, []int{1, 2, 3}, []int{4}, 2,
			[]string{so}, false},
		{"not sold out", packetSpec{hongbao.Random, 500, 5}, []int{1}, []int{2, 3}, 10,
			[]string{op, op}, false},
		{"count 1", packetSpec{hongbao.Fixed, 100, 1}, nil, []int{1, 1, 2}, 1,
			[]string{op, ao, so}, true},
	}
	user := func(n int) hongbao.UserID { return hongbao.UserID(7000 + n) }
	users := func(ns []int) []hongbao.UserID {
		var us []hongbao.UserID
		for _, n := range ns {
			us = append(us, user(n))
		}
		return us
	}
	for _, mode := range []string{"alone", "together", "together reversed"} {
		st := store.New(db, set, loc, time.Now, rand.Int64N)
		works := make([]store.Work, len(cases))
		var before []store.Work
		for i, c := range cases {
			id := createPacket(t, st, buckets[i%len(buckets)], c.sp, hongbao.Funded)
			works[i] = store.Work{ID: id, Users: users(c.users), SoldOutOpenersUpTo: c.upTo}
			if c.before != nil {
				before = append(before, store.Work{ID: id, Users: users(c.before), SoldOutOpenersUpTo: 0})
			}
		}
		bs, err := st.OpenMany(ctx, before)
		if err != nil {
			t.Fatalf("%s: opens before: %v", mode, err)
		}
		for i, b := range bs {
			if b.Openers != nil {
				t.Errorf("%s: opens before of %s, not asked for openers, got %v", mode, before[i].ID, b.Openers)
			}
		}
		got := make([]store.Batch, len(cases))
		switch mode {
		case "alone":
			for i, w := range works {
				bs, err := st.OpenMany(ctx, []store.Work{w})
				if err != nil {
					t.Fatalf("%s: %s: %v", mode, cases[i].name, err)
				}
				got[i] = bs[0]
			}
		case "together":
			bs, err := st.OpenMany(ctx, works)
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			copy(got, bs)
		case "together reversed":
			rev := slices.Clone(works)
			slices.Reverse(rev)
			bs, err := st.OpenMany(ctx, rev)
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			slices.Reverse(bs)
			copy(got, bs)
		}
		for i, c := range cases {
			b := got[i]
			var statuses []string
			for _, o := range b.Outcomes {
				if o.Err != nil {
					statuses = append(statuses, hongbao.Code(o.Err))
				} else {
					statuses = append(statuses, o.Result.Status)
				}
			}
			if !slices.Equal(statuses, c.want) {
				t.Errorf("%s: %s: outcomes %v, want %v", mode, c.name, statuses, c.want)
			}
			p := dbtest.CheckPacket(t, db, works[i].ID)
			// Every share the outcomes report is the one in MySQL.
			for j, o := range b.Outcomes {
				if o.Err == nil && (o.Result.User != works[i].Users[j] || p.Shares[o.Result.User] != o.Result.Amount) {
					t.Errorf("%s: %s: outcome %+v, MySQL share %d", mode, c.name, o.Result, p.Shares[works[i].Users[j]])
				}
			}
			switch {
			case !c.openers && b.Openers != nil:
				t.Errorf("%s: %s: Openers %v, want nil", mode, c.name, b.Openers)
			case c.openers && b.Openers == nil:
				t.Errorf("%s: %s: Openers nil, want the shares %v", mode, c.name, p.Shares)
			case c.openers && !maps.Equal(b.Openers, p.Shares):
				t.Errorf("%s: %s: Openers %v, MySQL shares %v", mode, c.name, b.Openers, p.Shares)
			}
			if c.openers && (p.RemainingCount != 0 || len(p.Shares) != c.sp.count) {
				t.Errorf("%s: %s: want a sold-out packet, MySQL has %d left, %d shares", mode, c.name, p.RemainingCount, len(p.Shares))
			}
		}
	}
}

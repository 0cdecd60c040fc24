package store_test

// Integration tests of the openers a batch carries: answered from
// knowledge without a write or a lock, and exactly the detail rows when
// asked for, with or without knowledge.

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

// TestKnownOpenersAnswer proves a user in Known.Openers of a live packet gets already_opened with that amount without any write or row lock, and that a sold-out or expired known packet is read instead, with the same answers.
func TestKnownOpenersAnswer(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := setup(t, 2)
	clock := &dbtest.Clock{}
	clock.Set(time.Now())
	st := store.New(db, set, loc, clock.Now, rand.Int64N)
	a, b, c, d, n := dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser(), dbtest.FreshUser()
	live := createPacket(t, st, buckets[0], packetSpec{hongbao.Random, 1000, 10}, hongbao.Funded)
	soldOut := createPacket(t, st, buckets[1], packetSpec{hongbao.Fixed, 200, 2}, hongbao.Funded)
	bs, err := st.OpenMany(ctx, []store.Work{
		{ID: live, Users: []hongbao.UserID{a, b}, OpenersUpTo: 100},
		{ID: soldOut, Users: []hongbao.UserID{c, d}, OpenersUpTo: 100},
	})
	if err != nil {
		t.Fatal(err)
	}
	kLive, kSold := learn(t, bs[0]), learn(t, bs[1])
	if kSold.Packet.RemainingCount != 0 || len(kLive.Openers) != 2 {
		t.Fatalf("setup: knowledge %+v, %+v", kLive, kSold)
	}
	ao := func(u hongbao.UserID, amount int64) string {
		return fmt.Sprintf("%s:%s:%d", u, hongbao.AlreadyOpened, amount)
	}
	for _, tc := range []struct {
		name  string
		later time.Duration // the store's clock is this far ahead
		works []store.Work
		want  [][]string
	}{
		{"live", 0, []store.Work{{ID: live, Users: []hongbao.UserID{a, b, a}, OpenersUpTo: 100, Known: markKnown(kLive)}},
			[][]string{{ao(a, kLive.Openers[a]), ao(b, kLive.Openers[b]), ao(a, kLive.Openers[a])}}},
		{"sold out", 0, []store.Work{{ID: soldOut, Users: []hongbao.UserID{n, c}, OpenersUpTo: 100, Known: markKnown(kSold)}},
			[][]string{{n.String() + ":sold_out", ao(c, 100)}}},
		{"expired", 2 * time.Hour, []store.Work{{ID: live, Users: []hongbao.UserID{b, n}, OpenersUpTo: 100, Known: markKnown(kLive)}},
			[][]string{{ao(b, kLive.Openers[b]), n.String() + ":expired"}}},
		{"both packets", 0, []store.Work{
			{ID: soldOut, Users: []hongbao.UserID{d}, OpenersUpTo: 100, Known: markKnown(kSold)},
			{ID: live, Users: []hongbao.UserID{b}, OpenersUpTo: 100, Known: markKnown(kLive)}},
			[][]string{{ao(d, 100)}, {ao(b, kLive.Openers[b])}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			clock.Set(start.Add(tc.later))
			defer clock.Set(start)
			counts := map[hongbao.PacketID][2]int{}
			for _, id := range []hongbao.PacketID{live, soldOut} {
				dn, cn := countRows(t, db, id)
				counts[id] = [2]int{dn, cn}
			}
			// Hold both packet rows: a transaction that read (or locked)
			// them would wait, and the call would run out of time.
			lock, err := db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer lock.Rollback()                //nolint:errcheck // only locks
			reads := map[hongbao.PacketID]bool{} // no longer taking opens at the store's time: read
			for _, w := range tc.works {
				reads[w.ID] = w.Known.Packet.StatusAt(clock.Now()) != hongbao.Active
			}
			for _, id := range []hongbao.PacketID{live, soldOut} {
				if reads[id] || !slices.ContainsFunc(tc.works, func(w store.Work) bool { return w.ID == id }) {
					continue // the store must read it (or has no business with it)
				}
				pt, _ := dbtest.Tables(t, id)
				var got hongbao.PacketID
				if err := lock.QueryRowContext(ctx, "SELECT id FROM "+pt+" WHERE id = ? FOR UPDATE", id).Scan(&got); err != nil {
					t.Fatal(err)
				}
			}
			cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			defer cancel()
			bs, err := st.OpenMany(cctx, tc.works)
			if err != nil {
				t.Fatalf("OpenMany with the rows locked elsewhere: %v (it read or wrote the packets)", err)
			}
			_ = lock.Rollback()
			for i, w := range tc.works {
				var got []string
				for j, o := range bs[i].Outcomes {
					got = append(got, printOutcome(w.Users[j], o))
				}
				if !slices.Equal(got, tc.want[i]) {
					t.Errorf("work %d: outcomes %v, want %v", i, got, tc.want[i])
				}
				if bs[i].Packet == nil || (bs[i].Packet.Greeting == knownMarker) == reads[w.ID] || bs[i].Packet.RemainingCount != w.Known.Packet.RemainingCount {
					t.Errorf("work %d: packet %+v, want the known one (read from MySQL: %v)", i, bs[i].Packet, reads[w.ID])
				}
				if !maps.Equal(bs[i].Openers, w.Known.Openers) {
					t.Errorf("work %d: openers %v, known %v", i, bs[i].Openers, w.Known.Openers)
				}
			}
			for id, c := range counts {
				if dn, cn := countRows(t, db, id); dn != c[0] || cn != c[1] {
					t.Errorf("packet %s: %d details and %d credits, %d and %d before: answering from knowledge wrote", id, dn, cn, c[0], c[1])
				}
			}
		})
	}

	// A known opener and a newcomer in one work: the opener is answered
	// from knowledge, the newcomer gets a share; exactly one row each.
	dn, cn := countRows(t, db, live)
	bs, err = st.OpenMany(ctx, []store.Work{{ID: live, Users: []hongbao.UserID{a, n, n}, OpenersUpTo: 100, Known: markKnown(kLive)}})
	if err != nil {
		t.Fatal(err)
	}
	p := dbtest.CheckPacket(t, db, live)
	checkCredits(t, db, p)
	want := []string{ao(a, kLive.Openers[a]), fmt.Sprintf("%s:%s:%d", n, hongbao.Opened, p.Shares[n]), ao(n, p.Shares[n])}
	var got []string
	for j, o := range bs[0].Outcomes {
		got = append(got, printOutcome([]hongbao.UserID{a, n, n}[j], o))
	}
	if !slices.Equal(got, want) || bs[0].Packet.Greeting != knownMarker {
		t.Errorf("known opener and newcomer: %v (greeting %q), want %v from the knowledge", got, bs[0].Packet.Greeting, want)
	}
	if dn2, cn2 := countRows(t, db, live); dn2 != dn+1 || cn2 != cn+1 || p.RemainingCount != 7 {
		t.Errorf("known opener and newcomer: details %d -> %d, credits %d -> %d, %d left; want one more each, 7 left", dn, dn2, cn, cn2, p.RemainingCount)
	}
	if wantOpeners := map[hongbao.UserID]int64{a: p.Shares[a], b: p.Shares[b], n: p.Shares[n]}; !maps.Equal(bs[0].Openers, wantOpeners) ||
		!maps.Equal(p.Shares, wantOpeners) {
		t.Errorf("openers %v, MySQL %v", bs[0].Openers, p.Shares)
	}
}

// TestKnownOpenersUpTo proves Batch.Openers is exactly the detail rows when Count <= OpenersUpTo (or sold out and <= SoldOutOpenersUpTo), else nil, with or without knowledge.
func TestKnownOpenersUpTo(t *testing.T) {
	ctx := context.Background()
	db, loc, set, buckets := setup(t, 2)
	type tcase struct {
		name           string
		sp             packetSpec
		before, users  []int
		upTo, soldUpTo int
		want           bool
	}
	cases := []tcase{
		{"live, up to = count", packetSpec{hongbao.Random, 500, 5}, []int{1}, []int{2}, 5, 0, true},
		{"live, up to > count", packetSpec{hongbao.Random, 500, 5}, []int{1, 2}, []int{3}, 1000, 0, true},
		{"live, up to = count - 1", packetSpec{hongbao.Random, 500, 5}, []int{1}, []int{2}, 4, 100, false},
		{"live, not asked", packetSpec{hongbao.Random, 500, 5}, []int{1}, []int{2}, 0, 100, false},
		{"live, only repeats", packetSpec{hongbao.Fixed, 500, 5}, []int{1, 2}, []int{2, 1}, 5, 0, true},
		{"live, no users", packetSpec{hongbao.Random, 500, 5}, []int{1}, nil, 5, 0, true},
		{"no share yet, no users", packetSpec{hongbao.Random, 500, 5}, nil, nil, 5, 0, true},
		{"sells out, up to = count", packetSpec{hongbao.Random, 300, 3}, []int{1}, []int{2, 3, 4}, 3, 0, true},
		{"sells out, sold-out up to = count", packetSpec{hongbao.Random, 300, 3}, []int{1}, []int{2, 3}, 2, 3, true},
		{"sells out, both < count", packetSpec{hongbao.Random, 300, 3}, []int{1}, []int{2, 3}, 2, 2, false},
		{"sold out before, up to = count", packetSpec{hongbao.Fixed, 200, 2}, []int{1, 2}, []int{3}, 2, 0, true},
		{"sold out before, both < count", packetSpec{hongbao.Fixed, 200, 2}, []int{1, 2}, []int{3, 1}, 1, 1, false},
		{"large, up to > count", packetSpec{hongbao.Random, 10000, 100}, []int{1, 2, 3}, []int{4, 5}, 1000, 0, true},
		{"large, up to < count", packetSpec{hongbao.Random, 10000, 100}, []int{1, 2, 3}, []int{4, 5}, 99, 1000, false},
	}
	st := store.New(db, set, loc, time.Now, rand.Int64N)
	for _, mode := range []string{"unknown, alone", "known, alone", "known, together", "mixed, together"} {
		users := func(ns []int) []hongbao.UserID {
			var us []hongbao.UserID
			for _, n := range ns {
				us = append(us, hongbao.UserID(9000+n))
			}
			return us
		}
		works := make([]store.Work, len(cases))
		var first []store.Work
		for i, c := range cases {
			id := createPacket(t, st, buckets[i%len(buckets)], c.sp, hongbao.Funded)
			first = append(first, store.Work{ID: id, Users: users(c.before), OpenersUpTo: 1000})
			works[i] = store.Work{ID: id, Users: users(c.users), OpenersUpTo: c.upTo, SoldOutOpenersUpTo: c.soldUpTo}
		}
		bs, err := st.OpenMany(ctx, first)
		if err != nil {
			t.Fatalf("%s: first opens: %v", mode, err)
		}
		for i := range works {
			if mode != "unknown, alone" && (mode != "mixed, together" || i%2 == 0) {
				works[i].Known = markKnown(learn(t, bs[i]))
			}
		}
		got := make([]store.Batch, len(works))
		if mode == "unknown, alone" || mode == "known, alone" {
			for i, w := range works {
				bs, err := st.OpenMany(ctx, []store.Work{w})
				if err != nil {
					t.Fatalf("%s: %s: %v", mode, cases[i].name, err)
				}
				got[i] = bs[0]
			}
		} else {
			bs, err := st.OpenMany(ctx, works)
			if err != nil {
				t.Fatalf("%s: %v", mode, err)
			}
			copy(got, bs)
		}
		for i, c := range cases {
			b, w := got[i], works[i]
			p := dbtest.CheckPacket(t, db, w.ID)
			checkCredits(t, db, p)
			for j, o := range b.Outcomes {
				if o.Err == nil && p.Shares[w.Users[j]] != o.Result.Amount {
					t.Errorf("%s: %s: outcome %+v, MySQL share %d", mode, c.name, o.Result, p.Shares[w.Users[j]])
				}
			}
			switch usable := takesOpens(w.Known); {
			case usable && b.Packet.Greeting != knownMarker:
				t.Errorf("%s: %s: the knowledge attempt failed", mode, c.name)
			case !usable && b.Packet.Greeting == knownMarker:
				t.Errorf("%s: %s: a sold-out packet answered from knowledge", mode, c.name)
			}
			rows := map[hongbao.UserID]int64{}
			for _, s := range p.Details {
				rows[s.User] = s.Amount
			}
			switch {
			case !c.want && b.Openers != nil:
				t.Errorf("%s: %s: openers %v, want nil (%d shares, %d left, up to %d, sold out up to %d)",
					mode, c.name, b.Openers, c.sp.count, p.RemainingCount, c.upTo, c.soldUpTo)
			case c.want && b.Openers == nil:
				t.Errorf("%s: %s: openers nil, want the %d rows %v", mode, c.name, len(p.Details), rows)
			case c.want && (!maps.Equal(b.Openers, rows) || len(b.Openers) != len(p.Details)):
				t.Errorf("%s: %s: openers %v, rows %v", mode, c.name, b.Openers, p.Details)
			}
		}
	}
}
